// Reading weights for train.init_from: see model_weights.h.
#include "model_weights.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include <fmt/format.h>

#include "checkpoint_directory.h"
#include "hugging_face_weights.h"
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

ModelWeights::ModelWeights(const std::string& path) {
  std::error_code ignored;
  const bool directory = std::filesystem::is_directory(path, ignored);
  if (directory ? std::filesystem::exists(std::filesystem::path(path) / kManifestName, ignored)
                : starts_with_hdf5_signature(path)) {
    tensors_ = load_checkpoint(path).model;
    return;
  }
  if (directory)
    files_ = open_hugging_face_weights(path);
  else
    files_.emplace_back(path);
  for (size_t file = 0; file < files_.size(); ++file) {
    const std::vector<SafetensorsEntry>& entries = files_[file].entries();
    for (size_t entry = 0; entry < entries.size(); ++entry) {
      tensors_.push_back({entries[entry].name, entries[entry].shape, {}});
      places_.emplace_back(file, entry);
    }
  }
}

void ModelWeights::read(const Tensor& tensor, std::span<float> out) {
  const auto index = static_cast<size_t>(&tensor - tensors_.data());
  if (index >= tensors_.size()) throw std::logic_error(fmt::format("tensor {} is not one of these weights", tensor.name));
  if (places_.empty()) {
    std::vector<float>& values = tensors_[index].values;
    if (values.size() != out.size())
      throw std::logic_error(fmt::format("tensor {} holds {} values, read into {}", tensor.name, values.size(), out.size()));
    std::copy(values.begin(), values.end(), out.begin());
    std::vector<float>().swap(values);
    return;
  }
  const auto [file, entry] = places_[index];
  files_[file].read(files_[file].entries()[entry], out);
}

}  // namespace trainctl
