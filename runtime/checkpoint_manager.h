// The checkpoint manager: everything a run does with checkpoints, over the named state of its
// model (parameter_layout) and optimizer (state buffers laid out the same way):
//   - staging: device state copied into host buffers allocated and page-locked on the first save;
//   - save: rank 0 writes (weights and optimizer state are identical on every rank), prunes to
//     keep_last, and records the step in progress.step; every rank agrees before going on;
//   - the best checkpoint: with keep_best, a save that sets a new best validation loss is also
//     linked into checkpoints/best/, which pruning never touches;
//   - resume: rank 0 picks the newest checkpoint that verifies (falling back past corrupt ones),
//     checks that it fits this run (model kind, tensor names and shapes, optimizer, global
//     batch), and broadcasts it; every rank loads it;
//   - initial weights (train.init_from): rank 0 reads the model's tensors from a safetensors
//     file or a checkpoint, checks each name and shape, and broadcasts them.
// The file format itself is storage/checkpoint_file.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "checkpoint_file.h"
#include "comm.h"
#include "model.h"
#include "optimizer.h"
#include "run_layout.h"
#include "train_spec.h"

namespace trainctl {

// Where training stands at a step boundary, as a checkpoint records it.
struct TrainingPosition {
  int64_t step = 0;
  int64_t epoch = 0;
  int64_t sample_position = 0;  // examples consumed
  double loss = 0.0;
  double val_loss = 0.0;  // NaN when not evaluated yet
  BestValidation best;
};

struct SavedCheckpoint {
  std::string path;  // on rank 0; empty elsewhere
  double megabytes = 0.0;
  double seconds = 0.0;
};

struct ResumedCheckpoint {
  std::string path;  // on rank 0; empty elsewhere
  int64_t step = 0;
  double loss = 0.0;
  BestValidation best;
};

class CheckpointManager {
 public:
  // `config_text` and `tokenizer_hash` (data.tokenizer's, empty without one) are stored in every
  // checkpoint; `model_kind` and `global_batch` must match on resume.
  CheckpointManager(const RunLayout& layout, const RunSpec& spec, const std::string& config_text,
                    std::string tokenizer_hash, int64_t global_batch, Comm& comm, Model& model, Optimizer& optimizer);
  ~CheckpointManager();
  CheckpointManager(const CheckpointManager&) = delete;
  CheckpointManager& operator=(const CheckpointManager&) = delete;

  // Collective. Loads the newest valid checkpoint into the model and optimizer; nothing when
  // there is none. Throws BadInput when it does not fit the run.
  std::optional<ResumedCheckpoint> resume();
  // Collective. Loads the weights in `path` (storage/model_weights.h) into the model, leaving the
  // optimizer fresh. Names are the model's, or Hugging Face's without the base model's
  // "transformer." prefix (as the Hub's GPT-2 files have them); the causal-mask buffers and the
  // tied lm_head.weight are skipped. Throws BadInput naming the first tensor that is missing,
  // shaped differently, or has no place in the model.
  void initialize_from(const std::string& path);
  // Collective. `new_best`: this save's validation loss is the best so far; with keep_best, it
  // becomes the one in checkpoints/best/.
  SavedCheckpoint save(const TrainingPosition& position, bool new_best);

 private:
  const Checkpoint& stage(const TrainingPosition& position);
  void keep_as_best(const std::string& path) const;
  void check_fits(const Checkpoint& checkpoint, const std::string& path) const;
  std::vector<float> flatten(const std::vector<Tensor>& tensors, const std::string& suffix,
                             const std::string& path) const;

  const RunLayout& layout_;
  const RunSpec& spec_;
  const std::string& config_text_;
  std::string tokenizer_hash_;
  int64_t global_batch_;
  Comm& comm_;
  Model& model_;
  Optimizer& optimizer_;
  Checkpoint staged_;
};

}  // namespace trainctl
