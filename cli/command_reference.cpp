// The bash completion script and help2man's include file, from trainctl's command line: see
// command_reference.h.
#include "command_reference.h"

#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "commands.h"
#include "render.h"

namespace trainctl {

namespace {

// A command and its words ("trainctl ckpt ls").
struct CommandAndWords {
  std::string words;
  const CLI::App* app;
};

void collect_commands(const CLI::App& app, const std::string& words, std::vector<CommandAndWords>& commands) {
  commands.push_back({words, &app});
  for (const CLI::App* sub : visible_subcommands(app)) collect_commands(*sub, words + " " + sub->get_name(), commands);
}

// Every command, depth-first in the order --help lists them, trainctl itself first.
std::vector<CommandAndWords> all_commands(const CLI::App& app) {
  std::vector<CommandAndWords> commands;
  collect_commands(app, app.get_name(), commands);
  return commands;
}

// The options --help lists (CLI11 hides those without a group).
std::vector<const CLI::Option*> visible_options(const CLI::App& app) {
  return app.get_options([](const CLI::Option* option) { return !option->get_group().empty(); });
}

std::vector<std::string> names_of(const std::vector<const CLI::App*>& commands) {
  std::vector<std::string> names;
  for (const CLI::App* command : commands) names.push_back(command->get_name());
  return names;
}

// How the completion completes an option's value or an argument: the path kinds of commands.h,
// "words:A B C" for a CLI::IsMember set (CLI11 appends it to the type name as ":{A,B,C}"), or
// "text", which it leaves alone.
std::string value_kind(const CLI::Option& option) {
  const std::string type = option.get_type_name();
  if (type == path_kind::kDirectory) return "dir";
  if (type == path_kind::kConfig) return "toml";
  if (type == path_kind::kFile || type == path_kind::kPath) return "file";
  const size_t set = type.find(":{");
  if (set != std::string::npos && type.back() == '}') {
    std::string words = type.substr(set + 2, type.size() - set - 3);
    for (char& c : words)
      if (c == ',') c = ' ';
    return "words:" + words;
  }
  return "text";
}

// "-o", "--out": the names an option is written with.
std::vector<std::string> dashed_names(const CLI::Option& option) {
  std::vector<std::string> names;
  for (const std::string& name : option.get_snames()) names.push_back("-" + name);
  for (const std::string& name : option.get_lnames()) names.push_back("--" + name);
  return names;
}

bool repeats(const CLI::Option& option) {
  return option.get_items_expected_max() >= CLI::detail::expected_max_vector_size;
}

using Rows = std::vector<std::pair<std::string, std::string>>;

// A bash associative array: [key]=value for each row, under a comment saying WHAT it holds. Global
// (declare -g), since bash-completion sources the script inside a function.
std::string bash_table(std::string_view name, std::string_view what, const Rows& rows) {
  std::string table = fmt::format("# {}\ndeclare -gA {}=(\n", what, name);
  for (const auto& [key, value] : rows) table += fmt::format("  [{}]={}\n", shell_quote(key), shell_quote(value));
  return table + ")\n";
}

// The completion itself: it walks the words before the cursor through the tables above it.
constexpr std::string_view kCompletionFunctions = R"bash(
# _trainctl_complete_kind KIND WORD: the completions of WORD as a KIND of the tables above.
_trainctl_complete_kind() {
  # compopt: directories get their slash and names their quoting; it fails outside a completion.
  case $1 in
    dir) compopt -o filenames 2>/dev/null; mapfile -t COMPREPLY < <(compgen -d -- "$2") ;;
    file) compopt -o filenames 2>/dev/null; mapfile -t COMPREPLY < <(compgen -f -- "$2") ;;
    toml) compopt -o filenames 2>/dev/null; mapfile -t COMPREPLY < <(compgen -f -X '!*.toml' -- "$2"; compgen -d -- "$2") ;;
    words:*) mapfile -t COMPREPLY < <(compgen -W "${1#words:}" -- "$2") ;;
    *) COMPREPLY=() ;;
  esac
}

_trainctl() {
  local command=trainctl word value_kind="" arguments=0 i
  local current=${COMP_WORDS[COMP_CWORD]}
  # --option=VALUE reaches here as three words: bash breaks words at '='.
  [[ $current == = ]] && current=
  for ((i = 1; i < COMP_CWORD; i++)); do
    word=${COMP_WORDS[i]}
    if [[ -n $value_kind ]]; then
      [[ $word == = ]] || value_kind=""
    elif [[ $word == -* ]]; then
      value_kind=${_trainctl_option_values["$command $word"]-}
    elif ((arguments == 0)) && [[ " ${_trainctl_subcommands[$command]-} " == *" $word "* ]]; then
      command+=" $word"
    else
      arguments=$((arguments + 1))
    fi
  done

  if [[ -n $value_kind ]]; then
    _trainctl_complete_kind "$value_kind" "$current"
  elif [[ $current == -* ]]; then
    mapfile -t COMPREPLY < <(compgen -W "${_trainctl_options[$command]-}" -- "$current")
  else
    local -a kinds=(${_trainctl_arguments[$command]-})
    local kind=${kinds[arguments]-}
    if [[ -z $kind ]] && ((${#kinds[@]} > 0)) && [[ ${kinds[-1]} == *... ]]; then kind=${kinds[-1]}; fi
    _trainctl_complete_kind "${kind%...}" "$current"
    if ((arguments == 0)); then
      mapfile -t -O "${#COMPREPLY[@]}" COMPREPLY < <(compgen -W "${_trainctl_subcommands[$command]-}" -- "$current")
    fi
  fi
}
complete -F _trainctl trainctl
)bash";

// Text for a roff line: backslashes and minus signs escaped, and a line that would start with a
// control character made plain text.
std::string roff(std::string_view text) {
  std::string escaped = text.starts_with('.') || text.starts_with('\'') ? "\\&" : "";
  for (char c : text) {
    if (c == '\\')
      escaped += "\\e";
    else if (c == '-')
      escaped += "\\-";
    else
      escaped += c;
  }
  return escaped;
}

std::string man_section(const CommandAndWords& command) {
  const CLI::Formatter formatter;
  const CLI::App& app = *command.app;
  std::string section = fmt::format(".SS \"{}\"\n{}\n", roff(command.words), roff(app.get_description()));
  if (!app.get_footer().empty()) section += fmt::format(".PP\n{}\n", roff(app.get_footer()));
  std::string usage = formatter.make_usage(&app, command.words);
  while (!usage.empty() && usage.back() == '\n') usage.pop_back();
  section += fmt::format(".PP\n{}\n", roff(usage));
  for (const CLI::Option* option : visible_options(app)) {
    if (option == app.get_help_ptr()) continue;
    const bool positional = !option->nonpositional();
    section += fmt::format(".TP\n\\fB{}\\fR{}\n{}\n", roff(formatter.make_option_name(option, positional)),
                           roff(formatter.make_option_opts(option)), roff(option->get_description()));
  }
  return section;
}

}  // namespace

std::string bash_completion_script(const CLI::App& app) {
  Rows subcommands, options, option_values, arguments;
  for (const CommandAndWords& command : all_commands(app)) {
    const std::vector<const CLI::App*> subs = visible_subcommands(*command.app);
    if (!subs.empty()) subcommands.emplace_back(command.words, fmt::format("{}", fmt::join(names_of(subs), " ")));
    std::vector<std::string> names, kinds;
    for (const CLI::Option* option : visible_options(*command.app)) {
      if (!option->nonpositional()) {
        kinds.push_back(value_kind(*option) + (repeats(*option) ? "..." : ""));
        continue;
      }
      const std::vector<std::string> option_names = dashed_names(*option);
      names.insert(names.end(), option_names.begin(), option_names.end());
      if (option->get_expected_max() == 0) continue;  // a flag
      for (const std::string& name : option_names)
        option_values.emplace_back(command.words + " " + name, value_kind(*option));
    }
    options.emplace_back(command.words, fmt::format("{}", fmt::join(names, " ")));
    if (!kinds.empty()) arguments.emplace_back(command.words, fmt::format("{}", fmt::join(kinds, " ")));
  }
  return "# Bash completion for trainctl: its commands, options, option values and the paths its arguments take.\n"
         "# Generated at build time from trainctl's own command line (cli/command_reference.cpp): do not edit.\n\n" +
         bash_table("_trainctl_subcommands", "The subcommands of each command, by its words.", subcommands) +
         bash_table("_trainctl_options", "The options of each command.", options) +
         bash_table("_trainctl_option_values",
                    "What follows an option that takes a value: dir, toml, file, words:A B C, or text.", option_values) +
         bash_table("_trainctl_arguments", "A command's arguments in order, kinds as above; ... repeats.", arguments) +
         std::string(kCompletionFunctions);
}

std::string man_page_commands(const CLI::App& app) {
  std::string text = fmt::format("[NAME]\n{} \\- {}\n\n[COMMANDS]\n", app.get_name(), roff(app.get_description()));
  const std::vector<CommandAndWords> commands = all_commands(app);
  for (size_t index = 1; index < commands.size(); ++index) text += man_section(commands[index]);
  return text;
}

}  // namespace trainctl
