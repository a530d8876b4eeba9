// A whole trainctl config: see config_file.h.
#include "config_file.h"

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "bad_input.h"
#include "config_reader.h"
#include "registry.h"

namespace trainctl {

namespace {
const std::vector<std::string> kTrainingTables{"model", "data", "train", "checkpoint", "metrics"};
const std::vector<std::string> kTopLevelTables{"job",     "model",   "data",   "train", "checkpoint",
                                               "metrics", "program", "params", "sweep", "notify", "then"};
// Samples per optimizer step over all ranks; with train.steps <= 1e9 the samples of a run fit int64.
constexpr int64_t kMaxGlobalBatch = int64_t{1} << 32;

// The first (in file order) top-level entry that is not one of the known tables.
void reject_unknown_tables(const toml::table& table, const std::string& path) {
  const toml::node* first = nullptr;
  std::string first_name;
  for (const auto& [name, node] : table) {
    const std::string key(name.str());
    if (std::find(kTopLevelTables.begin(), kTopLevelTables.end(), key) != kTopLevelTables.end()) continue;
    if (first == nullptr || node.source().begin < first->source().begin) {
      first = &node;
      first_name = key;
    }
  }
  if (first == nullptr) return;
  std::string message = first->is_table() ? "unknown table" : "unknown top-level key (keys belong in a table)";
  if (auto suggestion = nearest_key(first_name, kTopLevelTables)) message += fmt::format(" (did you mean [{}]?)", *suggestion);
  throw ConfigError(position_of(*first, path), first_name, message);
}

struct Specs {
  JobSpec job;
  std::optional<NotifySpec> notify;
  std::optional<RunSpec> run;
  std::optional<ProgramSpec> program;
  std::vector<FollowUpStep> follow_ups;
};

void check_global_batch(const toml::table& table, const std::string& file, const JobSpec& job, const TrainSpec& train) {
  // Each factor is bounded by its schema, but their product may not fit int64.
  int64_t global_batch = 0;
  const bool overflows = __builtin_mul_overflow(train.micro_batch, train.grad_accum, &global_batch) ||
                         __builtin_mul_overflow(global_batch, job.world_size(), &global_batch);
  if (!overflows && global_batch <= kMaxGlobalBatch) return;
  TableReader::child(table, "train", file)
      .fail("micro_batch", fmt::format("the global batch, micro_batch ({}) x grad_accum ({}) x job.nodes ({}) x "
                                       "job.ranks_per_node ({}), must be at most {}",
                                       train.micro_batch, train.grad_accum, job.nodes, job.ranks_per_node,
                                       kMaxGlobalBatch));
}

// A [program] runs instead of trainctl's runtime: the runtime's tables would be silently unused.
void reject_training_tables(const toml::table& table, const std::string& file) {
  const uint32_t program_line = table.get("program")->source().begin.line;
  for (const std::string& name : kTrainingTables)
    if (const toml::node* node = table.get(name))
      throw ConfigError(position_of(*node, file), name,
                        fmt::format("[program] (line {}) runs your own command instead of trainctl's runtime, which "
                                    "[{}] configures; keep one of them",
                                    program_line, name));
}

// A [program]'s checkpoints are its own: trainctl's export, eval and sample cannot read them.
void reject_checkpoint_follow_ups(const toml::table& table, const std::string& file,
                                  const std::vector<FollowUpStep>& steps) {
  for (size_t index = 0; index < steps.size(); ++index)
    if (steps[index].kind != "command")
      throw ConfigError(position_of(*table["then"][index]["kind"].node(), file), fmt::format("then[{}].kind", index),
                        fmt::format("\"{}\" reads trainctl's checkpoints, and a [program] writes its own; use kind = "
                                    "\"command\" to run your own step",
                                    steps[index].kind));
}

// A kind whose loss terms are tokens predicts the next token: a LanguageModel (models/model.h),
// which `trainctl sample` decodes from. Its footprint says so without building it.
bool is_language_model(const ModelSpec& spec) {
  return std::string_view(model_kind(spec).footprint(spec, ModelOptions{}).term_unit) == "tokens";
}

// Why the run leaves no checkpoint of `step` once it has completed, or nothing when it does: it
// saves at every checkpoint.every_steps and at its end, and keeps the newest keep_last of them.
std::optional<std::string> missing_checkpoint(int64_t step, const RunSpec& run) {
  const int64_t last = run.train.steps;
  const int64_t every = run.checkpoint.every_steps;
  if (step > last) return fmt::format("the run ends at step {} (train.steps), before step {}", last, step);
  if (step != last && (step == 0 || every == 0 || step % every != 0))
    return fmt::format("the run saves no checkpoint at step {}: it saves {}at its end (step {})", step,
                       every > 0 ? fmt::format("every {} steps (checkpoint.every_steps) and ", every) : "", last);
  // The saves after it: the multiples of every_steps up to the last step, and the last step if it is none.
  const bool last_is_multiple = every > 0 && last % every == 0;
  const int64_t later = (every > 0 ? last / every - step / every : 0) + (step != last && !last_is_multiple ? 1 : 0);
  if (later >= run.checkpoint.keep_last)
    return fmt::format("the run saves {} checkpoints after step {}, and checkpoint.keep_last = {} keeps only the "
                       "newest {}: step {}'s is deleted by the time the step runs",
                       later, step, run.checkpoint.keep_last, run.checkpoint.keep_last, step);
  return std::nullopt;
}

// What a [[then]] step reads must be there once the training has completed, as far as the config
// tells: the validation set an evaluation scores, the checkpoint it names, a language model to sample.
void check_follow_ups_against_run(const toml::table& table, const std::string& file,
                                  const std::vector<FollowUpStep>& steps, const RunSpec& run) {
  for (size_t index = 0; index < steps.size(); ++index) {
    const FollowUpStep& step = steps[index];
    const toml::table& written = *table["then"][index].as_table();
    const TableReader reader(&written, fmt::format("then[{}]", index), file, position_of(written, file));
    if (step.kind == "evaluate" && !run.data.val)
      reader.fail("kind", "\"evaluate\" scores a checkpoint on the validation set, and [data] names no val");
    if (step.kind == "evaluate" && step.checkpoint)
      if (const std::optional<std::string> missing = missing_checkpoint(*step.checkpoint, run))
        reader.fail("checkpoint", *missing);
    if (step.kind == "sample" && !is_language_model(run.model))
      reader.fail("kind", fmt::format("\"sample\" continues a prompt with a language model, and model.kind = \"{}\" "
                                      "is none",
                                      run.model.kind()));
  }
}

// [job], [notify], [[then]] and either [program] or the training tables, and what they must agree on.
Specs read_specs(const toml::table& table, const std::string& file) {
  Specs specs{parse_job_spec(table, file), parse_notify_spec(table, file), std::nullopt, std::nullopt,
              parse_follow_ups(table, file)};
  if (has_program(table)) {
    reject_training_tables(table, file);
    specs.program = parse_program_spec(table, file);
    reject_checkpoint_follow_ups(table, file, specs.follow_ups);
    return specs;
  }
  if (const toml::node* params = table.get("params"))
    throw ConfigError(position_of(*params, file), "params",
                      "holds the values of a [program]'s placeholders, and this config has no [program]");
  specs.run = parse_run_spec(table, file);
  check_follow_ups_against_run(table, file, specs.follow_ups, *specs.run);
  const JobSpec& job = specs.job;
  check_global_batch(table, file, job, specs.run->train);
  if (specs.run->train.device != "cuda") return specs;
  // One rank per GPU: the runtime binds local rank r to visible GPU r.
  const TableReader reader = TableReader::child(table, "job", file);
  if (job.gpus_per_node == 0)
    reader.fail("gpus_per_node", "train.device = \"cuda\" needs GPUs: set gpus_per_node, and ranks_per_node to the "
                                 "same number (one rank per GPU)");
  if (job.ranks_per_node != job.gpus_per_node)
    reader.fail("ranks_per_node", fmt::format("train.device = \"cuda\" runs one rank per GPU, so ranks_per_node ({}) "
                                              "must equal gpus_per_node ({})",
                                              job.ranks_per_node, job.gpus_per_node));
  return specs;
}

// `table` with its relative paths resolved, as TOML text headed by its origin and `note`.
std::string resolved_config_text(const toml::table& table, const std::string& config_path, const std::string& note) {
  // Made absolute once: resolving relative paths against it needs no further getcwd.
  const std::filesystem::path absolute_config = std::filesystem::absolute(config_path);
  toml::table resolved = table;
  resolve_data_paths(resolved, absolute_config.parent_path().string());
  resolve_program_workdir(resolved, absolute_config.parent_path().string());
  resolve_webhook_file(resolved, absolute_config.parent_path().string());
  std::ostringstream text;
  text << "# resolved by trainctl " << TRAINCTL_VERSION << " from " << absolute_config.string() << "\n";
  if (!note.empty()) text << "# " << note << "\n";
  text << resolved << "\n";
  return text.str();
}
}  // namespace

Config load_config(const std::string& path) {
  if (const std::optional<std::string> problem = utf8_problem(std::filesystem::absolute(path).string()))
    throw BadInput(printable(fmt::format("config {}: its path is not UTF-8 ({}); the run directory's config.toml names "
                                         "it, and the paths resolved against it, in TOML, which holds only UTF-8: "
                                         "rename the folder",
                                         path, *problem)));
  Config config;
  config.path = path;
  config.table = parse_config_file(path);
  reject_unknown_tables(config.table, path);
  Specs specs = read_specs(config.table, path);
  config.job = std::move(specs.job);
  config.notify = std::move(specs.notify);
  config.run = std::move(specs.run);
  config.program = std::move(specs.program);
  config.follow_ups = std::move(specs.follow_ups);
  config.sweep = parse_sweep(config.table, path, [&](const toml::table& table) { check_config_table(table, path); });
  if (config.sweep && config.sweep->schedule)
    fit_schedule(*config.sweep->schedule, {config.table, path, config.run ? &*config.run : nullptr,
                                           sweep_task_count(*config.sweep), config.sweep->parameters});
  if (config.program && config.program->reads_budget && !(config.sweep && config.sweep->schedule))
    throw ConfigError(position_of(*config.table["program"]["command"].node(), path), "program.command",
                      "{budget.steps} is the step budget of a sweep's rung, and this config has no [sweep.schedule]");
  if (config.sweep && !config.follow_ups.empty())
    throw ConfigError(position_of(*config.table.get("then"), path), "then",
                      "follow-up steps run after one training job, and a [sweep] submits many; run them as a "
                      "job of their own with `trainctl submit CONFIG --after SWEEP`");
  return config;
}

void check_config_table(const toml::table& table, const std::string& file) { read_specs(table, file); }

RunFiles run_files(const toml::table& table, const std::string& config_path, const std::string& note) {
  RunFiles files{resolved_config_text(table, config_path, note), std::nullopt, holds_webhook_secret(table)};
  if (has_program(table)) files.params_json = params_json_text(parse_program_spec(table, config_path));
  return files;
}


}  // namespace trainctl
