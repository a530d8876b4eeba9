// The checkpoint manager: see checkpoint_manager.h.
#include "checkpoint_manager.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <optional>
#include <span>

#include <fmt/format.h>

#include "atomic_file.h"
#include "bad_input.h"
#include "checkpoint_directory.h"
#include "checkpoint_file.h"
#include "config_json.h"
#include "exit_codes.h"
#include "model_weights.h"
#include "named_tensors.h"
#include "rank_failure.h"
#include "signals.h"
#include "test_hooks.h"

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

// How messages name a checkpoint whose tensors do not fit (named_tensors.h).
std::string checkpoint_source(const std::string& path) { return fmt::format("checkpoint {}", path); }

}  // namespace

CheckpointManager::CheckpointManager(const RunLayout& layout, const RunSpec& spec, const std::string& config_text,
                                     std::string tokenizer_hash, int64_t global_batch, const ShardLayout& shards,
                                     Comm& comm, Model& model, Optimizer& optimizer)
    : layout_(layout),
      spec_(spec),
      config_text_(config_text),
      tokenizer_hash_(std::move(tokenizer_hash)),
      global_batch_(global_batch),
      shards_(shards),
      comm_(comm),
      model_(model),
      optimizer_(optimizer) {}

CheckpointManager::~CheckpointManager() {
  if (in_flight_ && in_flight_->thread.joinable()) in_flight_->thread.join();
  const auto unpin = [&](std::vector<float>& values) { model_.device().memory.unpin_host(values.data()); };
  for (std::vector<Tensor>* tensors : {&staged_.model, &staged_.optimizer_state})
    for (Tensor& tensor : *tensors) unpin(tensor.values);
  if (!staged_shard_.model.empty()) unpin(staged_shard_.model);
  for (auto& [state_name, values] : staged_shard_.optimizer_state) unpin(values);
}

bool CheckpointManager::writes() const { return spec_.checkpoint.sharded || comm_.rank() == 0; }

void CheckpointManager::fill_meta(CheckpointMeta& meta, const TrainingPosition& position) const {
  meta.model_kind = spec_.model.kind();
  meta.step = position.step;
  meta.epoch = position.epoch;
  meta.sample_position = position.sample_position;
  meta.rng_seed = spec_.train.seed;
  meta.world_size = comm_.world_size();
  meta.global_batch = global_batch_;
  meta.optimizer = optimizer_.name();
  meta.optimizer_step = optimizer_.step_count();
  meta.loss = position.loss;
  meta.best_val_loss = position.best.val_loss;
  meta.best_step = position.best.step;
  meta.evals_since_best = position.best.evals_since_best;
  meta.config_text = config_text_;
  meta.tokenizer_path = spec_.data.tokenizer.value_or("");
  meta.tokenizer_hash = tokenizer_hash_;
  meta.hostnames.clear();
  for (const std::string& host : comm_.node_names()) meta.hostnames += (meta.hostnames.empty() ? "" : ",") + host;
  meta.created_utc = utc_now();
  meta.hardware = fmt::format("{}; device {}; {} ranks", cpu_model(), model_.device().name, comm_.world_size());
  meta.metrics.clear();
  if (!std::isnan(position.val_loss)) meta.metrics["val_loss"] = position.val_loss;
}

// The state to save, staged in host buffers that are allocated (and pinned) on the first save and
// reused: a fresh 100 MB allocation per save costs more in page faults than the copy itself. The
// optimizer holds [optimizer_.begin(), optimizer_.end()) of the flat state.
void CheckpointManager::stage(const TrainingPosition& position) {
  const Device& device = model_.device();
  const auto download = [&](std::vector<float>& host, int64_t count, const float* source) {
    if (host.empty()) {
      host.resize(static_cast<size_t>(count));
      device.memory.pin_host(host.data(), host.size() * sizeof(float));
    }
    device.memory.download(Stream{}, host.data(), source, static_cast<size_t>(count) * sizeof(float));
  };
  const auto state = optimizer_.state();
  if (spec_.checkpoint.sharded) {
    Shard& shard = staged_shard_;
    fill_meta(shard.meta, position);
    shard.rank = comm_.rank();
    shard.ranks = comm_.world_size();
    shard.begin = shards_.begin(comm_.rank());
    shard.end = shards_.end(comm_.rank());
    download(shard.model, shard.end - shard.begin,
             model_.parameter_values() + (shard.begin - model_.held_parameters().begin));
    shard.optimizer_state.resize(state.size());
    for (size_t s = 0; s < state.size(); ++s) {
      shard.optimizer_state[s].first = state[s].first;
      download(shard.optimizer_state[s].second, shard.end - shard.begin,
               state[s].second->get() + (shard.begin - optimizer_.begin()));
    }
    return;
  }
  fill_meta(staged_.meta, position);
  // Tensors [first, first + parameters) of `tensors` receive the slices of `device_source`.
  const auto& layout = model_.parameter_layout();
  const auto stage_into = [&](std::vector<Tensor>& tensors, size_t first, const float* device_source,
                              const std::string& suffix) {
    if (tensors.size() == first)
      for (const ParameterSlice& slice : layout) tensors.push_back({slice.name + suffix, slice.shape, {}});
    for (size_t i = 0; i < layout.size(); ++i)
      download(tensors[first + i].values, layout[i].count, device_source + layout[i].offset);
  };
  stage_into(staged_.model, 0, model_.parameter_values(), "");
  for (size_t s = 0; s < state.size(); ++s)
    stage_into(staged_.optimizer_state, s * layout.size(), state[s].second->get() - optimizer_.begin(),
               "/" + state[s].first);
}

// On this rank's own thread for an asynchronous save: it touches only the staged buffers and the
// files, and reports a failure in `write` instead of throwing.
void CheckpointManager::write_staged(Write& write) const {
  const int64_t step = write.position.step;
  const auto midway = [&] { test_midway_through_save(layout_.path(), step); };
  try {
    if (spec_.checkpoint.sharded) {
      write.path = (std::filesystem::path(layout_.checkpoints()) / step_directory_name(step)).string();
      write.record = write_shard(write.path, staged_shard_, comm_.rank() == 0 ? midway : std::function<void()>{});
    } else {
      std::filesystem::create_directories(layout_.checkpoints());
      write.path = save_checkpoint(layout_.checkpoints(), staged_, midway);
      write.record.bytes = std::filesystem::file_size(write.path);
    }
  } catch (const std::exception& error) {
    write.failure = error.what();
  }
  write.finished = true;
}

// Every rank: whether every write succeeded; then rank 0 publishes (the manifest of a sharded
// save, keep_best, pruning, progress.step). A failure anywhere reaches every rank, so that all
// throw together for a durable save and all go on without it otherwise.
SavedCheckpoint CheckpointManager::publish(Write& write, bool durable) {
  if (write.thread.joinable()) write.thread.join();
  SavedCheckpoint saved{write.position.step, write.path, 0.0, 0.0, ""};
  std::string failure = write.failure;
  int first_failed = comm_.lowest_rank_where(!failure.empty());
  if (first_failed == comm_.world_size()) {
    std::vector<ShardRecord> records(static_cast<size_t>(comm_.world_size()));
    comm_.gather(&write.record, records.data(), sizeof(ShardRecord));
    if (comm_.rank() == 0) {
      try {
        if (spec_.checkpoint.sharded) {
          FlatLayout flat{{}, model_.parameter_count(), {}};
          for (const ParameterSlice& slice : model_.parameter_layout())
            flat.tensors.push_back({slice.name, slice.shape, slice.offset});
          for (auto& [state_name, buffer] : optimizer_.state()) flat.optimizer_states.push_back(state_name);
          write_manifest(write.path, staged_shard_.meta, flat, records);
        }
        for (const ShardRecord& record : records) saved.megabytes += static_cast<double>(record.bytes) / 1e6;
        if (write.new_best && spec_.checkpoint.keep_best) keep_as_best(write.path);
        prune_checkpoints(layout_.checkpoints(), spec_.checkpoint.keep_last);
        write_file_atomically(layout_.progress(), fmt::format("{}\n", write.position.step));
      } catch (const std::exception& error) {
        failure = fmt::format("cannot publish checkpoint {}: {}", write.path, error.what());
      }
    }
    first_failed = comm_.lowest_rank_where(!failure.empty());
  }
  saved.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - write.started).count();
  if (first_failed == comm_.world_size()) return saved;
  if (durable) {
    comm_.note_failure_on_every_rank();
    if (!failure.empty()) throw std::runtime_error(failure);
    throw FailedOnAnotherRank(first_failed, exit_code::kFailed);
  }
  // The failing rank's words, for rank 0's log; the step stays unpublished (a sharded step
  // directory has no manifest), so the checkpoint before it is the newest.
  uint64_t length = failure.size();
  comm_.broadcast(&length, sizeof length, first_failed);
  failure.resize(length);
  comm_.broadcast(failure.data(), length, first_failed);
  saved.failure = failure;
  return saved;
}

std::vector<SavedCheckpoint> CheckpointManager::save(const TrainingPosition& position, bool new_best, bool durable) {
  std::vector<SavedCheckpoint> outcomes;
  if (std::optional<SavedCheckpoint> earlier = finish_writes()) outcomes.push_back(*earlier);
  auto write = std::make_unique<Write>();
  write->position = position;
  write->new_best = new_best;
  write->started = std::chrono::steady_clock::now();
  if (writes()) stage(position);
  if (spec_.checkpoint.sharded && comm_.rank() == 0) {
    // A step directory left by a save that never finished must not mix with this one's shards.
    std::filesystem::remove_all(std::filesystem::path(layout_.checkpoints()) / step_directory_name(position.step));
  }
  comm_.barrier();
  if (spec_.checkpoint.async && !durable) {
    if (writes()) {
      // The writer must not be the thread a stop signal is delivered to.
      with_stop_signals_blocked([&] { write->thread = std::thread([this, &written = *write] { write_staged(written); }); });
    } else {
      write->finished = true;
    }
    in_flight_ = std::move(write);
    return outcomes;
  }
  if (writes()) write_staged(*write);
  outcomes.push_back(publish(*write, /*durable=*/true));
  return outcomes;
}

bool CheckpointManager::write_finished() const { return in_flight_ && in_flight_->finished; }

std::optional<SavedCheckpoint> CheckpointManager::finish_writes() {
  if (!in_flight_) return std::nullopt;
  std::unique_ptr<Write> write = std::move(in_flight_);
  return publish(*write, /*durable=*/false);
}

// Links rather than copies: the best checkpoint costs no second write, and pruning its name in
// checkpoints/ leaves the files to the links. The new best is published before the old one goes,
// so checkpoints/best/ always holds one (its newest entry is the best). What verifies a checkpoint
// is linked last: a step-N.h5 after its sidecar, and a step directory's manifest after its shards.
void CheckpointManager::keep_as_best(const std::string& path) const {
  namespace fs = std::filesystem;
  const fs::path best_dir = layout_.best_checkpoint_dir();
  const fs::path checkpoint(path);
  const auto link = [](const fs::path& source, const fs::path& target) {
    fs::remove(target);
    std::error_code no_hard_links;
    fs::create_hard_link(source, target, no_hard_links);
    if (no_hard_links) fs::copy_file(source, target);
  };
  if (fs::is_directory(checkpoint)) {
    const fs::path target = best_dir / checkpoint.filename();
    fs::remove_all(target);
    fs::create_directories(target);
    for (const auto& file : fs::directory_iterator(checkpoint))
      if (file.path().filename() != kManifestName) link(file.path(), target / file.path().filename());
    link(checkpoint / kManifestName, target / kManifestName);
    fsync_path(target.string());
  } else {
    fs::create_directories(best_dir);
    const fs::path sidecar = sidecar_path(path);
    link(sidecar, best_dir / sidecar.filename());
    link(checkpoint, best_dir / checkpoint.filename());
  }
  for (const CheckpointEntry& older : list_checkpoints(best_dir.string())) {
    if (older.path == (best_dir / checkpoint.filename()).string()) continue;
    fs::remove_all(older.path);
    fs::remove(sidecar_path(older.path));
  }
  fsync_path(best_dir.string());
}

// In this order, so that the first difference is the one reported.
void CheckpointManager::check_fits(const Checkpoint& checkpoint, const std::string& path) const {
  const std::string kind = spec_.model.kind();
  if (checkpoint.meta.model_kind != kind)
    throw BadInput(fmt::format("checkpoint {} holds a model of kind \"{}\" but the config's model.kind is \"{}\"",
                               path, checkpoint.meta.model_kind, kind));
  match_tensors(checkpoint.model, model_.parameter_layout(), TensorMatch::kCheckpoint, checkpoint_source(path));
  if (checkpoint.meta.optimizer != optimizer_.name())
    throw BadInput(fmt::format("checkpoint {} was written with optimizer {} but the config uses {}", path,
                               checkpoint.meta.optimizer, optimizer_.name()));
  if (checkpoint.meta.global_batch != global_batch_)
    throw BadInput(fmt::format("checkpoint {} was written with global batch {} but this run's is {} "
                               "(micro_batch x grad_accum x ranks)",
                               path, checkpoint.meta.global_batch, global_batch_));
}

// Rank 0 picks and reads the checkpoint, then broadcasts it, so all ranks agree on one file.
std::optional<ResumedCheckpoint> CheckpointManager::resume() {
  std::array<int64_t, 3> position{0, 0, 0};  // step, optimizer step, whether a checkpoint was found
  double loss = 0.0;
  BestValidation best;
  std::vector<std::vector<float>> flat_state;  // the model, then each optimizer state buffer
  ResumedCheckpoint resumed;
  if (comm_.rank() == 0) {
    ResumePoint point = load_latest_valid(layout_.checkpoints());
    for (const std::string& skipped : point.skipped)
      fmt::print(stderr, "trainctl-runtime: warning: skipping a checkpoint that does not verify: {}\n", skipped);
    if (point.checkpoint) {
      const Checkpoint& checkpoint = *point.checkpoint;
      check_fits(checkpoint, point.path);
      const auto& layout = model_.parameter_layout();
      const std::string source = checkpoint_source(point.path);
      flat_state.push_back(flatten_tensors(checkpoint.model, layout, TensorMatch::kCheckpoint, source));
      for (auto& [state_name, buffer] : optimizer_.state())
        flat_state.push_back(
            flatten_tensors(checkpoint.optimizer_state, layout, TensorMatch::kCheckpoint, source, state_name));
      position = {checkpoint.meta.step, checkpoint.meta.optimizer_step, 1};
      loss = checkpoint.meta.loss;
      best = {checkpoint.meta.best_val_loss, checkpoint.meta.best_step, checkpoint.meta.evals_since_best};
      resumed.path = point.path;
    }
  }
  comm_.broadcast(position.data(), sizeof(position));
  if (position[2] == 0) return std::nullopt;
  comm_.broadcast(&loss, sizeof(loss));
  comm_.broadcast(&best, sizeof(best));
  // Of the model, what this rank holds (all of it, or its shard with ZeRO-3); of each optimizer
  // state, the range this rank's optimizer holds.
  struct Destination {
    float* device;
    int64_t begin, end;
  };
  const FlatRange held = model_.held_parameters();
  std::vector<Destination> destinations{{model_.parameters(), held.begin, held.end}};
  for (auto& [state_name, buffer] : optimizer_.state())
    destinations.push_back({buffer->get(), optimizer_.begin(), optimizer_.end()});
  flat_state.resize(destinations.size(), std::vector<float>(static_cast<size_t>(model_.parameter_count())));
  for (size_t i = 0; i < destinations.size(); ++i) {
    comm_.broadcast(flat_state[i].data(), flat_state[i].size() * sizeof(float));
    const Destination& to = destinations[i];
    model_.device().memory.upload(Stream{}, to.device, flat_state[i].data() + to.begin,
                                  static_cast<size_t>(to.end - to.begin) * sizeof(float));
  }
  optimizer_.set_step_count(position[1]);
  resumed.step = position[0];
  resumed.loss = loss;
  resumed.best = best;
  return resumed;
}

// Rank 0 matches the files' tensors to the model by their headers, then reads them one at a time,
// each broadcast and uploaded into its place before the next: no rank holds more of the weights
// than the model's parameters and one tensor.
void CheckpointManager::initialize_from(const std::string& path) {
  const std::vector<ParameterSlice>& layout = model_.parameter_layout();
  std::optional<ModelWeights> weights;
  std::vector<const Tensor*> matched;
  if (comm_.rank() == 0) {
    check_init_from_config(path, spec_.model);
    try {
      weights.emplace(path);
    } catch (const std::runtime_error& error) {
      throw BadInput(fmt::format("train.init_from: {}", error.what()));
    }
    matched = match_tensors(weights->tensors(), layout, TensorMatch::kPretrained,
                            fmt::format("train.init_from: {}", path));
  }
  // Of the model, what this rank holds (all of it, or its shard with ZeRO-3).
  const FlatRange held = model_.held_parameters();
  std::vector<float> values;
  for (size_t i = 0; i < layout.size(); ++i) {
    const ParameterSlice& slice = layout[i];
    // The tensor, then its padding, which stays zero.
    values.assign(static_cast<size_t>(slice.count + slice.padding), 0.0f);
    if (comm_.rank() == 0) {
      try {
        weights->read(*matched[i], std::span<float>(values).first(static_cast<size_t>(slice.count)));
      } catch (const std::runtime_error& error) {
        throw BadInput(fmt::format("train.init_from: {}", error.what()));
      }
    }
    comm_.broadcast(values.data(), values.size() * sizeof(float));
    const int64_t first = std::max(slice.offset, held.begin);
    const int64_t last = std::min(slice.offset + slice.count + slice.padding, held.end);
    if (first < last)
      model_.device().memory.upload(Stream{}, model_.parameters() + (first - held.begin),
                                    values.data() + (first - slice.offset),
                                    static_cast<size_t>(last - first) * sizeof(float));
  }
}

}  // namespace trainctl
