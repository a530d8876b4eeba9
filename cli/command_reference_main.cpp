// command-reference: a build tool, not installed, that prints what the build generates from
// trainctl's command line (command_reference.h): `bash-completion` the completion script,
// `man-commands` help2man's include file.
#include <cstring>

#include <fmt/format.h>

#include "command_reference.h"
#include "commands.h"

int main(int argc, char** argv) {
  const std::unique_ptr<CLI::App> app = trainctl::make_trainctl_app();
  if (argc == 2 && std::strcmp(argv[1], "bash-completion") == 0) {
    fmt::print("{}", trainctl::bash_completion_script(*app));
  } else if (argc == 2 && std::strcmp(argv[1], "man-commands") == 0) {
    fmt::print("{}", trainctl::man_page_commands(*app));
  } else {
    fmt::print(stderr, "usage: {} bash-completion|man-commands\n", argv[0]);
    return 2;
  }
  return 0;
}
