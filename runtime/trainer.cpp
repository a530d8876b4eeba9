// The trainer: see trainer.h.
#include "trainer.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "atomic_file.h"
#include "checkpoint_file.h"
#include "classification_file.h"
#include "exit_codes.h"
#include "grad_sync.h"
#include "metrics.h"
#include "mlp.h"
#include "optimizer.h"
#include "sampler.h"
#include "signals.h"

namespace trainctl {

namespace {

std::string utc_now() {
  std::time_t now = std::time(nullptr);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return text;
}

std::string cpu_model() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

ClassificationData load_dataset(const std::string& path, const char* key, const ModelSpec& model) {
  ClassificationData data;
  try {
    data = read_classification_file(path);
  } catch (const std::exception& error) {
    throw BadRunInput(fmt::format("data.{}: {}", key, error.what()));
  }
  if (data.features != model.inputs)
    throw BadRunInput(fmt::format("data.{}: {} has {} features per sample but model.inputs = {}", key, path,
                                  data.features, model.inputs));
  for (int32_t label : data.y)
    if (label < 0 || label >= model.classes)
      throw BadRunInput(fmt::format("data.{}: {} has label {}, outside [0, model.classes = {})", key, path, label,
                                    model.classes));
  return data;
}

// The device the config asks for, bound to this rank (local rank r takes visible GPU r).
const DeviceOps& bound_device(const std::string& name, const Comm& comm) {
  const DeviceOps* ops = find_device(name);
  if (ops == nullptr)
    throw BadRunInput(fmt::format("train.device = \"{}\": this trainctl-runtime was built without it (it has {}); "
                                  "rebuild where nvcc is found (meson -Dcuda=enabled), or use \"cpu\"",
                                  name, fmt::join(available_devices(), ", ")));
  try {
    // The CUDA runtime starts threads of its own at its first call.
    with_stop_signals_blocked([&] { ops->bind_local(comm.local_rank(), comm.local_size()); });
  } catch (const DeviceUnavailable& error) {
    throw BadRunInput(fmt::format("train.device = \"{}\": {}", name, error.what()));
  }
  return *ops;
}

class Run {
 public:
  Run(const RunSpec& spec, const std::string& config_text, const RunPaths& paths, Comm& comm)
      : spec_(spec),
        config_text_(config_text),
        paths_(paths),
        comm_(comm),
        ops_(bound_device(spec.train.device, comm)),
        global_batch_(spec.train.micro_batch * spec.train.grad_accum * comm.world_size()),
        train_data_(load_dataset(spec.data.train, "train", spec.model)),
        sampler_(make_sampler()),
        model_(spec.model, ops_, spec.train.micro_batch, spec.train.precision),
        gradient_sync_(make_gradient_sync(ops_, comm)),
        optimizer_(spec.train, ops_, model_.parameter_count()),
        metrics_(paths.metrics(), spec.train.steps, global_batch_, comm.rank() == 0),
        batch_x_(static_cast<size_t>(spec.train.micro_batch * spec.model.inputs)),
        batch_y_(static_cast<size_t>(spec.train.micro_batch)) {
    if (spec.data.val) val_data_ = load_dataset(*spec.data.val, "val", spec.model);
  }
  ~Run() {
    for (std::vector<Tensor>* tensors : {&staged_.model, &staged_.optimizer_state})
      for (Tensor& tensor : *tensors) ops_.unpin_host(tensor.values.data());
  }
  Run(const Run&) = delete;
  Run& operator=(const Run&) = delete;

  int run() {
    int64_t step = resume();
    last_save_ = std::chrono::steady_clock::now();
    auto window_start = std::chrono::steady_clock::now();
    int64_t window_steps = 0;
    while (step < spec_.train.steps) {
      const double lr = learning_rate(spec_.train, step);
      const double loss_sum = accumulate_gradients(step);
      const double grad_norm = average_and_clip_gradients();
      optimizer_.step(model_.parameters(), model_.gradients(), lr);
      ++step;
      ++window_steps;

      // One agreement per step: [loss summed over ranks, ranks that got a stop signal, save due].
      std::array<double, 3> agreed{loss_sum, received_stop_signal() != 0 ? 1.0 : 0.0, time_to_save() ? 1.0 : 0.0};
      comm_.allreduce_sum(agreed.data(), agreed.size());
      last_loss_ = agreed[0] / static_cast<double>(global_batch_);
      if (!std::isfinite(last_loss_))
        throw std::runtime_error(fmt::format("the training loss is {} at step {}; stopping without saving (the last "
                                             "checkpoint stays as it was)",
                                             last_loss_, step));
      // A signal on the last step needs no requeue: the run is done.
      const bool stop = agreed[1] > 0.0 && step < spec_.train.steps;

      if (step % spec_.train.log_every == 0 || step == spec_.train.steps || stop) {
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - window_start).count();
        metrics_.log_step({step, last_loss_, lr, grad_norm,
                           static_cast<double>(window_steps * global_batch_) / seconds});
        window_start = std::chrono::steady_clock::now();
        window_steps = 0;
      }
      if (val_data_ && spec_.train.eval_every > 0 && step % spec_.train.eval_every == 0) evaluate(step);
      const bool scheduled =
          spec_.checkpoint.every_steps > 0 && step % spec_.checkpoint.every_steps == 0;
      if (scheduled || agreed[2] > 0.0 || stop || step == spec_.train.steps) save(step);
      if (stop) {
        metrics_.log_event(step, "stop", "saved after a stop signal; exiting for requeue");
        return exit_code::kSavedRequeue;
      }
    }
    const bool evaluated_last_step = spec_.train.eval_every > 0 && step % spec_.train.eval_every == 0;
    if (val_data_ && !evaluated_last_step) evaluate(step);
    if (comm_.rank() == 0) write_file_atomically(paths_.completed(), fmt::format("{}\n", step));
    metrics_.log_event(step, "done", fmt::format("final loss {:.6f}", last_loss_));
    return exit_code::kDone;
  }

 private:
  Sampler make_sampler() {
    try {
      return Sampler(train_data_.samples, global_batch_, spec_.data.shuffle, spec_.train.seed);
    } catch (const std::invalid_argument& error) {
      throw BadRunInput(fmt::format("data.train: {} (micro_batch {} x grad_accum {} x {} ranks)", error.what(),
                                    spec_.train.micro_batch, spec_.train.grad_accum, comm_.world_size()));
    }
  }

  double accumulate_gradients(int64_t step) {
    model_.zero_gradients();
    const float grad_scale = 1.0f / static_cast<float>(global_batch_);
    // Only the last micro-step's gradients are final, so only its layers are communicated.
    const Mlp::LayerDone reduce_layer = [this](int64_t offset, int64_t count) {
      gradient_sync_->layer_ready(model_.gradients(), offset, count);
    };
    double loss_sum = 0.0;
    for (int64_t micro = 0; micro < spec_.train.grad_accum; ++micro) {
      const int64_t offset = (comm_.rank() * spec_.train.grad_accum + micro) * spec_.train.micro_batch;
      gather_rows(train_data_, sampler_.indices(step, offset, spec_.train.micro_batch), batch_x_.data(),
                  batch_y_.data());
      const bool last = micro + 1 == spec_.train.grad_accum;
      loss_sum += model_
                      .forward_backward(batch_x_.data(), batch_y_.data(), spec_.train.micro_batch, grad_scale,
                                        last ? reduce_layer : Mlp::LayerDone{})
                      .loss_sum;
    }
    return loss_sum;
  }

  // Gradients were scaled by 1/G on every rank, so their sum across ranks is the global mean.
  double average_and_clip_gradients() {
    gradient_sync_->finish(model_.gradients(), model_.parameter_count());
    const double norm = std::sqrt(ops_.sum_squares(model_.gradients(), model_.parameter_count()));
    // As torch.nn.utils.clip_grad_norm_: scale by max_norm / (norm + 1e-6) when that is below 1.
    const double clip_coefficient = spec_.train.grad_clip / (norm + 1e-6);
    if (spec_.train.grad_clip > 0.0 && clip_coefficient < 1.0)
      ops_.scale(model_.gradients(), model_.parameter_count(), static_cast<float>(clip_coefficient));
    return norm;
  }

  bool time_to_save() const {
    if (comm_.rank() != 0 || spec_.checkpoint.every_minutes <= 0.0) return false;
    return std::chrono::steady_clock::now() - last_save_ >=
           std::chrono::duration<double>(spec_.checkpoint.every_minutes * 60.0);
  }

  void evaluate(int64_t step) {
    const ClassificationData& data = *val_data_;
    // Each rank scores a contiguous share of the validation set; the sums are combined.
    const int64_t begin = data.samples * comm_.rank() / comm_.world_size();
    const int64_t end = data.samples * (comm_.rank() + 1) / comm_.world_size();
    std::array<double, 2> totals{0.0, 0.0};
    for (int64_t first = begin; first < end; first += spec_.train.micro_batch) {
      const int64_t rows = std::min(spec_.train.micro_batch, end - first);
      std::vector<int32_t> indices(static_cast<size_t>(rows));
      for (int64_t i = 0; i < rows; ++i) indices[static_cast<size_t>(i)] = static_cast<int32_t>(first + i);
      gather_rows(data, indices, batch_x_.data(), batch_y_.data());
      BatchResult result = model_.evaluate(batch_x_.data(), batch_y_.data(), rows);
      totals[0] += result.loss_sum;
      totals[1] += static_cast<double>(result.correct);
    }
    comm_.allreduce_sum(totals.data(), totals.size());
    last_val_loss_ = totals[0] / static_cast<double>(data.samples);
    metrics_.log_eval(step, last_val_loss_, totals[1] / static_cast<double>(data.samples));
  }

  // The state to save, staged in host buffers that are allocated on the first save and reused:
  // a fresh 100 MB allocation per save costs more in page faults than the copy itself.
  const Checkpoint& snapshot(int64_t step) {
    Checkpoint& checkpoint = staged_;
    CheckpointMeta& meta = checkpoint.meta;
    meta.step = step;
    meta.epoch = sampler_.epoch_of(step);
    meta.sample_position = step * global_batch_;
    meta.rng_seed = spec_.train.seed;
    meta.world_size = comm_.world_size();
    meta.global_batch = global_batch_;
    meta.optimizer = optimizer_.name();
    meta.optimizer_step = optimizer_.step_count();
    meta.loss = last_loss_;
    meta.config_text = config_text_;
    meta.hostnames.clear();
    for (const std::string& host : comm_.hostnames()) meta.hostnames += (meta.hostnames.empty() ? "" : ",") + host;
    meta.created_utc = utc_now();
    meta.hardware = fmt::format("{}; device {}; {} ranks", cpu_model(), ops_.name, comm_.world_size());
    if (!std::isnan(last_val_loss_)) meta.metrics["val_loss"] = last_val_loss_;

    // Tensors [first, first + parameters) of `tensors` receive the slices of `device_source`.
    const auto& layout = model_.parameter_layout();
    auto stage = [&](std::vector<Tensor>& tensors, size_t first, const float* device_source,
                     const std::string& suffix) {
      if (tensors.size() == first)
        for (const ParameterSlice& slice : layout) {
          tensors.push_back({slice.name + suffix, slice.shape, std::vector<float>(static_cast<size_t>(slice.count))});
          // Pinned once: every later save copies from the device into the same buffers.
          ops_.pin_host(tensors.back().values.data(), tensors.back().values.size() * sizeof(float));
        }
      for (size_t i = 0; i < layout.size(); ++i)
        ops_.download(tensors[first + i].values.data(), device_source + layout[i].offset,
                      static_cast<size_t>(layout[i].count) * sizeof(float));
    };
    stage(checkpoint.model, 0, model_.parameters(), "");
    size_t first = 0;
    for (auto& [state_name, buffer] : optimizer_.state()) {
      stage(checkpoint.optimizer_state, first, buffer->get(), "/" + state_name);
      first += layout.size();
    }
    return checkpoint;
  }

  // Weights and optimizer state are identical on every rank, so rank 0 alone writes.
  void save(int64_t step) {
    if (comm_.rank() == 0) {
      std::filesystem::create_directories(paths_.checkpoints());
      const auto started = std::chrono::steady_clock::now();
      const std::string path = save_checkpoint(paths_.checkpoints(), snapshot(step));
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      const double megabytes = static_cast<double>(std::filesystem::file_size(path)) / 1e6;
      prune_checkpoints(paths_.checkpoints(), spec_.checkpoint.keep_last);
      write_file_atomically(paths_.progress(), fmt::format("{}\n", step));
      metrics_.log_event(step, "checkpoint",
                         fmt::format("{} ({:.1f} MB in {:.3f} s, {:.0f} MB/s)", path, megabytes, seconds,
                                     megabytes / seconds));
    }
    last_save_ = std::chrono::steady_clock::now();
    comm_.barrier();
  }

  void check_fits(const Checkpoint& checkpoint, const std::string& path) const {
    const auto& layout = model_.parameter_layout();
    auto shape_text = [](const std::vector<int64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); };
    if (checkpoint.model.size() != layout.size())
      throw BadRunInput(fmt::format("checkpoint {} holds {} model tensors but the config's model has {}", path,
                                    checkpoint.model.size(), layout.size()));
    for (size_t i = 0; i < layout.size(); ++i)
      if (checkpoint.model[i].name != layout[i].name || checkpoint.model[i].shape != layout[i].shape)
        throw BadRunInput(fmt::format("checkpoint {} does not fit the config's model: it has {} {}, the config "
                                      "needs {} {}",
                                      path, checkpoint.model[i].name, shape_text(checkpoint.model[i].shape),
                                      layout[i].name, shape_text(layout[i].shape)));
    if (checkpoint.meta.optimizer != optimizer_.name())
      throw BadRunInput(fmt::format("checkpoint {} was written with optimizer {} but the config uses {}", path,
                                    checkpoint.meta.optimizer, optimizer_.name()));
    if (checkpoint.meta.global_batch != global_batch_)
      throw BadRunInput(fmt::format("checkpoint {} was written with global batch {} but this run's is {} "
                                    "(micro_batch x grad_accum x ranks)",
                                    path, checkpoint.meta.global_batch, global_batch_));
  }

  // The checkpoint's tensors named "<parameter><suffix>", flattened in the model's layout.
  std::vector<float> flatten(const std::vector<Tensor>& tensors, const std::string& suffix,
                             const std::string& path) const {
    std::vector<float> flat(static_cast<size_t>(model_.parameter_count()));
    for (const ParameterSlice& slice : model_.parameter_layout()) {
      auto found = std::find_if(tensors.begin(), tensors.end(),
                                [&](const Tensor& tensor) { return tensor.name == slice.name + suffix; });
      if (found == tensors.end() || static_cast<int64_t>(found->values.size()) != slice.count)
        throw BadRunInput(fmt::format("checkpoint {} lacks {}{} of {} values", path, slice.name, suffix, slice.count));
      std::copy(found->values.begin(), found->values.end(), flat.begin() + slice.offset);
    }
    return flat;
  }

  // Rank 0 picks and reads the checkpoint, then broadcasts it, so all ranks agree on one file.
  int64_t resume() {
    std::array<int64_t, 3> position{0, 0, 0};  // step, optimizer step, whether a checkpoint was found
    std::vector<std::vector<float>> flat_state;  // the model, then each optimizer state buffer
    std::string path;
    if (comm_.rank() == 0) {
      ResumePoint point = load_latest_valid(paths_.checkpoints());
      for (const std::string& skipped : point.skipped)
        fmt::print(stderr, "trainctl-runtime: warning: skipping a checkpoint that does not verify: {}\n", skipped);
      if (point.checkpoint) {
        check_fits(*point.checkpoint, point.path);
        flat_state.push_back(flatten(point.checkpoint->model, "", point.path));
        for (auto& [state_name, buffer] : optimizer_.state())
          flat_state.push_back(flatten(point.checkpoint->optimizer_state, "/" + state_name, point.path));
        position = {point.checkpoint->meta.step, point.checkpoint->meta.optimizer_step, 1};
        last_loss_ = point.checkpoint->meta.loss;
        path = point.path;
      }
    }
    comm_.broadcast(position.data(), sizeof(position));
    if (position[2] == 0) {
      model_.init_parameters(spec_.train.seed);
      metrics_.log_event(0, "start", fmt::format("{} ranks, global batch {}", comm_.world_size(), global_batch_));
      return 0;
    }
    std::vector<float*> destinations{model_.parameters()};
    for (auto& [state_name, buffer] : optimizer_.state()) destinations.push_back(buffer->get());
    flat_state.resize(destinations.size(), std::vector<float>(static_cast<size_t>(model_.parameter_count())));
    for (size_t i = 0; i < destinations.size(); ++i) {
      comm_.broadcast(flat_state[i].data(), flat_state[i].size() * sizeof(float));
      ops_.upload(destinations[i], flat_state[i].data(), flat_state[i].size() * sizeof(float));
    }
    optimizer_.set_step_count(position[1]);
    metrics_.log_event(position[0], "resume", path);
    return position[0];
  }

  const RunSpec& spec_;
  const std::string& config_text_;
  const RunPaths& paths_;
  Comm& comm_;
  const DeviceOps& ops_;
  int64_t global_batch_;
  ClassificationData train_data_;
  std::optional<ClassificationData> val_data_;
  Sampler sampler_;
  Mlp model_;
  std::unique_ptr<GradientSync> gradient_sync_;
  Optimizer optimizer_;
  Metrics metrics_;
  std::vector<float> batch_x_;
  std::vector<int32_t> batch_y_;
  std::chrono::steady_clock::time_point last_save_;
  Checkpoint staged_;
  double last_loss_ = std::nan("");
  double last_val_loss_ = std::nan("");
};

}  // namespace

int train(const RunSpec& spec, const std::string& config_text, const RunPaths& paths, Comm& comm) {
  return Run(spec, config_text, paths, comm).run();
}

}  // namespace trainctl
