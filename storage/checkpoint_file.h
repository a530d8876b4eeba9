// The single-file checkpoint format: one HDF5 file per saved step, written atomically, with a
// CRC-32 of the whole file in its sidecar, checked before HDF5 reads the file, so that a resume
// never picks up a torn or corrupted file and HDF5 never parses a corrupt one. Layout
// (docs/checkpoint-format.md):
//   /model/<pytorch name>                 float32, the model's state_dict (e.g. 0.weight [out, in])
//   /optimizer/<pytorch name>/<state>     float32, momentum_buffer | exp_avg, exp_avg_sq
//   attributes on / : the training position and provenance (CheckpointMeta)
//   attribute crc32 on every dataset
// Next to each file, step-N.json is the sidecar: the file's size and CRC-32, and a summary for
// people and tools. A step-N.h5 without a sidecar that records its checksum is not verified.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "checkpoint.h"

namespace trainctl {

std::string checkpoint_file_name(int64_t step);  // step-00000100.h5
// The sidecar of a checkpoint file: step-00000100.json beside step-00000100.h5.
std::string sidecar_path(const std::string& checkpoint_path);

// Writes <dir>/step-N.h5 to a temporary file, publishes the sidecar with that file's checksum,
// then publishes the file (fsync, rename, directory fsync); returns the final path. A crash at
// any point leaves no step-N.h5, or a whole one whose sidecar records it. A failed write (a full
// disk) leaves no temporary and throws CheckpointError "cannot write checkpoint PATH: REASON",
// REASON in the OS's words ("No space left on device"). `midway` runs halfway through writing the
// file, between the model and the optimizer state: the runtime's test hooks land faults there.
std::string save_checkpoint(const std::string& dir, const Checkpoint& checkpoint,
                            const std::function<void()>& midway = {});

// Checks the file's size and CRC-32 against its sidecar before HDF5 opens it (a sidecar that
// records none fails, so HDF5 never parses an unverified file), then reads it and verifies every
// dataset's checksum. Throws CheckpointError saying what is wrong, or HDF5's CheckFailure for a
// file it cannot parse; load_checkpoint (checkpoint_directory.h), which reads either shape, names
// the path in both.
Checkpoint load_checkpoint_file(const std::string& path);

}  // namespace trainctl
