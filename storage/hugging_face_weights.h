// A Hugging Face model directory's weights, as transformers' save_pretrained writes them and
// from_pretrained reads them: one model.safetensors, or, above the maximum shard size, shards
// model-0000N-of-0000M.safetensors with model.safetensors.index.json naming the shard of each
// tensor ({"metadata": {"total_parameters": P, "total_size": BYTES}, "weight_map": {NAME: FILE}}).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint.h"
#include "safetensors.h"

namespace trainctl {

constexpr char kSafetensorsIndexName[] = "model.safetensors.index.json";
constexpr char kSafetensorsName[] = "model.safetensors";
// save_pretrained's default max_shard_size.
constexpr char kDefaultMaxShardSize[] = "5GB";

// A size as save_pretrained's max_shard_size takes it (huggingface_hub's parse_size_to_int): a
// number, fractions allowed, and a unit KB, MB, GB or TB in any case, in powers of 10
// ("5GB" = 5,000,000,000 bytes); or a whole number of bytes. Throws std::invalid_argument saying
// what is wrong.
uint64_t parse_shard_size(const std::string& text);

// The tensors of each file, by their index in the list: huggingface_hub's
// split_state_dict_into_shards. Shards fill in order up to `max_shard_size` bytes; a tensor
// larger than that alone gets a shard of its own, put before the shard being filled.
std::vector<std::vector<size_t>> plan_shards(const std::vector<uint64_t>& tensor_bytes, uint64_t max_shard_size);

// "model.safetensors" for one file, else "model-00002-of-00003.safetensors" for the second.
std::string shard_file_name(size_t shard, size_t shards);

// Writes `tensors` into `directory` (which exists) as `dtype`, sharded by plan_shards, with the
// index when there is more than one file, each file atomically. Returns the files' names.
std::vector<std::string> write_hugging_face_weights(const std::string& directory, const std::vector<Tensor>& tensors,
                                                    SafetensorsDtype dtype, uint64_t max_shard_size);

// The weight files of `directory`, opened by their headers: model.safetensors where there is one
// (from_pretrained's choice too), else every file the index names, each holding exactly the
// tensors the index places in it. Throws SafetensorsError naming the file and the tensor: a
// shard that is missing, a tensor the index places in a file that lacks it, one a file holds but
// the index does not place there; or a file that is no safetensors file.
std::vector<SafetensorsFile> open_hugging_face_weights(const std::string& directory);

}  // namespace trainctl
