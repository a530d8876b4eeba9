// The safetensors format (Hugging Face), which transformers' from_pretrained loads: an 8-byte
// little-endian header length, a JSON header mapping each tensor name to its dtype, shape and
// [begin, end) byte offsets into the data, padded with spaces to a multiple of 8 bytes, then the
// tensors' raw little-endian bytes, one after another.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "checkpoint.h"

namespace trainctl {

// Writes `tensors` (float32, "F32") in their order, atomically (atomic_file.h), with
// "__metadata__": {"format": "pt"} as PyTorch's writer marks its files.
void write_safetensors(const std::string& path, const std::vector<Tensor>& tensors);

// A file that is not a well-formed safetensors file, or holds a dtype this reader does not take.
class SafetensorsError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Every tensor of the file, in the order of their data, as float32: F32 as stored, BF16 and F16
// (the Hub's half-precision checkpoints) widened exactly. Throws SafetensorsError naming the file
// and what is wrong (truncation, a header that is not JSON, offsets outside the data or not
// matching the shape, an unknown dtype).
std::vector<Tensor> read_safetensors(const std::string& path);

}  // namespace trainctl
