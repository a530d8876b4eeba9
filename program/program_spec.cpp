// The program schema: see program_spec.h.
#include "program_spec.h"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <stdexcept>

#include <fmt/format.h>

#include "bad_input.h"
#include "config_reader.h"
#include "toml_json.h"

namespace trainctl {

namespace {

// A placeholder that cannot be filled in; the schema reports it at the command's element.
class PlaceholderError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// `element` with each {name} replaced by value_of(name); {{ and }} stand for literal braces.
std::string fill_placeholders(const std::string& element, const std::function<std::string(const std::string&)>& value_of) {
  std::string filled;
  for (size_t at = 0; at < element.size(); ++at) {
    const char c = element[at];
    const bool doubled = at + 1 < element.size() && element[at + 1] == c;
    if ((c == '{' || c == '}') && doubled) {
      filled += c;
      ++at;
    } else if (c == '{') {
      const size_t close = element.find('}', at + 1);
      if (close == std::string::npos)
        throw PlaceholderError("\"{\" opens a placeholder that is never closed; write {{ for a literal brace");
      filled += value_of(element.substr(at + 1, close - at - 1));
      at = close;
    } else if (c == '}') {
      throw PlaceholderError("\"}\" closes no placeholder; write }} for a literal brace");
    } else {
      filled += c;
    }
  }
  return filled;
}

constexpr std::string_view kParamsPrefix = "params.";
constexpr std::string_view kBudgetPlaceholder = "budget.steps";

// A [params] value as one argument: strings as they are, numbers as the shortest text that reads
// back as the same number (3e-4 is "0.0003"), booleans as true and false.
std::string argument_text(const std::string& name, const toml::node& value) {
  if (auto text = value.value_exact<std::string>()) {
    if (text->find('\0') != std::string::npos)
      throw PlaceholderError(fmt::format("{{{}}} holds a NUL character, which no argument can", name));
    return *text;
  }
  if (auto integer = value.value_exact<int64_t>()) return fmt::format("{}", *integer);
  if (auto number = value.value_exact<double>()) return fmt::format("{}", *number);
  if (auto flag = value.value_exact<bool>()) return *flag ? "true" : "false";
  throw PlaceholderError(fmt::format("{{{}}} is {}; only a string, a number or a boolean can be an argument", name,
                                     value.is_array() ? "an array" : value.is_table() ? "a table" : "a date or time"));
}

// The value of placeholder `name` for the run directory `run`, in a start with step budget `budget`.
std::string placeholder_value(const std::string& name, const ProgramSpec& program, const RunLayout& run,
                              std::optional<int64_t> budget) {
  if (name == "run_dir") return run.path();
  if (name == "checkpoint_dir") return run.checkpoints();
  if (name == kBudgetPlaceholder) {
    if (!budget)
      throw BadInput("{budget.steps} has no value: TRAINCTL_BUDGET_STEPS is set by the batch script of a sweep with "
                     "[sweep.schedule]");
    return std::to_string(*budget);
  }
  if (name.starts_with(kParamsPrefix)) {
    if (const toml::node* value = program.params.get(name.substr(kParamsPrefix.size())))
      return argument_text(name, *value);
  }
  std::vector<std::string> known{"run_dir", "checkpoint_dir", std::string(kBudgetPlaceholder)};
  for (const auto& [key, value] : program.params) known.push_back(std::string(kParamsPrefix) + std::string(key.str()));
  std::string message = fmt::format("unknown placeholder {{{}}}", name);
  if (auto suggestion = nearest_key(name, known)) message += fmt::format(" (did you mean {{{}}}?)", *suggestion);
  throw PlaceholderError(message + "; the placeholders are {run_dir}, {checkpoint_dir}, {params.NAME} for a key "
                                   "NAME of [params] and, in a sweep with [sweep.schedule], {budget.steps}; write {{ "
                                   "and }} for literal braces");
}

std::string filled_element(const std::string& element, const ProgramSpec& program, const RunLayout& run,
                           std::optional<int64_t> budget) {
  return fill_placeholders(element,
                           [&](const std::string& name) { return placeholder_value(name, program, run, budget); });
}

}  // namespace

bool has_program(const toml::table& root) { return root.contains("program"); }

ProgramSpec parse_program_spec(const toml::table& root, const std::string& file) {
  TableReader reader = TableReader::child(root, "program", file);
  if (!reader.present()) reader.fail("command", "required table [program] is missing");
  ProgramSpec program;
  program.command = reader.string_list("command");
  if (program.command.empty())
    reader.fail("command", "is empty; give the program and its arguments, such as [\"python3\", \"train.py\"]");
  if (std::optional<std::string> workdir = reader.optional_string("workdir")) {
    if (workdir->empty()) reader.fail("workdir", "is empty; leave it out to run in the config file's directory");
    program.workdir = *workdir;
  }
  if (reader.has("snapshot")) program.snapshot = reader.choice("snapshot", {"git", "files", "none"});
  if (reader.has("snapshot_include")) {
    program.snapshot_include = reader.string_list("snapshot_include");
    // Patterns match paths relative to the workdir: one that leaves it would match nothing.
    for (size_t index = 0; index < program.snapshot_include->size(); ++index) {
      const std::filesystem::path pattern((*program.snapshot_include)[index]);
      if (pattern.is_absolute() ||
          std::any_of(pattern.begin(), pattern.end(), [](const std::filesystem::path& part) { return part == ".."; }))
        reader.fail("snapshot_include",
                    fmt::format("element {} ({:?}) leaves program.workdir; the patterns name files under it, relative "
                                "to it, such as \"*.py\" or \"configs/*.yaml\"",
                                index, pattern.string()));
    }
  }
  program.snapshot_max_mb = reader.integer("snapshot_max_mb", program.snapshot_max_mb, 1, 1 << 20);
  reader.reject_unknown();
  if (const toml::node* params = root.get("params")) {
    if (!params->is_table()) throw ConfigError(position_of(*params, file), "params", "expected a table of values");
    program.params = *params->as_table();
  }
  // Filled in for a stand-in run directory and budget, every placeholder is checked as each rank
  // will fill it.
  const RunLayout stand_in("/run");
  const toml::array& written = *root["program"]["command"].as_array();
  for (size_t index = 0; index < program.command.size(); ++index) {
    try {
      if (filled_element(program.command[index], program, stand_in, 1) !=
          filled_element(program.command[index], program, stand_in, 2))
        program.reads_budget = true;
    } catch (const PlaceholderError& error) {
      throw ConfigError(position_of(written[index], file), "program.command",
                        fmt::format("element {} (\"{}\"): {}", index, program.command[index], error.what()));
    }
  }
  return program;
}

std::string absolute_program_workdir(const toml::table& root, const std::string& base_dir) {
  std::filesystem::path workdir = base_dir;
  if (const toml::value<std::string>* written = root["program"]["workdir"].as_string())
    workdir = std::filesystem::path(base_dir) / written->get();  // an absolute written path replaces base_dir
  return std::filesystem::absolute(workdir).lexically_normal().string();
}

void resolve_program_workdir(toml::table& root, const std::string& base_dir) {
  toml::table* program = root["program"].as_table();
  if (program == nullptr) return;
  program->insert_or_assign("workdir", absolute_program_workdir(root, base_dir));
}

std::vector<std::string> program_argv(const ProgramSpec& program, const RunLayout& run, std::optional<int64_t> budget) {
  std::vector<std::string> argv;
  for (const std::string& element : program.command) argv.push_back(filled_element(element, program, run, budget));
  return argv;
}

std::string params_json_text(const ProgramSpec& program) { return json_text(json_of(program.params)) + "\n"; }

}  // namespace trainctl
