// The safetensors format (Hugging Face), which transformers' from_pretrained loads: an 8-byte
// little-endian header length, a JSON header mapping each tensor name to its dtype, shape and
// [begin, end) byte offsets into the data, padded with spaces to a multiple of 8 bytes, then the
// tensors' raw little-endian bytes, one after another.
#pragma once

#include <string>
#include <vector>

#include "checkpoint_file.h"

namespace trainctl {

// Writes `tensors` (float32, "F32") in their order, atomically (atomic_file.h), with
// "__metadata__": {"format": "pt"} as PyTorch's writer marks its files.
void write_safetensors(const std::string& path, const std::vector<Tensor>& tensors);

}  // namespace trainctl
