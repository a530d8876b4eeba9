// Follow-up steps: see follow_up.h.
#include "follow_up.h"

#include <fmt/format.h>

#include "config_reader.h"
#include "run_record.h"

namespace trainctl {

namespace {
constexpr int64_t kMaxSampleTokens = 100000;
}  // namespace

std::vector<FollowUpStep> parse_follow_ups(const toml::table& root, const std::string& file) {
  std::vector<FollowUpStep> steps;
  const toml::node* node = root.get("then");
  if (node == nullptr) return steps;
  const toml::array* list = node->as_array();
  if (list == nullptr || !list->is_array_of_tables())
    throw ConfigError(position_of(*node, file), "then",
                      "expected a list of follow-up steps, written [[then]] with kind = \"export\", \"evaluate\", "
                      "\"sample\" or \"command\"");
  if (list->size() > static_cast<size_t>(kMaxFollowers))
    throw ConfigError(position_of(*node, file), "then", fmt::format("at most {} follow-up steps", kMaxFollowers));
  for (size_t index = 0; index < list->size(); ++index) {
    const toml::table& table = *list->get(index)->as_table();
    TableReader reader(&table, fmt::format("then[{}]", index), file, position_of(table, file));
    FollowUpStep step;
    step.kind = reader.choice("kind", {"export", "evaluate", "sample", "command"});
    if (step.kind == "export") {
      step.out = reader.string("out", step.out);
      if (step.out.empty() || step.out.front() == '/' || step.out.find("..") != std::string::npos)
        reader.fail("out", "must be a folder inside the run directory, such as \"export\"");
    } else if (step.kind == "evaluate") {
      if (reader.has("checkpoint")) step.checkpoint = reader.integer("checkpoint", std::nullopt, 0);
    } else if (step.kind == "sample") {
      step.prompt = reader.string("prompt");
      if (step.prompt.empty()) reader.fail("prompt", "is empty; sample continues a prompt of at least one byte");
      step.tokens = reader.integer("tokens", step.tokens, 1, kMaxSampleTokens);
    } else {
      step.command = reader.string_list("command");
      if (step.command.empty()) reader.fail("command", "is empty; give the program and its arguments");
      if (step.command.front().empty()) reader.fail("command", "element 0, the program, is empty");
    }
    reader.reject_unknown();
    steps.push_back(std::move(step));
  }
  return steps;
}

std::vector<std::string> follow_up_argv(const FollowUpStep& step, const std::string& trainctl,
                                        const std::string& run_dir) {
  if (step.kind == "export") return {trainctl, "export", run_dir, "--out", run_dir + "/" + step.out};
  if (step.kind == "evaluate") {
    std::vector<std::string> argv{trainctl, "eval", run_dir};
    if (step.checkpoint) argv.insert(argv.end(), {"--ckpt", std::to_string(*step.checkpoint)});
    return argv;
  }
  if (step.kind == "sample")
    return {trainctl, "sample", run_dir, "--prompt", step.prompt, "--tokens", std::to_string(step.tokens)};
  return step.command;
}

}  // namespace trainctl
