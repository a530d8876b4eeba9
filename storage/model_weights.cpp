// Reading weights for train.init_from: see model_weights.h.
#include "model_weights.h"

#include <cstring>
#include <filesystem>
#include <fstream>

#include "checkpoint_directory.h"
#include "safetensors.h"
#include "sharded_checkpoint.h"

namespace trainctl {

namespace {
// Every HDF5 file starts with these 8 bytes (the format's superblock signature at offset 0,
// where trainctl's checkpoints have it).
constexpr char kHdf5Signature[] = "\x89HDF\r\n\x1a\n";

bool starts_with_hdf5_signature(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char head[sizeof(kHdf5Signature) - 1] = {};
  return in.read(head, sizeof(head)) && std::memcmp(head, kHdf5Signature, sizeof(head)) == 0;
}
}  // namespace

std::vector<Tensor> read_model_weights(const std::string& path) {
  std::error_code ignored;
  if (std::filesystem::is_directory(path, ignored))
    return std::filesystem::exists(std::filesystem::path(path) / kManifestName, ignored)
               ? load_checkpoint(path).model
               : read_safetensors(path + "/model.safetensors");
  if (starts_with_hdf5_signature(path)) return load_checkpoint(path).model;
  return read_safetensors(path);
}

}  // namespace trainctl
