// The checkpoint in memory: the model's tensors and the optimizer's by their PyTorch names, and
// the training position and provenance they were saved at. What the file formats write and read
// (checkpoint_file.h, one HDF5 file; sharded_checkpoint.h, a step directory of shards), what the
// directory policy picks from (checkpoint_directory.h), and, as named tensors, what safetensors.h
// and models/named_tensors.h exchange.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace trainctl {

// The version written. 2 added model_kind; 3 the whole-file checksum in the sidecar; 4 the best
// validation (best_val_loss, best_step, evals_since_best); 5 the tokenizer (tokenizer_path,
// tokenizer_hash); 6 sharded step directories (sharded_checkpoint.h), files unchanged. Files of
// versions 1 and 2 (before any release) are not read: their sidecars record no whole-file
// checksum, and HDF5 must not parse a file that none verified.
constexpr int64_t kCheckpointFormatVersion = 6;
// Version 4 files lack only the tokenizer, which reads as none: runs resume across the upgrade.
constexpr int64_t kOldestCheckpointFormatRead = 4;

struct Tensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;
};

struct CheckpointMeta {
  int64_t format_version = kCheckpointFormatVersion;  // as read; saves write the current one
  std::string model_kind;       // model.kind of the config that wrote it
  int64_t step = 0;             // optimizer steps completed
  int64_t epoch = 0;            // epoch of the next sample
  int64_t sample_position = 0;  // global samples consumed
  uint64_t rng_seed = 0;        // with `epoch`, the whole RNG state: permutations derive from (seed, epoch)
  int64_t world_size = 1;
  int64_t global_batch = 0;
  std::string optimizer;        // "sgd" | "adamw"
  int64_t optimizer_step = 0;   // AdamW's bias-correction count
  double loss = 0.0;            // mean train loss of the last step
  // The trainer's best validation so far (runtime/early_stopping.h), stored so that a resumed run
  // stops at the step and keeps the checkpoint that an uninterrupted one would.
  double best_val_loss = std::numeric_limits<double>::quiet_NaN();  // NaN: no evaluation yet
  int64_t best_step = 0;
  int64_t evals_since_best = 0;
  std::string config_text;      // the resolved config the run trained with
  // data.tokenizer's directory and its content hash (Tokenizer::content_hash); empty for a
  // run without one (byte tokens, or classification data).
  std::string tokenizer_path, tokenizer_hash;
  std::string hostnames;        // comma-separated, rank order
  std::string trainctl_version = TRAINCTL_VERSION;
  std::string created_utc;      // ISO 8601
  std::string hardware;         // for the sidecar: CPU model and device
  std::map<std::string, double> metrics;  // for the sidecar: e.g. val_loss
};

struct Checkpoint {
  CheckpointMeta meta;
  std::vector<Tensor> model;            // in state_dict order
  std::vector<Tensor> optimizer_state;  // names "<param>/<state>"
};

// A checkpoint that is truncated, corrupt, or not a trainctl checkpoint.
class CheckpointError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace trainctl
