// A checkpoint named on the command line (RUN_OR_CKPT of `trainctl export` and `trainctl
// sample`): a checkpoint file or sharded step directory, or the newest checkpoint that verifies in a run directory or its
// checkpoints folder, and the [model] of the config it was trained with.
#pragma once

#include <string>

#include "checkpoint.h"
#include "train_spec.h"

namespace trainctl {

struct StoredCheckpoint {
  std::string path;
  Checkpoint checkpoint;
  ModelSpec model;  // from checkpoint.meta.config_text
};

// Newer checkpoints that do not verify are reported on stderr and skipped. Throws UsageError
// when there is none, Failure when none verifies, ConfigError when its config does not parse.
StoredCheckpoint load_stored_checkpoint(const std::string& run_or_checkpoint);

}  // namespace trainctl
