// Checkpoints: one HDF5 file per saved step, written atomically, with a CRC-32 of the whole file
// in its sidecar, checked before HDF5 reads the file, so that a resume never picks up a torn or
// corrupted file and HDF5 never parses a corrupt one. Layout (docs/checkpoint-format.md):
//   /model/<pytorch name>                 float32, the model's state_dict (e.g. 0.weight [out, in])
//   /optimizer/<pytorch name>/<state>     float32, momentum_buffer | exp_avg, exp_avg_sq
//   attributes on / : the training position and provenance (CheckpointMeta)
//   attribute crc32 on every dataset
// Next to each file, step-N.json is the sidecar: the file's size and CRC-32, and a summary for
// people and tools. A step-N.h5 without a sidecar that records its checksum is not verified.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace trainctl {

// The version written. 2 added model_kind; 3 the whole-file checksum in the sidecar; 4 the best
// validation (best_val_loss, best_step, evals_since_best); 5 the tokenizer (tokenizer_path,
// tokenizer_hash); 6 sharded step directories (sharded_checkpoint.h), files unchanged. Files of versions 1 and 2 (before any release) are not read: their sidecars
// record no whole-file checksum, and HDF5 must not parse a file that none verified.
constexpr int64_t kCheckpointFormatVersion = 6;
// Version 4 files lack only the tokenizer, which reads as none: runs resume across the upgrade.
constexpr int64_t kOldestCheckpointFormatRead = 4;

struct Tensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;
};

// The best validation loss so far: what early stopping and checkpoint.keep_best judge by. It is
// resumable state, so that a resumed run stops at the step and keeps the checkpoint that an
// uninterrupted one would.
struct BestValidation {
  double val_loss = std::numeric_limits<double>::quiet_NaN();  // NaN: no evaluation yet
  int64_t step = 0;              // the step of that evaluation
  int64_t evals_since_best = 0;  // evaluations since, none of which improved on it
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
  BestValidation best;
  std::string config_text;      // the resolved config the run trained with
  // data.tokenizer's directory and its content hash (Gpt2Tokenizer::content_hash); empty for a
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

std::string checkpoint_file_name(int64_t step);  // step-00000100.h5

// Writes <dir>/step-N.h5 to a temporary file, publishes the sidecar with that file's checksum,
// then publishes the file (fsync, rename, directory fsync); returns the final path. A crash at
// any point leaves no step-N.h5, or a whole one whose sidecar records it. A failed write (a full
// disk) leaves no temporary and throws CheckpointError "cannot write checkpoint PATH: REASON",
// REASON in the OS's words ("No space left on device"). `midway` runs halfway through writing the
// file, between the model and the optimizer state: the runtime's test hooks land faults there.
std::string save_checkpoint(const std::string& dir, const Checkpoint& checkpoint,
                            const std::function<void()>& midway = {});

// A step directory (sharded_checkpoint.h) is read whole, at any world size. A file:
// checks the file's size and CRC-32 against its sidecar before HDF5 opens it (a sidecar that
// records none fails, so HDF5 never parses an unverified file), then reads it,
// verifies every dataset's checksum and that a step-N.h5 name matches the stored step. Throws
// CheckpointError naming the path and the problem.
Checkpoint load_checkpoint(const std::string& path);

// Whether `path` names one checkpoint rather than a folder of them: a file, or a sharded step
// directory (one that holds a manifest or shards).
bool is_one_checkpoint(const std::string& path);
// The bytes a checkpoint takes on disk: its file, or the files of its step directory.
uint64_t checkpoint_bytes(const std::string& path);

struct CheckpointEntry {
  std::string path;
  int64_t step = 0;
};
// The step-N.h5 files and step-N directories of `dir`, newest first (temporary files are never
// listed; a directory is listed whether or not its save finished, and fails to load if not).
std::vector<CheckpointEntry> list_checkpoints(const std::string& dir);

struct ResumePoint {
  std::optional<Checkpoint> checkpoint;  // empty: start from scratch
  std::string path;
  std::vector<std::string> skipped;      // "path: problem" for each newer file that failed to verify
};
// The newest checkpoint in `dir` that verifies, falling back past corrupt ones.
ResumePoint load_latest_valid(const std::string& dir);

// Deletes all but the newest `keep_last` checkpoints (and their sidecars), and what a crashed
// save left behind: temporaries, and step directories without a manifest. Only while no save is
// in flight.
void prune_checkpoints(const std::string& dir, int64_t keep_last);

}  // namespace trainctl
