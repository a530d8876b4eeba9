// What the build generates from trainctl's command line (make_trainctl_app), so that neither can
// drift from the commands: the bash completion script, and help2man's include file with the man
// page's name line and a section per command.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace trainctl {

// A bash completion script for `app`: its commands and options, the values of options that take
// a set of words, and the paths its arguments take, by kind (commands.h, path_kind): directories,
// config files (*.toml), or any file.
std::string bash_completion_script(const CLI::App& app);

// help2man's --include file for `app`: [NAME] from its description, and [COMMANDS] with each
// command's usage, arguments and options (the help flag left out).
std::string man_page_commands(const CLI::App& app);

}  // namespace trainctl
