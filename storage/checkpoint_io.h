// What both HDF5 shapes of a checkpoint, one file (checkpoint_file.h) and a step directory of
// shards (sharded_checkpoint.h), are written and read with: the whole-file checksum, tensors with a
// CRC-32 attribute each, the training position as attributes on "/", and the reason a save
// failed. Internal to storage/.
#pragma once

#include <cstdint>
#include <string>

#include "checkpoint.h"
#include "hdf5_file.h"

namespace trainctl {

// A file's size and CRC-32, as a sidecar or a manifest records them.
struct FileChecksum {
  uint64_t bytes = 0;
  uint64_t crc32 = 0;
};
// Throws CheckpointError.
FileChecksum checksum_of_file(const std::string& path);

// `name`: the dataset's name in `group`; the dataset carries the values' CRC-32.
void write_tensor(hid_t group, const std::string& name, const Tensor& tensor);
// Throws CheckpointError where the values do not match their CRC-32.
Tensor read_tensor(hid_t group, const std::string& name, const std::string& shown_name);

// The attributes on "/", in one list so that writing and reading cannot drift apart.
template <typename Meta, typename Visit>
void for_each_meta_attribute(Meta& meta, Visit visit) {
  visit("step", meta.step);
  visit("epoch", meta.epoch);
  visit("sample_position", meta.sample_position);
  visit("rng_seed", meta.rng_seed);
  visit("world_size", meta.world_size);
  visit("global_batch", meta.global_batch);
  visit("optimizer", meta.optimizer);
  visit("optimizer_step", meta.optimizer_step);
  visit("loss", meta.loss);
  visit("best_val_loss", meta.best_val_loss);
  visit("best_step", meta.best_step);
  visit("evals_since_best", meta.evals_since_best);
  visit("config", meta.config_text);
  visit("hostnames", meta.hostnames);
  visit("trainctl_version", meta.trainctl_version);
  visit("created_utc", meta.created_utc);
}

// The attributes that version 5 added.
template <typename Meta, typename Visit>
void for_each_tokenizer_attribute(Meta& meta, Visit visit) {
  visit("tokenizer_path", meta.tokenizer_path);
  visit("tokenizer_hash", meta.tokenizer_hash);
}

void write_meta(hid_t file, const CheckpointMeta& meta);
// Throws CheckpointError for a format version this build does not read.
CheckpointMeta read_meta(hid_t file);

// Why a save failed, in the OS's words where the OS refused ("No space left on device").
std::string failure_reason(const std::exception& error);

}  // namespace trainctl
