// Checkpoints: see checkpoint_file.h for the layout and the guarantees.
#include "checkpoint_file.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <system_error>

#include <fmt/format.h>

#include "atomic_file.h"
#include "checkpoint_io.h"
#include "json.h"
#include "sharded_checkpoint.h"

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

std::string sidecar_path(const std::string& checkpoint_path) {
  return fs::path(checkpoint_path).replace_extension(".json").string();
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

// The step a step-N.h5 file's or a step-N directory's name carries; none for other names. At most
// 18 digits, so that it fits int64.
std::optional<int64_t> step_in_file_name(const std::string& file_name) {
  static const std::regex name_pattern(R"(step-(\d{1,18})(\.h5)?)");
  std::smatch match;
  if (!std::regex_match(file_name, match, name_pattern)) return std::nullopt;
  return std::stoll(match[1].str());
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

Checkpoint load_checkpoint(const std::string& path) {
  try {
    Checkpoint checkpoint;
    if (fs::is_directory(path)) {
      checkpoint = load_sharded_checkpoint(path);
    } else {
      verify_file_checksum(path);
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
    }
    const std::optional<int64_t> named_step = step_in_file_name(fs::path(path).filename().string());
    if (named_step && *named_step != checkpoint.meta.step)
      throw CheckpointError(
          fmt::format("its name says step {} but it stores step {}", *named_step, checkpoint.meta.step));
    return checkpoint;
  } catch (const CheckFailure& failure) {
    throw CheckpointError(fmt::format("{}: not a readable checkpoint ({})", path, failure.what()));
  } catch (const CheckpointError& error) {
    throw CheckpointError(fmt::format("{}: {}", path, error.what()));
  }
}

bool is_one_checkpoint(const std::string& path) {
  if (fs::is_regular_file(path)) return true;
  if (!fs::is_directory(path)) return false;
  if (fs::exists(fs::path(path) / kManifestName)) return true;
  for (const auto& file : fs::directory_iterator(path))
    if (file.path().filename().string().starts_with("shard-")) return true;
  return false;
}

uint64_t checkpoint_bytes(const std::string& path) {
  if (!fs::is_directory(path)) return fs::file_size(path);
  uint64_t bytes = 0;
  for (const auto& file : fs::directory_iterator(path))
    if (file.is_regular_file()) bytes += file.file_size();
  return bytes;
}

std::vector<CheckpointEntry> list_checkpoints(const std::string& dir) {
  std::vector<CheckpointEntry> entries;
  if (!fs::is_directory(dir)) return entries;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    // A step-N.h5 that is a directory, or a step-N that is a file, is neither shape.
    if (entry.is_directory() == name.ends_with(".h5")) continue;
    if (const std::optional<int64_t> step = step_in_file_name(name)) entries.push_back({entry.path().string(), *step});
  }
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.step > b.step; });
  return entries;
}

ResumePoint load_latest_valid(const std::string& dir) {
  ResumePoint resume;
  for (const CheckpointEntry& entry : list_checkpoints(dir)) {
    try {
      resume.checkpoint = load_checkpoint(entry.path);
      resume.path = entry.path;
      return resume;
    } catch (const CheckpointError& error) {
      resume.skipped.push_back(error.what());
    }
  }
  return resume;
}

void prune_checkpoints(const std::string& dir, int64_t keep_last) {
  // Temporaries left by a writer that crashed, sidecars whose file a crash kept from being
  // published, and step directories whose manifest it kept from being written; saves are
  // serialized and none is in flight when the saver prunes, so none is in use now.
  static const std::regex temporary_pattern(R"(\.step-\d+\.(h5|json)\.tmp-\d+)");
  static const std::regex sidecar_pattern(R"(step-\d+\.json)");
  for (const auto& file : fs::directory_iterator(dir)) {
    const std::string name = file.path().filename().string();
    if (std::regex_match(name, temporary_pattern) ||
        (std::regex_match(name, sidecar_pattern) && !fs::exists(fs::path(file.path()).replace_extension(".h5"))) ||
        (file.is_directory() && step_in_file_name(name) && !fs::exists(file.path() / kManifestName)))
      fs::remove_all(file.path());
  }
  std::vector<CheckpointEntry> entries = list_checkpoints(dir);
  for (size_t i = static_cast<size_t>(keep_last); i < entries.size(); ++i) {
    fs::remove_all(entries[i].path);
    fs::remove(sidecar_path(entries[i].path));
  }
}

}  // namespace trainctl
