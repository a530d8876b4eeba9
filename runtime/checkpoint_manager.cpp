// The checkpoint manager: see checkpoint_manager.h.
#include "checkpoint_manager.h"

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
#include "bad_input.h"
#include "model_weights.h"
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

std::string shape_text(const std::vector<int64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

// Hugging Face's conventions for saved models: a head model's base-model tensors may be stored
// without the base model's prefix (the Hub's GPT-2 files are), and some stored tensors are no
// parameters: GPT-2's causal-mask buffers, and the LM head that is tied to wte.
constexpr std::string_view kBaseModelPrefix = "transformer.";
bool is_stored_but_no_parameter(const std::string& name) {
  return name == "lm_head.weight" || name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias");
}

}  // namespace

CheckpointManager::CheckpointManager(const RunLayout& layout, const RunSpec& spec, const std::string& config_text,
                                     std::string tokenizer_hash, int64_t global_batch, Comm& comm, Model& model,
                                     Optimizer& optimizer)
    : layout_(layout),
      spec_(spec),
      config_text_(config_text),
      tokenizer_hash_(std::move(tokenizer_hash)),
      global_batch_(global_batch),
      comm_(comm),
      model_(model),
      optimizer_(optimizer) {}

CheckpointManager::~CheckpointManager() {
  for (std::vector<Tensor>* tensors : {&staged_.model, &staged_.optimizer_state})
    for (Tensor& tensor : *tensors) model_.device().memory.unpin_host(tensor.values.data());
}

// The state to save, staged in host buffers that are allocated on the first save and reused:
// a fresh 100 MB allocation per save costs more in page faults than the copy itself.
const Checkpoint& CheckpointManager::stage(const TrainingPosition& position) {
  CheckpointMeta& meta = staged_.meta;
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
  meta.best = position.best;
  meta.config_text = config_text_;
  meta.tokenizer_path = spec_.data.tokenizer.value_or("");
  meta.tokenizer_hash = tokenizer_hash_;
  meta.hostnames.clear();
  for (const std::string& host : comm_.node_names()) meta.hostnames += (meta.hostnames.empty() ? "" : ",") + host;
  meta.created_utc = utc_now();
  const Device& device = model_.device();
  meta.hardware = fmt::format("{}; device {}; {} ranks", cpu_model(), device.name, comm_.world_size());
  meta.metrics.clear();
  if (!std::isnan(position.val_loss)) meta.metrics["val_loss"] = position.val_loss;

  // Tensors [first, first + parameters) of `tensors` receive the slices of `device_source`.
  const auto& layout = model_.parameter_layout();
  auto stage_into = [&](std::vector<Tensor>& tensors, size_t first, const float* device_source,
                        const std::string& suffix) {
    if (tensors.size() == first)
      for (const ParameterSlice& slice : layout) {
        tensors.push_back({slice.name + suffix, slice.shape, std::vector<float>(static_cast<size_t>(slice.count))});
        // Pinned once: every later save copies from the device into the same buffers.
        device.memory.pin_host(tensors.back().values.data(), tensors.back().values.size() * sizeof(float));
      }
    for (size_t i = 0; i < layout.size(); ++i)
      device.memory.download(Stream{}, tensors[first + i].values.data(), device_source + layout[i].offset,
                             static_cast<size_t>(layout[i].count) * sizeof(float));
  };
  stage_into(staged_.model, 0, model_.parameters(), "");
  size_t first = 0;
  for (auto& [state_name, buffer] : optimizer_.state()) {
    stage_into(staged_.optimizer_state, first, buffer->get(), "/" + state_name);
    first += layout.size();
  }
  return staged_;
}

// Links rather than copies: the best checkpoint costs no second write, and pruning the step-N.h5
// name in checkpoints/ leaves the file to the link. The new best is published before the old one
// goes, so checkpoints/best/ always holds one (its newest step-N.h5 is the best).
void CheckpointManager::keep_as_best(const std::string& path) const {
  const std::filesystem::path best_dir = layout_.best_checkpoint_dir();
  std::filesystem::create_directories(best_dir);
  const std::filesystem::path checkpoint(path);
  std::filesystem::path sidecar = checkpoint;
  sidecar.replace_extension(".json");
  // The sidecar first: a step-N.h5 in best/ always has the checksum that verifies it.
  for (const std::filesystem::path& source : {sidecar, checkpoint}) {
    const std::filesystem::path target = best_dir / source.filename();
    std::filesystem::remove(target);
    std::error_code no_hard_links;
    std::filesystem::create_hard_link(source, target, no_hard_links);
    if (no_hard_links) std::filesystem::copy_file(source, target);
  }
  for (const CheckpointEntry& older : list_checkpoints(best_dir.string())) {
    if (older.path == (best_dir / checkpoint.filename()).string()) continue;
    std::filesystem::path older_sidecar(older.path);
    older_sidecar.replace_extension(".json");
    std::filesystem::remove(older.path);
    std::filesystem::remove(older_sidecar);
  }
  fsync_path(best_dir.string());
}

SavedCheckpoint CheckpointManager::save(const TrainingPosition& position, bool new_best) {
  SavedCheckpoint saved;
  if (comm_.rank() == 0) {
    std::filesystem::create_directories(layout_.checkpoints());
    const auto started = std::chrono::steady_clock::now();
    saved.path = save_checkpoint(layout_.checkpoints(), stage(position),
                                 [&] { test_midway_through_save(layout_.path(), position.step); });
    saved.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    saved.megabytes = static_cast<double>(std::filesystem::file_size(saved.path)) / 1e6;
    if (new_best && spec_.checkpoint.keep_best) keep_as_best(saved.path);
    prune_checkpoints(layout_.checkpoints(), spec_.checkpoint.keep_last);
    write_file_atomically(layout_.progress(), fmt::format("{}\n", position.step));
  }
  comm_.barrier();
  return saved;
}

void CheckpointManager::check_fits(const Checkpoint& checkpoint, const std::string& path) const {
  const std::string kind = spec_.model.kind();
  if (checkpoint.meta.model_kind != kind)
    throw BadInput(fmt::format("checkpoint {} holds a model of kind \"{}\" but the config's model.kind is \"{}\"",
                               path, checkpoint.meta.model_kind, kind));
  const auto& layout = model_.parameter_layout();
  if (checkpoint.model.size() != layout.size())
    throw BadInput(fmt::format("checkpoint {} holds {} model tensors but the config's model has {}", path,
                               checkpoint.model.size(), layout.size()));
  for (size_t i = 0; i < layout.size(); ++i)
    if (checkpoint.model[i].name != layout[i].name || checkpoint.model[i].shape != layout[i].shape)
      throw BadInput(fmt::format("checkpoint {} does not fit the config's model: it has {} {}, the config needs {} {}",
                                 path, checkpoint.model[i].name, shape_text(checkpoint.model[i].shape),
                                 layout[i].name, shape_text(layout[i].shape)));
  if (checkpoint.meta.optimizer != optimizer_.name())
    throw BadInput(fmt::format("checkpoint {} was written with optimizer {} but the config uses {}", path,
                               checkpoint.meta.optimizer, optimizer_.name()));
  if (checkpoint.meta.global_batch != global_batch_)
    throw BadInput(fmt::format("checkpoint {} was written with global batch {} but this run's is {} "
                               "(micro_batch x grad_accum x ranks)",
                               path, checkpoint.meta.global_batch, global_batch_));
}

// The checkpoint's tensors named "<parameter><suffix>", flattened in the model's layout.
std::vector<float> CheckpointManager::flatten(const std::vector<Tensor>& tensors, const std::string& suffix,
                                              const std::string& path) const {
  std::vector<float> flat(static_cast<size_t>(model_.parameter_count()));
  for (const ParameterSlice& slice : model_.parameter_layout()) {
    auto found = std::find_if(tensors.begin(), tensors.end(),
                              [&](const Tensor& tensor) { return tensor.name == slice.name + suffix; });
    if (found == tensors.end() || static_cast<int64_t>(found->values.size()) != slice.count)
      throw BadInput(fmt::format("checkpoint {} lacks {}{} of {} values", path, slice.name, suffix, slice.count));
    std::copy(found->values.begin(), found->values.end(), flat.begin() + slice.offset);
  }
  return flat;
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
      check_fits(*point.checkpoint, point.path);
      flat_state.push_back(flatten(point.checkpoint->model, "", point.path));
      for (auto& [state_name, buffer] : optimizer_.state())
        flat_state.push_back(flatten(point.checkpoint->optimizer_state, "/" + state_name, point.path));
      position = {point.checkpoint->meta.step, point.checkpoint->meta.optimizer_step, 1};
      loss = point.checkpoint->meta.loss;
      best = point.checkpoint->meta.best;
      resumed.path = point.path;
    }
  }
  comm_.broadcast(position.data(), sizeof(position));
  if (position[2] == 0) return std::nullopt;
  comm_.broadcast(&loss, sizeof(loss));
  comm_.broadcast(&best, sizeof(best));
  std::vector<float*> destinations{model_.parameters()};
  for (auto& [state_name, buffer] : optimizer_.state()) destinations.push_back(buffer->get());
  flat_state.resize(destinations.size(), std::vector<float>(static_cast<size_t>(model_.parameter_count())));
  for (size_t i = 0; i < destinations.size(); ++i) {
    comm_.broadcast(flat_state[i].data(), flat_state[i].size() * sizeof(float));
    model_.device().memory.upload(Stream{}, destinations[i], flat_state[i].data(),
                                  flat_state[i].size() * sizeof(float));
  }
  optimizer_.set_step_count(position[1]);
  resumed.step = position[0];
  resumed.loss = loss;
  resumed.best = best;
  return resumed;
}

void CheckpointManager::initialize_from(const std::string& path) {
  std::vector<float> flat(static_cast<size_t>(model_.parameter_count()));
  if (comm_.rank() == 0) {
    std::vector<Tensor> tensors;
    try {
      tensors = read_model_weights(path);
    } catch (const std::runtime_error& error) {
      throw BadInput(fmt::format("train.init_from: {}", error.what()));
    }
    std::vector<bool> used(tensors.size(), false);
    for (const ParameterSlice& slice : model_.parameter_layout()) {
      const std::string base_name =
          slice.name.starts_with(kBaseModelPrefix) ? slice.name.substr(kBaseModelPrefix.size()) : slice.name;
      const auto found = std::find_if(tensors.begin(), tensors.end(), [&](const Tensor& tensor) {
        return tensor.name == slice.name || tensor.name == base_name;
      });
      if (found == tensors.end())
        throw BadInput(fmt::format("train.init_from: {} has no tensor {}, which the config's model needs", path,
                                   slice.name));
      if (found->shape != slice.shape)
        throw BadInput(fmt::format("train.init_from: {} holds {} {} but the config's model needs {}", path,
                                   found->name, shape_text(found->shape), shape_text(slice.shape)));
      std::copy(found->values.begin(), found->values.end(), flat.begin() + slice.offset);
      used[static_cast<size_t>(found - tensors.begin())] = true;
    }
    for (size_t i = 0; i < tensors.size(); ++i)
      if (!used[i] && !is_stored_but_no_parameter(tensors[i].name))
        throw BadInput(fmt::format("train.init_from: {} holds {} {}, which the config's model has no place for", path,
                                   tensors[i].name, shape_text(tensors[i].shape)));
  }
  comm_.broadcast(flat.data(), flat.size() * sizeof(float));
  model_.device().memory.upload(Stream{}, model_.parameters(), flat.data(), flat.size() * sizeof(float));
}

}  // namespace trainctl
