// A checkpoint named on the command line (RUN_OR_CKPT of `trainctl export`, `trainctl sample` and
// `trainctl eval`): a checkpoint file or sharded step directory, the newest checkpoint that
// verifies in a run directory or its checkpoints folder, or the one of a given step there; the
// config it was trained with; and its model, built on the CPU with its weights.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "checkpoint.h"
#include "model.h"
#include "train_spec.h"

namespace trainctl {

struct StoredCheckpoint {
  std::string path;
  Checkpoint checkpoint;
  RunSpec spec;  // from checkpoint.meta.config_text
};

// The folder of checkpoints `path` names: a run directory's checkpoints folder, or `path` itself.
std::string checkpoint_folder(const std::string& path);

// Newer checkpoints that do not verify are reported on stderr and skipped. Throws UsageError
// when there is none, Failure when none verifies, ConfigError when its config does not parse.
StoredCheckpoint load_stored_checkpoint(const std::string& run_or_checkpoint);

// The checkpoint of step `step` in a run directory or checkpoints folder, or the best one kept
// beside them (checkpoint.keep_best) when it is of that step. Throws UsageError naming the steps
// there are when none is of `step`, CheckpointError when it does not verify, ConfigError as above.
StoredCheckpoint load_stored_checkpoint_of_step(const std::string& run, int64_t step);

// The checkpoint's model on the CPU, built for `options` and holding the checkpoint's weights.
// Throws BadInput when its tensors are not those of the model its config describes.
std::unique_ptr<Model> load_model_on_cpu(const StoredCheckpoint& stored, const ModelOptions& options);

}  // namespace trainctl
