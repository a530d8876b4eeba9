// The trainer: see trainer.h.
#include "trainer.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "atomic_file.h"
#include "bad_input.h"
#include "checkpoint_manager.h"
#include "device_activity_log.h"
#include "device_binding.h"
#include "early_stopping.h"
#include "evaluation.h"
#include "exit_codes.h"
#include "grad_sync.h"
#include "heartbeat.h"
#include "metrics.h"
#include "node_check.h"
#include "node_records.h"
#include "optimizer.h"
#include "rank_activity.h"
#include "rank_failure.h"
#include "registry.h"
#include "sampler.h"
#include "save_policy.h"
#include "shard_layout.h"
#include "signals.h"
#include "step_budget.h"
#include "step_rate.h"
#include "test_hooks.h"
#include "tokenizer.h"

namespace trainctl {

namespace {

class Run {
 public:
  // Sets up this rank by itself: no collective call, so that train() can agree on its failures.
  Run(const RunSpec& spec, const std::string& config_text, const RunLayout& layout, Comm& comm, const Device& device)
      : spec_(spec),
        layout_(layout),
        comm_(comm),
        device_(device),
        global_batch_(spec.train.micro_batch * spec.train.grad_accum * comm.world_size()),
        train_data_(open_model_data(spec.model, "train", spec.data.train)),
        val_data_(spec.data.val ? open_model_data(spec.model, "val", *spec.data.val) : nullptr),
        sampler_(make_sampler()),
        shards_(balanced_shards(flat_count(parameter_layout(spec.model)), comm.world_size())),
        model_(build_model(spec.model, device_, model_options())),
        global_terms_(global_batch_ * model_->loss_terms_per_example()),
        optimizer_(spec.train, device_, Stream{}, model_->parameter_layout(),
                   spec.train.zero > 0 ? shards_.begin(comm.rank()) : 0,
                   spec.train.zero > 0 ? shards_.end(comm.rank()) : model_->parameter_count()),
        checkpoints_(layout, spec, config_text, tokenizer_hash(), global_batch_, shards_, comm, *model_, optimizer_),
        metrics_(layout.metrics(), metrics_setup(), comm.rank() == 0),
        heartbeat_(layout.heartbeat(), comm.rank() == 0),
        step_rate_(global_terms_, model_->training_flops_per_term(),
                   device_.info.peak_flops(spec.train.precision == Precision::kBf16), comm.world_size()),
        save_policy_(spec.checkpoint, comm.rank() == 0),
        device_activity_(device_, comm.rank() == 0),
        step_scalars_(device_, step_scalar_bytes(comm.world_size())),
        eval_totals_(device_, 2) {
    require_gradient_sync(device_, comm);
  }

  // Everything from here on may call collectives.
  int run() {
    gradient_sync_ = make_gradient_sync(device_, comm_, shards_, spec_.train.zero > 0);
    model_->set_collectives(gradient_sync_.get());
    int64_t step = start();
    save_policy_.restart_interval(std::chrono::steady_clock::now());
    step_rate_.restart(std::chrono::steady_clock::now());
    // This start trains to its step budget (a sweep's rung), never past train.steps.
    const int64_t stop_at = std::min(budget_.value_or(spec_.train.steps), spec_.train.steps);
    // A run that stopped early and is started again has nothing left to do.
    while (step < stop_at && !patience_exhausted(best_, spec_.train.early_stop)) {
      note_step(step);
      if (comm_.rank() == 0) test_pause_point(layout_.path(), "step", step);
      const std::optional<DeviceActivity> activity_before = device_activity_.before_step();
      const double lr = learning_rate(spec_.train, step);
      device_.memory.fill_zero(Stream{}, step_scalars_.get(), static_cast<size_t>(step_scalars_.size()));
      accumulate_gradients(step);
      enter(Phase::kOptimizer, step);
      if (sharded_gradients())
        model_->finish_gradients();
      else
        gradient_sync_->finish(model_->gradients(), model_->parameter_count());
      gradient_squares();
      const Model::OptimizerTarget target = model_->optimizer_target(optimizer_.begin());
      optimizer_.step(target.parameters, target.gradients, target.compute_copy, shard_squares(), comm_.world_size(),
                      lr);
      // ZeRO-1 and 2: every rank's shard of the parameters from its owner (the compute copy is then
      // made again from them). ZeRO-3 keeps the shard alone.
      if (spec_.train.zero == 1 || spec_.train.zero == 2) gradient_sync_->gather_parameters(model_->parameters());
      ++step;
      note_step(step);
      step_rate_.count_step();
      // Test hook: rank 0 signals itself before this step's agreement, so the stop is agreed here.
      if (comm_.rank() == 0 && step == test_signal_step_) std::raise(SIGTERM);

      // One agreement per step: [ranks that got a stop signal, save due, ranks whose asynchronous
      // checkpoint write has finished].
      std::array<double, 3> agreed{received_stop_signal() != 0 ? 1.0 : 0.0, save_policy_.interval_passed() ? 1.0 : 0.0,
                                   checkpoints_.write_finished() ? 1.0 : 0.0};
      comm_.allreduce_sum(agreed.data(), agreed.size());
      if (agreed[2] == comm_.world_size()) log_saves({checkpoints_.finish_writes().value()});
      heartbeat_.beat(step);
      // A signal on the last step needs no requeue: the run is done.
      const bool stop = agreed[0] > 0.0 && step < spec_.train.steps;

      const auto step_end = std::chrono::steady_clock::now();
      const bool last_step = step == spec_.train.steps;
      // A rung's end is evaluated only where an evaluation is due anyway (validate holds the rungs
      // to eval_every): one more would change what early stopping and keep_best see.
      const bool budget_end = step == stop_at && !last_step;
      const bool due_eval = spec_.train.eval_every > 0 && step % spec_.train.eval_every == 0;
      // The last step is always evaluated, before its checkpoint, which then records the result.
      const bool new_best = val_data_ && (due_eval || last_step) && evaluate(step);
      const bool stop_early = !last_step && patience_exhausted(best_, spec_.train.early_stop);
      const bool logged = step % spec_.train.log_every == 0 || last_step || stop || stop_early || budget_end;
      // The saves that end a run (or this job, or its budget) are durable before it exits.
      const bool ending = stop || last_step || stop_early || budget_end;
      const bool saved = save_policy_.saves(step, agreed[1] > 0.0, new_best, ending);

      // The loss and the gradient norm stay on the device until a step logs or saves: reading them
      // is the step's one wait for the device. A loss that is not finite shows there, before
      // anything is saved.
      if (logged || saved) {
        const double grad_norm = read_step_scalars();
        if (!std::isfinite(last_loss_)) {
          // Logged (as null) for what reads the metrics: a sweep's schedule stops such a trial.
          metrics_.log_step(StepRecord{step, last_loss_, lr, grad_norm});
          comm_.note_failure_on_every_rank();
          throw std::runtime_error(fmt::format("the training loss is {} at step {}; stopping without saving (the "
                                               "last checkpoint stays as it was)",
                                               last_loss_, step));
        }
        if (logged) {
          StepRecord record{step, last_loss_, lr, grad_norm};
          step_rate_.measure(step_end, record);
          record.peak_rss_bytes = peak_resident_bytes();
          record.peak_device_bytes = device_.info.peak_allocated_bytes();
          metrics_.log_step(record);
          step_rate_.restart(std::chrono::steady_clock::now());
        }
      }
      // What the step itself asked of the device; a save's copies come after.
      if (activity_before) device_activity_.after_step(step, *activity_before);
      if (saved) save(step, new_best, ending);
      // Stopping early ends the run, so a stop signal at the same step needs no requeue.
      if (stop_early) break;
      if (stop) {
        metrics_.log_event(step, "stop", "saved after a stop signal; exiting for requeue");
        return exit_code::kSavedRequeue;
      }
    }
    if (step < spec_.train.steps && !patience_exhausted(best_, spec_.train.early_stop)) {
      metrics_.log_event(step, "budget",
                         fmt::format("trained to the step budget {} ({}); train.steps is {}", stop_at,
                                     kBudgetStepsVariable, spec_.train.steps));
      return exit_code::kDone;
    }
    if (patience_exhausted(best_, spec_.train.early_stop))
      metrics_.log_event(step, "early_stop",
                         fmt::format("{} evaluations without improving on val_loss {:.6f} of step {} by more than {}",
                                     best_.evals_since_best, best_.val_loss, best_.step,
                                     spec_.train.early_stop->min_delta));
    if (comm_.rank() == 0) write_file_atomically(layout_.completed(), fmt::format("{}\n", step));
    metrics_.log_event(step, "done", fmt::format("final loss {:.6f}", last_loss_));
    return exit_code::kDone;
  }

 private:
  // data.tokenizer's content hash, for the checkpoints and the run directory, so that `trainctl
  // sample` decodes with the tokenizer the run trained with; empty without one.
  std::string tokenizer_hash() const {
    if (!spec_.data.tokenizer) return "";
    const Tokenizer tokenizer = [this] {
      try {
        return Tokenizer::load(*spec_.data.tokenizer);
      } catch (const BadInput& error) {
        throw BadInput(fmt::format("data.tokenizer: {}", error.what()));
      }
    }();
    const auto* language_model = dynamic_cast<const LanguageModel*>(model_.get());
    if (language_model == nullptr)
      throw BadInput(fmt::format("data.tokenizer: model.kind = \"{}\" is not a language model", spec_.model.kind()));
    if (tokenizer.vocab_size() > language_model->vocab_size())
      throw BadInput(fmt::format("data.tokenizer: {} has {} tokens, more than model.vocab_size = {}",
                                 *spec_.data.tokenizer, tokenizer.vocab_size(), language_model->vocab_size()));
    if (comm_.rank() == 0)
      write_file_atomically(layout_.tokenizer(),
                            fmt::format("{} {}\n", tokenizer.content_hash(), *spec_.data.tokenizer));
    return tokenizer.content_hash();
  }

  Sampler make_sampler() {
    try {
      return Sampler(train_data_->examples(), global_batch_, spec_.data.shuffle, spec_.train.seed);
    } catch (const std::invalid_argument& error) {
      throw BadInput(fmt::format("data.train: {}: {} (micro_batch {} x grad_accum {} x {} ranks)", spec_.data.train,
                                 error.what(), spec_.train.micro_batch, spec_.train.grad_accum, comm_.world_size()));
    }
  }

  // ZeRO-2 and 3: the model's store holds this rank's shard of the gradients, and reduces them
  // layer by layer itself.
  bool sharded_gradients() const { return spec_.train.zero >= 2; }

  ModelOptions model_options() const {
    ModelOptions options{spec_.train.micro_batch, spec_.train.precision, spec_.train.recompute, Stream{}};
    if (sharded_gradients())
      options.sharding = ParameterSharding{spec_.train.zero, spec_.train.reshard_after_forward, comm_.rank(),
                                           shards_.bounds};
    return options;
  }

  MetricsSetup metrics_setup() const {
    const int64_t terms = model_->loss_terms_per_example();
    std::optional<PrometheusFile> prometheus;
    if (spec_.metrics.prometheus) prometheus = prometheus_file_of_run(layout_, *spec_.metrics.prometheus);
    return {spec_.train.steps, global_batch_, terms, model_->term_unit(),
            dynamic_cast<LanguageModel*>(model_.get()) != nullptr, prometheus};
  }

  // The step training starts at: a resumed checkpoint's, or 0 with fresh weights (init_from's,
  // when given, over the seed's).
  int64_t start() {
    if (comm_.rank() == 0) test_pause_point(layout_.path(), "startup", 0);
    if (std::optional<ResumedCheckpoint> resumed = checkpoints_.resume()) {
      last_loss_ = resumed->loss;
      best_ = resumed->best;
      metrics_.log_event(resumed->step, "resume", resumed->path);
      heartbeat_.beat(resumed->step);
      return resumed->step;
    }
    if (spec_.train.init_from) {
      checkpoints_.initialize_from(*spec_.train.init_from);
      metrics_.log_event(0, "init_from", *spec_.train.init_from);
    } else {
      model_->init_parameters(spec_.train.seed);
    }
    const int64_t terms = model_->loss_terms_per_example();
    metrics_.log_event(0, "start",
                       terms > 1 ? fmt::format("{} ranks, global batch {} ({} {})", comm_.world_size(), global_batch_,
                                               global_terms_, model_->term_unit())
                                 : fmt::format("{} ranks, global batch {}", comm_.world_size(), global_batch_));
    // Test hook: the initial weights as a checkpoint, for comparisons with a reference
    // implementation from the same starting point.
    if (test_save_initial()) save(0, false, true);
    heartbeat_.beat(0);
    return 0;
  }

  void accumulate_gradients(int64_t step) {
    model_->zero_gradients();
    const float grad_scale = 1.0f / static_cast<float>(global_terms_);
    for (int64_t micro = 0; micro < spec_.train.grad_accum; ++micro) {
      const int64_t offset = (comm_.rank() * spec_.train.grad_accum + micro) * spec_.train.micro_batch;
      enter(Phase::kData, step);
      train_data_->gather(sampler_.indices(step, offset, spec_.train.micro_batch), batch_);
      const bool last = micro + 1 == spec_.train.grad_accum;
      // The model's first finished layer marks the backward pass (the loss's gradient and that
      // layer's count as forward): models report no other point in between. Only the last
      // micro-step's gradients are final, so only its layers are communicated.
      const Model::LayerDone layer_done = [this, step, last](int64_t offset, int64_t count) {
        enter(Phase::kBackward, step);
        if (last && !sharded_gradients()) gradient_sync_->layer_ready(model_->gradients(), offset, count);
      };
      enter(Phase::kForward, step);
      model_->forward_backward_into(batch_, grad_scale, step_totals(), layer_done);
    }
  }

  // Where the rank is, for its hang report; and where TRAINCTL_TEST_HANG may hold it.
  void enter(Phase phase, int64_t step) {
    note_phase(phase);
    test_hang_point(layout_.path(), comm_.rank(), phase, step);
  }

  // The device scalars of a step: this rank's loss totals, then the gradient norm's squares of
  // each rank's shard; zeroed at the start of the step, read by read_step_scalars.
  BatchResult* step_totals() { return reinterpret_cast<BatchResult*>(step_scalars_.get()); }
  double* shard_squares() { return reinterpret_cast<double*>(step_scalars_.get() + sizeof(BatchResult)); }
  static int64_t step_scalar_bytes(int ranks) {
    return static_cast<int64_t>(sizeof(BatchResult) + static_cast<size_t>(ranks) * sizeof(double));
  }

  // Gradients were scaled by 1/(global loss terms) on every rank, so their sum across ranks is the
  // global mean. The norm's squares are summed shard by shard in rank order, with ZeRO or
  // without, so every mode clips alike; only the elements the optimizer steps are clipped (by it).
  void gradient_squares() {
    const OptimizerOps& ops = device_.optimizer;
    const float* gradients = model_->gradients();
    if (spec_.train.zero > 0) {
      const int rank = comm_.rank();
      ops.sum_squares(Stream{}, gradients + (shards_.begin(rank) - model_->held_gradients().begin), shards_.count(rank),
                      shard_squares() + rank);
      gradient_sync_->gather_shard_values(shard_squares());
    } else {
      for (int r = 0; r < comm_.world_size(); ++r)
        ops.sum_squares(Stream{}, gradients + shards_.begin(r), shards_.count(r), shard_squares() + r);
    }
  }

  // Reads the step's scalars from the device (one download): the loss, summed over the ranks,
  // into last_loss_; returns the gradient norm.
  double read_step_scalars() {
    std::vector<std::byte> host(static_cast<size_t>(step_scalars_.size()));
    device_.memory.download(Stream{}, host.data(), step_scalars_.get(), host.size());
    BatchResult totals;
    std::memcpy(&totals, host.data(), sizeof(totals));
    double loss_sum = totals.loss_sum;
    comm_.allreduce_sum(&loss_sum, 1);
    last_loss_ = loss_sum / static_cast<double>(global_terms_);
    double squares = 0.0;
    for (int r = 0; r < comm_.world_size(); ++r) {
      double shard = 0.0;
      std::memcpy(&shard, host.data() + sizeof(BatchResult) + static_cast<size_t>(r) * sizeof(double), sizeof(shard));
      squares += shard;
    }
    return std::sqrt(squares);
  }

  // Returns whether the validation loss is the best so far.
  bool evaluate(int64_t step) {
    enter(Phase::kEval, step);
    if (comm_.rank() == 0) test_pause_point(layout_.path(), "eval", step);
    const int64_t examples = val_data_->examples();
    const BatchResult result =
        evaluate_examples(*model_, *val_data_, rank_share(examples, comm_.rank(), comm_.world_size()),
                          spec_.train.micro_batch, batch_, eval_totals_.get(),
                          spec_.train.zero == 3 ? most_evaluation_passes(examples, comm_.world_size(), spec_.train.micro_batch) : 0);
    std::array<double, 2> totals{result.loss_sum, static_cast<double>(result.correct)};
    comm_.allreduce_sum(totals.data(), totals.size());
    const ValidationScore score = validation_score(totals[0], totals[1], examples, *model_);
    last_val_loss_ = score.loss;
    metrics_.log_eval(step, score.loss, score.accuracy);
    return record_evaluation(best_, step, last_val_loss_, spec_.train.early_stop);
  }

  void save(int64_t step, bool new_best, bool durable) {
    enter(Phase::kCheckpoint, step);
    const auto started = std::chrono::steady_clock::now();
    std::vector<SavedCheckpoint> saved = checkpoints_.save(
        {step, sampler_.epoch_of(step), step * global_batch_, last_loss_, last_val_loss_, best_}, new_best, durable);
    const auto ended = std::chrono::steady_clock::now();
    save_policy_.restart_interval(ended);
    // What the training loop waited for this save: all of it when synchronous, the staging (and
    // any earlier write still in flight) when not.
    metrics_.log_event(step, "checkpoint_stall",
                       fmt::format("{:.6f} s", std::chrono::duration<double>(ended - started).count()));
    log_saves(saved);
  }

  void log_saves(const std::vector<SavedCheckpoint>& outcomes) {
    for (const SavedCheckpoint& saved : outcomes) {
      if (!saved.failure.empty()) {
        if (comm_.rank() == 0) fmt::print(stderr, "trainctl-runtime: warning: {}; training goes on\n", saved.failure);
        metrics_.log_event(saved.step, "checkpoint_failed", saved.failure);
        continue;
      }
      metrics_.log_checkpoint({saved.step, saved.path, saved.megabytes, saved.seconds});
    }
  }

  const RunSpec& spec_;
  const RunLayout& layout_;
  Comm& comm_;
  const Device& device_;
  int64_t global_batch_;  // examples per step, over all ranks
  std::unique_ptr<BatchSource> train_data_, val_data_;
  Sampler sampler_;
  ShardLayout shards_;  // of the flat state: what each rank steps with ZeRO and saves when sharded
  std::unique_ptr<Model> model_;
  int64_t global_terms_;  // loss terms per step, over all ranks: the loss's denominator
  std::unique_ptr<GradientSync> gradient_sync_;
  Optimizer optimizer_;
  CheckpointManager checkpoints_;
  Metrics metrics_;
  Heartbeat heartbeat_;
  StepRate step_rate_;
  SavePolicy save_policy_;
  DeviceActivityLog device_activity_;
  Batch batch_;
  DeviceBuffer<std::byte> step_scalars_;
  DeviceBuffer<BatchResult> eval_totals_;  // the validation's, and the passes it leaves out (evaluation.h)
  double last_loss_ = std::nan("");
  double last_val_loss_ = std::nan("");
  BestValidation best_;
  const int64_t test_signal_step_ = test_signal_step();
  const std::optional<int64_t> budget_ = budget_steps_from_environment();
};

}  // namespace

int train(const RunSpec& spec, const std::string& config_text, const RunLayout& layout, Comm& comm) {
  // Each rank sets up by itself (no collective call: the device, then the data and the model);
  // where that fails on any rank, all ranks end together. The node check, where the batch script
  // asks for one, comes between, once the device is bound.
  test_hang_point(layout.path(), comm.rank(), Phase::kStartup, 0);
  std::optional<NodeCheck> node_check;
  // Before everything that holds device memory: unbound after they have released it.
  std::unique_ptr<DeviceBinding> binding;
  all_or_none(comm, [&] {
    if (const std::optional<int64_t> seconds = node_check_timeout_seconds()) node_check.emplace(layout, comm, *seconds);
    binding = node_check ? node_check->bind(spec) : std::make_unique<DeviceBinding>(spec, comm);
  });
  if (node_check) node_check->check(spec, binding.get());
  note_phase(Phase::kStartup);
  std::unique_ptr<Run> run;
  all_or_none(comm, [&] { run = std::make_unique<Run>(spec, config_text, layout, comm, binding->device()); });
  return run->run();
}

}  // namespace trainctl
