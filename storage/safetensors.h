// The safetensors format (Hugging Face), which transformers' from_pretrained loads: an 8-byte
// little-endian header length, a JSON header mapping each tensor name to its dtype, shape and
// [begin, end) byte offsets into the data, padded with spaces to a multiple of 8 bytes, then the
// tensors' raw little-endian bytes, one after another. Both directions stream, one tensor (a
// reader: a bounded part of it) at a time, so that a model of many GB is never held twice.
#pragma once

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "checkpoint.h"

namespace trainctl {

// The dtypes read; F32 and BF16 are also written.
enum class SafetensorsDtype { kF32, kBf16, kF16 };

const char* safetensors_dtype_name(SafetensorsDtype dtype);  // "F32", "BF16", "F16"
uint64_t safetensors_dtype_bytes(SafetensorsDtype dtype);

// Writes `tensors` in their order, as `dtype` (BF16 rounded to nearest, ties to even, as
// torch's .to(torch.bfloat16)), atomically (atomic_file.h), with "__metadata__": {"format": "pt"}
// as PyTorch's writer marks its files. Throws std::invalid_argument for a name given twice.
void write_safetensors(const std::string& path, const std::vector<const Tensor*>& tensors,
                       SafetensorsDtype dtype = SafetensorsDtype::kF32);

// A file that is not a well-formed safetensors file, or holds a dtype this reader does not take.
class SafetensorsError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One tensor of a file's header.
struct SafetensorsEntry {
  std::string name;
  SafetensorsDtype dtype = SafetensorsDtype::kF32;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // bytes, from the start of the data
};

// A safetensors file opened by its header alone; each tensor's values are read when asked for.
class SafetensorsFile {
 public:
  // Reads and checks the header: JSON, every entry's dtype one of F32, BF16, F16, its offsets
  // holding its shape's values and lying within the file. Throws SafetensorsError naming the file
  // and what is wrong (truncation, a header that is not JSON, offsets outside the data or not
  // matching the shape, an unknown dtype), or that it cannot be read.
  explicit SafetensorsFile(std::string path);

  const std::string& path() const { return path_; }
  // In the order of their data.
  const std::vector<SafetensorsEntry>& entries() const { return entries_; }
  // The entry's values as float32 into `out` (its element count): F32 as stored, BF16 and F16 (the
  // Hub's half-precision checkpoints) widened exactly. Throws SafetensorsError when the file can no
  // longer be read.
  void read(const SafetensorsEntry& entry, std::span<float> out) const;

 private:
  std::string path_;
  uint64_t data_start_ = 0;
  std::vector<SafetensorsEntry> entries_;
};

}  // namespace trainctl
