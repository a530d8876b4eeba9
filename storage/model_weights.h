// Model weights from a file someone hands a run (train.init_from): a safetensors file, a Hugging
// Face model directory (model.safetensors, or shards with model.safetensors.index.json:
// hugging_face_weights.h; what `trainctl export` writes and the Hub serves), or a trainctl
// checkpoint (a file, verified by its sidecar before HDF5 reads it, or a sharded step directory,
// verified by its manifest). Safetensors are opened by their headers and each tensor read only
// when asked for, straight into where it goes, so that a model of many GB is not held twice.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint.h"
#include "safetensors.h"

namespace trainctl {

class ModelWeights {
 public:
  // Throws CheckpointError or SafetensorsError naming the file and the problem.
  explicit ModelWeights(const std::string& path);

  // Every tensor's name and shape, as the files name them. The values are held only for a
  // trainctl checkpoint; read() gives them for every source.
  const std::vector<Tensor>& tensors() const { return tensors_; }
  // The values of `tensor` (one of tensors()) into `out`, its element count; a checkpoint's held
  // values are released once given. Throws SafetensorsError when a file can no longer be read.
  void read(const Tensor& tensor, std::span<float> out);

 private:
  std::vector<Tensor> tensors_;
  std::vector<SafetensorsFile> files_;
  // Of each tensor, its file and its entry there; empty for a checkpoint.
  std::vector<std::pair<size_t, size_t>> places_;
};

}  // namespace trainctl
