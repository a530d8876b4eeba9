// The pieces both checkpoint shapes (one file, a step directory of shards) are written and read
// with: see checkpoint_io.h.
#include "checkpoint_io.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <system_error>

#include <fmt/format.h>

namespace trainctl {

FileChecksum checksum_of_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw CheckpointError(fmt::format("cannot open {}: {}", path, std::strerror(errno)));
  std::vector<char> buffer(1 << 20);
  FileChecksum checksum{0, crc32_z(0L, Z_NULL, 0)};
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    const auto count = static_cast<size_t>(in.gcount());
    checksum.crc32 = crc32_z(checksum.crc32, reinterpret_cast<const Bytef*>(buffer.data()), count);
    checksum.bytes += count;
  }
  if (in.bad()) throw CheckpointError(fmt::format("cannot read {}: {}", path, std::strerror(errno)));
  return checksum;
}

namespace {
uint64_t crc32_of(const std::vector<float>& values) {
  return crc32_z(0L, reinterpret_cast<const Bytef*>(values.data()), values.size() * sizeof(float));
}

}  // namespace

void write_tensor(hid_t group, const std::string& name, const Tensor& tensor) {
  write_floats(group, name, tensor.shape, tensor.values.data());
  H5Handle dataset(H5_CHECK(H5Dopen2(group, name.c_str(), H5P_DEFAULT)), H5Dclose);
  write_attribute(dataset.get(), "crc32", crc32_of(tensor.values));
}

Tensor read_tensor(hid_t group, const std::string& name, const std::string& shown_name) {
  Tensor tensor{shown_name, dataset_shape(group, name), read_floats(group, name)};
  H5Handle dataset(H5_CHECK(H5Dopen2(group, name.c_str(), H5P_DEFAULT)), H5Dclose);
  uint64_t stored_crc = 0;
  read_attribute(dataset.get(), "crc32", stored_crc);
  if (crc32_of(tensor.values) != stored_crc)
    throw CheckpointError(fmt::format("checksum mismatch in dataset {}", shown_name));
  return tensor;
}

void write_meta(hid_t file, const CheckpointMeta& meta) {
  write_attribute(file, "format_version", kCheckpointFormatVersion);
  write_attribute(file, "model_kind", meta.model_kind);
  const auto write = [&](const char* name, const auto& value) { write_attribute(file, name, value); };
  for_each_meta_attribute(meta, write);
  for_each_tokenizer_attribute(meta, write);
}

CheckpointMeta read_meta(hid_t file) {
  CheckpointMeta meta;
  read_attribute(file, "format_version", meta.format_version);
  if (meta.format_version < kOldestCheckpointFormatRead || meta.format_version > kCheckpointFormatVersion)
    throw CheckpointError(fmt::format("format_version {} is not supported (this trainctl reads {} to {})",
                                      meta.format_version, kOldestCheckpointFormatRead, kCheckpointFormatVersion));
  read_attribute(file, "model_kind", meta.model_kind);
  const auto read = [&](const char* name, auto& value) { read_attribute(file, name, value); };
  for_each_meta_attribute(meta, read);
  if (meta.format_version >= 5) for_each_tokenizer_attribute(meta, read);
  return meta;
}

std::string failure_reason(const std::exception& error) {
  if (const auto* hdf5 = dynamic_cast<const Hdf5Failure*>(&error); hdf5 != nullptr && hdf5->os_error() != 0)
    return std::strerror(hdf5->os_error());
  if (const auto* system = dynamic_cast<const std::system_error*>(&error)) return system->code().message();
  return error.what();
}

}  // namespace trainctl
