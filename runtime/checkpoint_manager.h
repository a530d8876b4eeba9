// The checkpoint manager: everything a run does with checkpoints, over the named state of its
// model (parameter_layout) and optimizer (state buffers laid out the same way):
//   - staging: device state copied into host buffers allocated and page-locked on the first save
//     and reused;
//   - save: rank 0 writes one file, or with checkpoint.sharded every rank writes its shard of the
//     flat state (shard_layout.h) and rank 0 then publishes the step with its manifest
//     (storage/sharded_checkpoint.h); then rank 0 prunes to keep_last and records the step in
//     progress.step. With checkpoint.async the write runs on a thread of its own while training
//     goes on, one write in flight at most; it is published once every rank's write has finished
//     (the trainer asks at each step's agreement), and a failed one is reported and skipped;
//   - the best checkpoint: with keep_best, a save that sets a new best validation loss is also
//     linked into checkpoints/best/, which pruning never touches;
//   - resume: rank 0 picks the newest checkpoint that verifies (falling back past corrupt ones and
//     step directories without a valid manifest), checks that it fits this run (model kind, tensor
//     names and shapes by models/named_tensors.h, optimizer, global batch), and broadcasts it;
//     every rank loads its part, so a checkpoint of any world size, sharded or not, resumes at any
//     other;
//   - initial weights (train.init_from): rank 0 checks a Hugging Face directory's config.json
//     against [model] (models/config_json.h), matches the tensors of the safetensors files or the
//     checkpoint to the model by their headers (models/named_tensors.h), reads each into its
//     place in the parameters, and broadcasts them.
// The file formats themselves are storage/checkpoint_file.h and storage/sharded_checkpoint.h, the
// checkpoints directory's listing and pruning storage/checkpoint_directory.h.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "checkpoint.h"
#include "comm.h"
#include "early_stopping.h"
#include "model.h"
#include "optimizer.h"
#include "run_layout.h"
#include "shard_layout.h"
#include "sharded_checkpoint.h"
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

// What a save came to, on rank 0 (elsewhere only `failure` is set alike): published, or not
// (an asynchronous write that failed, which the run survives).
struct SavedCheckpoint {
  int64_t step = 0;
  std::string path;
  double megabytes = 0.0;  // written, over all ranks
  double seconds = 0.0;    // from staging to published
  std::string failure;     // empty once published
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
  // checkpoint; `model_kind` and `global_batch` must match on resume. `shards`: the ranks' ranges
  // of the flat state, which a sharded save writes.
  CheckpointManager(const RunLayout& layout, const RunSpec& spec, const std::string& config_text,
                    std::string tokenizer_hash, int64_t global_batch, const ShardLayout& shards, Comm& comm,
                    Model& model, Optimizer& optimizer);
  // Waits for a write in flight, which is then not published (finish_writes() publishes it).
  ~CheckpointManager();
  CheckpointManager(const CheckpointManager&) = delete;
  CheckpointManager& operator=(const CheckpointManager&) = delete;

  // Collective. Loads the newest valid checkpoint into the model and optimizer; nothing when
  // there is none. Throws BadInput when it does not fit the run.
  std::optional<ResumedCheckpoint> resume();
  // Collective. Loads the weights in `path` (storage/model_weights.h) into the model, leaving the
  // optimizer fresh; they match as TensorMatch::kPretrained (models/named_tensors.h) says. Throws
  // BadInput naming the first config.json field that differs from [model], or the first tensor
  // that is missing, shaped differently, or has no place in the model, or a file at fault.
  void initialize_from(const std::string& path);
  // Collective. Saves the state at `position`; `new_best`: its validation loss is the best so far
  // (with keep_best, it becomes the one in checkpoints/best/). First publishes the write in
  // flight, if any (its outcome is returned too). With checkpoint.async and not `durable`, this
  // stages the state and returns while a thread writes it; otherwise the save is published on
  // return, and a failure to write it throws on every rank.
  std::vector<SavedCheckpoint> save(const TrainingPosition& position, bool new_best, bool durable);
  // Whether this rank's write in flight has finished (false with none in flight): once it is true
  // on every rank, finish_writes() publishes it without waiting.
  bool write_finished() const;
  // Collective. Publishes the write in flight, waiting for it; nothing with none.
  std::optional<SavedCheckpoint> finish_writes();

 private:
  // One save from staging to publishing.
  struct Write {
    TrainingPosition position;
    bool new_best = false;
    std::chrono::steady_clock::time_point started;
    std::thread thread;                // empty for a synchronous write
    std::atomic<bool> finished{false};
    std::string path;                  // of this rank's file
    ShardRecord record;                // of this rank's shard
    std::string failure;               // this rank's, "cannot write checkpoint PATH: REASON"
  };

  bool writes() const;  // whether this rank writes files at all
  void fill_meta(CheckpointMeta& meta, const TrainingPosition& position) const;
  void stage(const TrainingPosition& position);
  void write_staged(Write& write) const;
  SavedCheckpoint publish(Write& write, bool durable);
  void keep_as_best(const std::string& path) const;
  void check_fits(const Checkpoint& checkpoint, const std::string& path) const;

  const RunLayout& layout_;
  const RunSpec& spec_;
  const std::string& config_text_;
  std::string tokenizer_hash_;
  int64_t global_batch_;
  const ShardLayout& shards_;
  Comm& comm_;
  Model& model_;
  Optimizer& optimizer_;
  Checkpoint staged_;    // unsharded, on rank 0
  Shard staged_shard_;   // sharded
  std::unique_ptr<Write> in_flight_;
};

}  // namespace trainctl
