// trainctl eval RUN [--ckpt STEP]: a checkpoint's validation loss and accuracy on the CPU, over the
// validation set of the config it was trained with, scored as the run's world of ranks scores it
// (models/evaluation.h): each rank's share in micro-batches of train.micro_batch, the ranks' sums
// added in rank order. At the world size the checkpoint was written with, that is the loss the
// run logged at its step, which is shown beside it where metrics.jsonl has it.
#include <cmath>
#include <memory>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "commands.h"
#include "errors.h"
#include "evaluation.h"
#include "json.h"
#include "metrics_file.h"
#include "registry.h"
#include "run_layout.h"
#include "runs/stored_checkpoint.h"

namespace trainctl {

namespace {

struct EvalOptions {
  std::string path;
  std::optional<int64_t> step;
  std::optional<int64_t> world_size;
  bool json = false;
};

// The validation loss the run logged at `step` (the last, where a resumed run logged it again), or
// NaN where its metrics.jsonl has none.
double logged_val_loss(const std::string& run, int64_t step) {
  double logged = kUnknown;
  for (const MetricsLine& line : read_metrics_file(RunLayout(run).metrics()))
    if (line.eval && line.step == step) logged = line.eval->val_loss;
  return logged;
}

void evaluate_checkpoint(const EvalOptions& options) {
  const StoredCheckpoint stored =
      options.step ? load_stored_checkpoint_of_step(options.path, *options.step) : load_stored_checkpoint(options.path);
  const RunSpec& spec = stored.spec;
  if (!spec.data.val)
    throw UsageError(fmt::format("{} was trained without data.val: its config names no validation set to evaluate on",
                                 stored.path));
  const int64_t world_size = options.world_size.value_or(stored.checkpoint.meta.world_size);
  const std::unique_ptr<BatchSource> data = open_model_data(spec.model, "val", *spec.data.val);
  const std::unique_ptr<Model> model = load_model_on_cpu(stored, {spec.train.micro_batch, spec.train.precision});

  Batch batch;
  DeviceBuffer<BatchResult> device_totals(model->device(), 1);
  double loss_sum = 0.0;
  int64_t correct = 0;
  for (int64_t rank = 0; rank < world_size; ++rank) {
    const BatchResult share = evaluate_examples(*model, *data, rank_share(data->examples(), rank, world_size),
                                                spec.train.micro_batch, batch, device_totals.get());
    loss_sum += share.loss_sum;
    correct += share.correct;
  }
  const ValidationScore score = validation_score(loss_sum, static_cast<double>(correct), data->examples(), *model);
  const int64_t step = stored.checkpoint.meta.step;
  const double logged = logged_val_loss(options.path, step);

  if (options.json) {
    const Json record{{"run", options.path},
                      {"checkpoint", stored.path},
                      {"step", step},
                      {"val_loss", score.loss},
                      {"accuracy", score.accuracy},
                      {"examples", data->examples()},
                      {"world_size", world_size},
                      {"logged_val_loss", logged}};
    fmt::print("{}\n", json_text(record));
    return;
  }
  fmt::print("eval {} checkpoint step {}: val_loss {:.6f} (accuracy {:.4f}), {} examples, world size {}", options.path,
             step, score.loss, score.accuracy, data->examples(), world_size);
  if (std::isfinite(logged)) fmt::print("; logged val_loss {:.6f}", logged);
  fmt::print("\n");
}

}  // namespace

void add_eval_command(CLI::App& app) {
  auto* command = app.add_subcommand("eval", "a checkpoint's validation loss, as its run computed it (CPU)");
  auto options = std::make_shared<EvalOptions>();
  command->add_option("path", options->path, "run directory (its newest valid checkpoint), or a checkpoint")
      ->type_name(path_kind::kPath)
      ->required();
  command->add_option("--ckpt", options->step, "the checkpoint of this step of the run directory")
      ->type_name("STEP")
      ->check(CLI::NonNegativeNumber);
  command->add_option("--world-size", options->world_size,
                      "ranks to share the validation set among (default: those that wrote the checkpoint)")
      ->type_name("N")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  command->add_flag("--json", options->json, "print a JSON object instead of a line");
  command->callback([options] { evaluate_checkpoint(*options); });
}

}  // namespace trainctl
