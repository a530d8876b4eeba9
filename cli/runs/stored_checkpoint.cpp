// A checkpoint named on the command line: see stored_checkpoint.h.
#include "runs/stored_checkpoint.h"

#include <filesystem>
#include <set>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "checkpoint_directory.h"
#include "config_reader.h"
#include "errors.h"
#include "named_tensors.h"
#include "registry.h"
#include "run_layout.h"

namespace trainctl {

namespace {

StoredCheckpoint with_its_config(const std::string& path, Checkpoint checkpoint) {
  const std::string config_name = fmt::format("{} (its stored config)", path);
  RunSpec spec = parse_run_spec(parse_config_text(checkpoint.meta.config_text, config_name), config_name);
  return {path, std::move(checkpoint), std::move(spec)};
}

}  // namespace

std::string checkpoint_folder(const std::string& path) {
  const std::string run_checkpoints = RunLayout(path).checkpoints();
  return std::filesystem::is_directory(run_checkpoints) ? run_checkpoints : path;
}

StoredCheckpoint load_stored_checkpoint(const std::string& run_or_checkpoint) {
  const std::string& path = run_or_checkpoint;
  if (!std::filesystem::exists(path)) throw UsageError(fmt::format("{} does not exist", path));
  if (is_one_checkpoint(path)) return with_its_config(path, load_checkpoint(path));
  ResumePoint found = load_latest_valid(checkpoint_folder(path));
  if (!found.checkpoint && found.skipped.empty()) throw UsageError(fmt::format("no checkpoint in {}", path));
  if (!found.checkpoint)
    throw Failure(fmt::format("no checkpoint in {} verifies:\n  {}", path, fmt::join(found.skipped, "\n  ")));
  for (const std::string& skipped : found.skipped) fmt::print(stderr, "trainctl: skipped {}\n", skipped);
  return with_its_config(found.path, std::move(*found.checkpoint));
}

StoredCheckpoint load_stored_checkpoint_of_step(const std::string& run, int64_t step) {
  if (!std::filesystem::exists(run)) throw UsageError(fmt::format("{} does not exist", run));
  if (is_one_checkpoint(run))
    throw UsageError(fmt::format("{} is one checkpoint: a step is picked among those of a run directory", run));
  const std::string folder = checkpoint_folder(run);
  std::set<int64_t> steps;
  for (const std::string& listed : {folder, folder + "/" + std::string(run_file::kBestCheckpoint)}) {
    for (const CheckpointEntry& entry : list_checkpoints(listed)) {
      if (entry.step == step) return with_its_config(entry.path, load_checkpoint(entry.path));
      steps.insert(entry.step);
    }
  }
  if (steps.empty()) throw UsageError(fmt::format("no checkpoint in {}", run));
  throw UsageError(fmt::format("{} has no checkpoint of step {}; it has those of steps {}", run, step,
                               fmt::join(steps, ", ")));
}

std::unique_ptr<Model> load_model_on_cpu(const StoredCheckpoint& stored, const ModelOptions& options) {
  std::unique_ptr<Model> model = build_model(stored.spec.model, cpu_device(), options);
  const std::vector<float> parameters =
      flatten_tensors(stored.checkpoint.model, model->parameter_layout(), TensorMatch::kCheckpoint,
                      fmt::format("checkpoint {}", stored.path));
  model->device().memory.upload(Stream{}, model->parameters(), parameters.data(), parameters.size() * sizeof(float));
  return model;
}

}  // namespace trainctl
