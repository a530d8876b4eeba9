// The single-file checkpoint format: see checkpoint_file.h for the layout and the guarantees.
#include "checkpoint_file.h"

#include <filesystem>
#include <fstream>
#include <system_error>

#include <fmt/format.h>

#include "atomic_file.h"
#include "checkpoint_io.h"
#include "json.h"

namespace trainctl {

namespace fs = std::filesystem;

namespace {

std::string sidecar_json(const CheckpointMeta& meta, const FileChecksum& checksum) {
  Json sidecar{{"step", meta.step}, {"epoch", meta.epoch}, {"loss", meta.loss}};
  for (const auto& [name, value] : meta.metrics) sidecar[name] = value;
  sidecar["hostname"] = meta.hostnames.substr(0, meta.hostnames.find(','));
  sidecar["hostnames"] = meta.hostnames;
  sidecar["hardware"] = meta.hardware;
  sidecar["world_size"] = meta.world_size;
  sidecar["created_utc"] = meta.created_utc;
  sidecar["trainctl_version"] = meta.trainctl_version;
  sidecar["file_bytes"] = checksum.bytes;
  sidecar["file_crc32"] = checksum.crc32;
  return json_text(sidecar) + "\n";
}

// Compares the file with its sidecar's record before anything parses it: HDF5 is not robust
// against corrupt metadata (a flipped byte can overflow a buffer inside H5Aopen), so the only
// file it may open is exactly the one that was written.
void verify_file_checksum(const std::string& path) {
  const std::string sidecar = sidecar_path(path);
  const std::string sidecar_name = fs::path(sidecar).filename().string();
  std::ifstream in(sidecar, std::ios::binary);
  if (!in) throw CheckpointError(fmt::format("not verified: its sidecar {} is missing", sidecar_name));
  const Json record = Json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!record.is_object())
    throw CheckpointError(fmt::format("not verified: its sidecar {} is not a JSON object", sidecar_name));
  const auto bytes = record.find("file_bytes");
  const auto crc32 = record.find("file_crc32");
  if (bytes == record.end() && crc32 == record.end())
    throw CheckpointError(fmt::format("not verified: its sidecar {} records no file checksum", sidecar_name));
  if (bytes == record.end() || crc32 == record.end() || !bytes->is_number_unsigned() || !crc32->is_number_unsigned())
    throw CheckpointError(fmt::format("not verified: its sidecar {} records no valid file checksum", sidecar_name));
  const FileChecksum actual = checksum_of_file(path);
  if (actual.bytes != bytes->get<uint64_t>())
    throw CheckpointError(fmt::format("the file has {} bytes, its sidecar {} records {}", actual.bytes, sidecar_name,
                                      bytes->get<uint64_t>()));
  if (actual.crc32 != crc32->get<uint64_t>())
    throw CheckpointError(fmt::format("file checksum mismatch: crc32 {}, its sidecar {} records {}", actual.crc32,
                                      sidecar_name, crc32->get<uint64_t>()));
}

void write_checkpoint_file(const std::string& path, const Checkpoint& checkpoint, const std::function<void()>& midway) {
  H5Handle file = create_file(path);
  {
    write_meta(file.get(), checkpoint.meta);
    H5Handle model = create_group(file.get(), "model");
    for (const Tensor& tensor : checkpoint.model) write_tensor(model.get(), tensor.name, tensor);
    if (midway) midway();
    H5Handle optimizer = create_group(file.get(), "optimizer");
    for (const Tensor& tensor : checkpoint.optimizer_state) {
      const size_t slash = tensor.name.find('/');
      const std::string param = tensor.name.substr(0, slash);
      if (!has_link(optimizer.get(), param)) create_group(optimizer.get(), param);
      H5Handle group = open_group(optimizer.get(), param);
      write_tensor(group.get(), tensor.name.substr(slash + 1), tensor);
    }
  }
  // With every object closed, closing the file flushes HDF5's buffers: where a full disk shows.
  file.close();
}

}  // namespace

std::string checkpoint_file_name(int64_t step) { return fmt::format("step-{:08d}.h5", step); }

std::string sidecar_path(const std::string& checkpoint_path) {
  return fs::path(checkpoint_path).replace_extension(".json").string();
}

std::string save_checkpoint(const std::string& dir, const Checkpoint& checkpoint, const std::function<void()>& midway) {
  const std::string final_path = (fs::path(dir) / checkpoint_file_name(checkpoint.meta.step)).string();
  const std::string sidecar = sidecar_path(final_path);
  const std::string temporary = temporary_path_for(final_path);
  try {
    write_checkpoint_file(temporary, checkpoint, midway);
    // The sidecar first: a step-N.h5 that exists has its checksum on disk. A crash between the two
    // leaves a sidecar without its file, which the next save of that step or a prune replaces.
    write_file_atomically(sidecar, sidecar_json(checkpoint.meta, checksum_of_file(temporary)));
    publish_file(temporary, final_path);
  } catch (const std::exception& error) {
    // Nothing partial stays behind: not the temporary, nor a sidecar whose file never arrived.
    std::error_code ignored;
    fs::remove(temporary, ignored);
    if (!fs::exists(final_path, ignored)) fs::remove(sidecar, ignored);
    throw CheckpointError(fmt::format("cannot write checkpoint {}: {}", final_path, failure_reason(error)));
  }
  return final_path;
}

Checkpoint load_checkpoint_file(const std::string& path) {
  verify_file_checksum(path);
  Checkpoint checkpoint;
  H5Handle file = open_file(path);
  checkpoint.meta = read_meta(file.get());
  H5Handle model = open_group(file.get(), "model");
  for (const std::string& name : child_names(model.get()))
    checkpoint.model.push_back(read_tensor(model.get(), name, name));
  H5Handle optimizer = open_group(file.get(), "optimizer");
  for (const std::string& param : child_names(optimizer.get())) {
    H5Handle group = open_group(optimizer.get(), param);
    for (const std::string& state : child_names(group.get()))
      checkpoint.optimizer_state.push_back(read_tensor(group.get(), state, param + "/" + state));
  }
  return checkpoint;
}

}  // namespace trainctl
