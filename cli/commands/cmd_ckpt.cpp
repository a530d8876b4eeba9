// trainctl ckpt ls|inspect|verify|diff: look into checkpoints without training.
#include <cmath>
#include <filesystem>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "checkpoint_directory.h"
#include "commands.h"
#include "errors.h"
#include "runs/stored_checkpoint.h"

namespace trainctl {

namespace {

// A run directory, its checkpoints/ folder, or one checkpoint (a file or a sharded step directory).
std::vector<CheckpointEntry> checkpoints_at(const std::string& path) {
  if (is_one_checkpoint(path)) return {{path, 0}};
  const std::string folder = checkpoint_folder(path);
  if (!std::filesystem::is_directory(folder)) throw UsageError(fmt::format("{} does not exist", path));
  return list_checkpoints(folder);
}

void print_inspection(const std::string& path) {
  const Checkpoint checkpoint = load_checkpoint(path);
  const CheckpointMeta& meta = checkpoint.meta;
  fmt::print("{}\n  format_version {}, trainctl {}, created {}\n", path, meta.format_version,
             meta.trainctl_version, meta.created_utc);
  fmt::print("  step {}, epoch {}, sample_position {}, loss {:.6f}\n", meta.step, meta.epoch, meta.sample_position,
             meta.loss);
  fmt::print("  world_size {}, global_batch {}, rng_seed {}, hosts {}\n", meta.world_size, meta.global_batch,
             meta.rng_seed, meta.hostnames);
  fmt::print("  optimizer {} (step {})\n  model:\n", meta.optimizer, meta.optimizer_step);
  for (const Tensor& tensor : checkpoint.model) fmt::print("    {:<16} [{}]\n", tensor.name, fmt::join(tensor.shape, ", "));
  fmt::print("  optimizer state:\n");
  for (const Tensor& tensor : checkpoint.optimizer_state)
    fmt::print("    {:<28} [{}]\n", tensor.name, fmt::join(tensor.shape, ", "));
}

// Compares model and optimizer tensors; returns the number of tensors that differ beyond their
// tolerance: `model_rtol` for the weights, `optimizer_rtol` for the optimizer state.
int compare(const Checkpoint& a, const Checkpoint& b, double model_rtol, double optimizer_rtol) {
  auto all = [](const Checkpoint& c) {
    std::vector<Tensor> tensors = c.model;
    tensors.insert(tensors.end(), c.optimizer_state.begin(), c.optimizer_state.end());
    return tensors;
  };
  const std::vector<Tensor> left = all(a), right = all(b);
  const size_t model_tensors = a.model.size();
  if (left.size() != right.size()) {
    fmt::print("different tensor counts: {} and {}\n", left.size(), right.size());
    return 1;
  }
  int differing = 0;
  for (size_t t = 0; t < left.size(); ++t) {
    if (left[t].name != right[t].name || left[t].shape != right[t].shape) {
      fmt::print("{}: differs in name or shape from {}\n", left[t].name, right[t].name);
      ++differing;
      continue;
    }
    // Relative to the tensor's scale, max|a-b| / max|a|: elementwise ratios blow up near zero.
    double scale = 0.0, worst = -1.0;
    size_t worst_index = 0;
    for (size_t i = 0; i < left[t].values.size(); ++i) {
      scale = std::max(scale, std::abs(static_cast<double>(left[t].values[i])));
      const double difference = std::abs(static_cast<double>(left[t].values[i]) - right[t].values[i]);
      if (difference > worst) {
        worst = difference;
        worst_index = i;
      }
    }
    const double rtol = t < model_tensors ? model_rtol : optimizer_rtol;
    const bool equal = rtol == 0.0 ? left[t].values == right[t].values : worst <= rtol * scale;
    if (!equal) {
      fmt::print("{}: differs; worst element {}: {:.9g} vs {:.9g} (relative difference {:.3g})\n", left[t].name,
                 worst_index, left[t].values[worst_index], right[t].values[worst_index], worst / scale);
      ++differing;
    }
  }
  return differing;
}

}  // namespace

void add_ckpt_command(CLI::App& app) {
  auto* ckpt = app.add_subcommand("ckpt", "list, inspect, verify and compare checkpoints");
  ckpt->require_subcommand(1);
  auto path = std::make_shared<std::string>();

  auto* ls = ckpt->add_subcommand("ls", "list a run's checkpoints, newest first");
  ls->add_option("path", *path, "run directory or checkpoints folder")->type_name(path_kind::kDirectory)->required();
  ls->callback([path] {
    for (const CheckpointEntry& entry : checkpoints_at(*path))
      fmt::print("{:>10}  {:>10} bytes  {}\n", entry.step, checkpoint_bytes(entry.path), entry.path);
  });

  auto* inspect = ckpt->add_subcommand("inspect", "print a checkpoint's metadata and tensor shapes");
  inspect->add_option("path", *path, "checkpoint (file or step directory), or a run directory for its newest")->type_name(path_kind::kPath)->required();
  inspect->callback([path] {
    const std::vector<CheckpointEntry> entries = checkpoints_at(*path);
    if (entries.empty()) throw UsageError(fmt::format("no checkpoints in {}", *path));
    print_inspection(entries.front().path);
  });

  auto* verify = ckpt->add_subcommand("verify", "verify checksums; exit 1 if any checkpoint is bad");
  verify->add_option("path", *path, "checkpoint (file or step directory), run directory or checkpoints folder")->type_name(path_kind::kPath)->required();
  verify->callback([path] {
    int bad = 0;
    for (const CheckpointEntry& entry : checkpoints_at(*path)) {
      try {
        load_checkpoint(entry.path);
        fmt::print("ok   {}\n", entry.path);
      } catch (const CheckpointError& error) {
        fmt::print("BAD  {}\n", error.what());
        ++bad;
      }
    }
    if (bad > 0) throw Failure(fmt::format("{} bad checkpoint(s)", bad));
  });

  struct DiffOptions {
    std::string a, b;
    double rtol = 0.0;
    std::optional<double> optimizer_rtol;
  };
  auto diff_options = std::make_shared<DiffOptions>();
  auto* diff = ckpt->add_subcommand("diff", "compare two checkpoints' tensors; exit 1 if they differ");
  diff->add_option("a", diff_options->a, "checkpoint file or sharded step directory")->type_name(path_kind::kPath)->required();
  diff->add_option("b", diff_options->b, "checkpoint file or sharded step directory")->type_name(path_kind::kPath)->required();
  diff->add_option("--rtol", diff_options->rtol, "tolerance: max|a-b| <= rtol * max|a| per tensor (default 0: bitwise equal)");
  diff->add_option("--optimizer-rtol", diff_options->optimizer_rtol,
                   "tolerance for the optimizer state alone (default: --rtol): AdamW's moments average the "
                   "gradients, whose sums in another order (another world size) differ more, relative to "
                   "their scale, than the weights do");
  diff->callback([diff_options] {
    const double optimizer_rtol = diff_options->optimizer_rtol.value_or(diff_options->rtol);
    const int differing = compare(load_checkpoint(diff_options->a), load_checkpoint(diff_options->b),
                                  diff_options->rtol, optimizer_rtol);
    if (differing > 0) throw Failure(fmt::format("{} tensor(s) differ", differing));
    std::string within;
    if (diff_options->rtol > 0.0) within = fmt::format(" within rtol {}", diff_options->rtol);
    if (optimizer_rtol != diff_options->rtol) within += fmt::format(" (optimizer state {})", optimizer_rtol);
    fmt::print("identical{}\n", within);
  });
}

}  // namespace trainctl
