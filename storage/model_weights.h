// Model weights from a file someone hands a run (train.init_from): a safetensors file, a
// directory holding model.safetensors (what `trainctl export` writes and the Hugging Face Hub
// serves), or a trainctl checkpoint (a file, verified by its sidecar before HDF5 reads it, or a
// sharded step directory, verified by its manifest).
#pragma once

#include <string>
#include <vector>

#include "checkpoint.h"

namespace trainctl {

// The tensors as the file names them. Throws CheckpointError or SafetensorsError naming the
// file and the problem.
std::vector<Tensor> read_model_weights(const std::string& path);

}  // namespace trainctl
