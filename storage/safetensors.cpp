// The safetensors writer: see safetensors.h.
#include "safetensors.h"

#include <bit>
#include <cstdint>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "atomic_file.h"

namespace trainctl {

// The length and the tensors are written as the host's own bytes.
static_assert(std::endian::native == std::endian::little, "safetensors files are little-endian");

namespace {
// Readers map the data right after the header; aligned offsets let them view it in place.
constexpr size_t kHeaderAlignment = 8;
}  // namespace

void write_safetensors(const std::string& path, const std::vector<Tensor>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  size_t data_bytes = 0;
  for (const Tensor& tensor : tensors) {
    if (header.contains(tensor.name))
      throw std::invalid_argument(fmt::format("{}: tensor {} is given twice", path, tensor.name));
    const size_t bytes = tensor.values.size() * sizeof(float);
    header[tensor.name] = {{"dtype", "F32"}, {"shape", tensor.shape}, {"data_offsets", {data_bytes, data_bytes + bytes}}};
    data_bytes += bytes;
  }
  header["__metadata__"] = {{"format", "pt"}};

  std::string header_text = header.dump();
  header_text.append((kHeaderAlignment - header_text.size() % kHeaderAlignment) % kHeaderAlignment, ' ');
  const uint64_t header_length = header_text.size();
  std::string bytes(reinterpret_cast<const char*>(&header_length), sizeof(header_length));
  bytes.reserve(bytes.size() + header_text.size() + data_bytes);
  bytes += header_text;
  for (const Tensor& tensor : tensors)
    bytes.append(reinterpret_cast<const char*>(tensor.values.data()), tensor.values.size() * sizeof(float));
  write_file_atomically(path, bytes);
}

}  // namespace trainctl
