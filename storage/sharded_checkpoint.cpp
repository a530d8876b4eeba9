// Sharded checkpoints: see sharded_checkpoint.h for the layout and the guarantees.
#include "sharded_checkpoint.h"

#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "atomic_file.h"
#include "checkpoint_io.h"
#include "json.h"

namespace trainctl {

namespace fs = std::filesystem;

namespace {

constexpr const char* kManifestFormat = "trainctl sharded checkpoint";

Json manifest_json(const CheckpointMeta& meta, const FlatLayout& layout, const std::vector<ShardRecord>& shards) {
  Json manifest{{"format", kManifestFormat}, {"format_version", kCheckpointFormatVersion},
                {"step", meta.step},         {"epoch", meta.epoch},
                {"loss", meta.loss},         {"world_size", meta.world_size},
                {"hostnames", meta.hostnames}, {"hardware", meta.hardware},
                {"created_utc", meta.created_utc}, {"trainctl_version", meta.trainctl_version}};
  for (const auto& [name, value] : meta.metrics) manifest[name] = value;
  manifest["flat_count"] = layout.count;
  manifest["optimizer_states"] = layout.optimizer_states;
  Json tensors = Json::array();
  for (const FlatTensor& tensor : layout.tensors)
    tensors.push_back({{"name", tensor.name}, {"shape", tensor.shape}, {"offset", tensor.offset}});
  manifest["tensors"] = tensors;
  Json files = Json::array();
  for (const ShardRecord& shard : shards)
    files.push_back({{"file", shard_file_name(shard.rank, shard.ranks)},
                     {"rank", shard.rank},
                     {"begin", shard.begin},
                     {"end", shard.end},
                     {"file_bytes", shard.bytes},
                     {"file_crc32", shard.crc32}});
  manifest["shards"] = files;
  return manifest;
}

// The manifest's record, checked for the shape this reader relies on; json's own type errors
// would name no file.
struct Manifest {
  FlatLayout layout;
  std::vector<ShardRecord> shards;
};

Manifest read_manifest(const fs::path& step_dir) {
  const fs::path path = step_dir / kManifestName;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw CheckpointError(fmt::format("no {} (the save did not finish)", kManifestName));
  const Json record = Json::parse(in, nullptr, /*allow_exceptions=*/false);
  try {
    if (!record.is_object() || record.value("format", "") != kManifestFormat)
      throw CheckpointError(fmt::format("{} is not a trainctl sharded checkpoint's manifest", kManifestName));
    Manifest manifest;
    manifest.layout.count = record.at("flat_count").get<int64_t>();
    manifest.layout.optimizer_states = record.at("optimizer_states").get<std::vector<std::string>>();
    for (const Json& tensor : record.at("tensors"))
      manifest.layout.tensors.push_back({tensor.at("name").get<std::string>(),
                                         tensor.at("shape").get<std::vector<int64_t>>(),
                                         tensor.at("offset").get<int64_t>()});
    const Json& shards = record.at("shards");
    for (size_t r = 0; r < shards.size(); ++r) {
      const Json& shard = shards[r];
      manifest.shards.push_back({static_cast<int64_t>(r), static_cast<int64_t>(shards.size()),
                                 shard.at("begin").get<int64_t>(), shard.at("end").get<int64_t>(),
                                 shard.at("file_bytes").get<uint64_t>(), shard.at("file_crc32").get<uint64_t>()});
    }
    // The shards must tile the flat state in rank order.
    int64_t covered = 0;
    for (const ShardRecord& shard : manifest.shards) {
      if (shard.begin != covered || shard.end < shard.begin)
        throw CheckpointError(fmt::format("{}: the shards do not cover the state in order", kManifestName));
      covered = shard.end;
    }
    if (covered != manifest.layout.count || manifest.shards.empty())
      throw CheckpointError(fmt::format("{}: the shards cover {} of {} values", kManifestName, covered,
                                        manifest.layout.count));
    return manifest;
  } catch (const Json::exception& error) {
    throw CheckpointError(fmt::format("{} is malformed: {}", kManifestName, error.what()));
  }
}

void verify_shard_file(const fs::path& path, const ShardRecord& record) {
  const std::string name = path.filename().string();
  if (!fs::exists(path)) throw CheckpointError(fmt::format("{} is missing", name));
  const FileChecksum actual = checksum_of_file(path.string());
  if (actual.bytes != record.bytes)
    throw CheckpointError(fmt::format("{}: the file has {} bytes, the manifest records {}", name, actual.bytes,
                                      record.bytes));
  if (actual.crc32 != record.crc32)
    throw CheckpointError(fmt::format("{}: file checksum mismatch: crc32 {}, the manifest records {}", name,
                                      actual.crc32, record.crc32));
}

}  // namespace

std::string step_directory_name(int64_t step) { return fmt::format("step-{:08d}", step); }

std::string shard_file_name(int64_t rank, int64_t ranks) { return fmt::format("shard-{:05d}-of-{:05d}.h5", rank, ranks); }

ShardRecord write_shard(const std::string& step_dir, const Shard& shard, const std::function<void()>& midway) {
  const std::string final_path = (fs::path(step_dir) / shard_file_name(shard.rank, shard.ranks)).string();
  const std::string temporary = temporary_path_for(final_path);
  const std::vector<int64_t> shape{shard.end - shard.begin};
  try {
    // Every rank may be first: creating a directory that another rank just made is no error.
    std::error_code exists;
    fs::create_directories(step_dir, exists);
    if (!fs::is_directory(step_dir)) fs::create_directories(step_dir);
    {
      H5Handle file = create_file(temporary);
      write_meta(file.get(), shard.meta);
      write_attribute(file.get(), "shard_rank", shard.rank);
      write_attribute(file.get(), "shard_ranks", shard.ranks);
      write_attribute(file.get(), "shard_begin", shard.begin);
      write_attribute(file.get(), "shard_end", shard.end);
      write_tensor(file.get(), "model", {"model", shape, shard.model});
      if (midway) midway();
      H5Handle optimizer = create_group(file.get(), "optimizer");
      for (const auto& [state, values] : shard.optimizer_state) write_tensor(optimizer.get(), state, {state, shape, values});
      optimizer.close();
      // With every object closed, closing the file flushes HDF5's buffers: where a full disk shows.
      file.close();
    }
    const FileChecksum checksum = checksum_of_file(temporary);
    publish_file(temporary, final_path);
    return {shard.rank, shard.ranks, shard.begin, shard.end, checksum.bytes, checksum.crc32};
  } catch (const std::exception& error) {
    std::error_code ignored;
    fs::remove(temporary, ignored);
    throw CheckpointError(fmt::format("cannot write checkpoint {}: {}", final_path, failure_reason(error)));
  }
}

void write_manifest(const std::string& step_dir, const CheckpointMeta& meta, const FlatLayout& layout,
                    const std::vector<ShardRecord>& shards) {
  const std::string path = (fs::path(step_dir) / kManifestName).string();
  try {
    write_file_atomically(path, json_text(manifest_json(meta, layout, shards)) + "\n");
  } catch (const std::exception& error) {
    throw CheckpointError(fmt::format("cannot write checkpoint {}: {}", path, failure_reason(error)));
  }
}

Checkpoint load_sharded_checkpoint(const std::string& step_dir) {
  const Manifest manifest = read_manifest(step_dir);
  for (const ShardRecord& shard : manifest.shards)
    verify_shard_file(fs::path(step_dir) / shard_file_name(shard.rank, shard.ranks), shard);

  Checkpoint checkpoint;
  const auto count = static_cast<size_t>(manifest.layout.count);
  std::vector<float> model(count);
  std::vector<std::vector<float>> states(manifest.layout.optimizer_states.size(), std::vector<float>(count));
  for (const ShardRecord& shard : manifest.shards) {
    const std::string name = shard_file_name(shard.rank, shard.ranks);
    try {
      H5Handle file = open_file((fs::path(step_dir) / name).string());
      if (shard.rank == 0) checkpoint.meta = read_meta(file.get());
      // Ranges the manifest and the file both record: a file from another save would not match.
      int64_t begin = 0, end = 0;
      read_attribute(file.get(), "shard_begin", begin);
      read_attribute(file.get(), "shard_end", end);
      if (begin != shard.begin || end != shard.end)
        throw CheckpointError(fmt::format("holds [{}, {}), the manifest records [{}, {})", begin, end, shard.begin,
                                          shard.end));
      const auto place = [&](const Tensor& piece, std::vector<float>& flat) {
        if (static_cast<int64_t>(piece.values.size()) != end - begin)
          throw CheckpointError(fmt::format("{} has {} values for [{}, {})", piece.name, piece.values.size(), begin, end));
        std::copy(piece.values.begin(), piece.values.end(), flat.begin() + begin);
      };
      place(read_tensor(file.get(), "model", "model"), model);
      H5Handle optimizer = open_group(file.get(), "optimizer");
      for (size_t s = 0; s < states.size(); ++s) {
        const std::string& state = manifest.layout.optimizer_states[s];
        place(read_tensor(optimizer.get(), state, "optimizer/" + state), states[s]);
      }
    } catch (const CheckFailure& failure) {
      throw CheckpointError(fmt::format("{}: not a readable shard ({})", name, failure.what()));
    } catch (const CheckpointError& error) {
      throw CheckpointError(fmt::format("{}: {}", name, error.what()));
    }
  }

  const auto tensor_of = [](const FlatTensor& tensor, const std::vector<float>& flat, const std::string& name) {
    int64_t elements = 1;
    for (int64_t extent : tensor.shape) elements *= extent;
    if (tensor.offset < 0 || tensor.offset + elements > static_cast<int64_t>(flat.size()))
      throw CheckpointError(fmt::format("{}: tensor {} lies outside the state", kManifestName, tensor.name));
    return Tensor{name, tensor.shape,
                  std::vector<float>(flat.begin() + tensor.offset, flat.begin() + tensor.offset + elements)};
  };
  for (const FlatTensor& tensor : manifest.layout.tensors) checkpoint.model.push_back(tensor_of(tensor, model, tensor.name));
  // By parameter, then state: the order a checkpoint file's groups read in.
  for (const FlatTensor& tensor : manifest.layout.tensors)
    for (size_t s = 0; s < states.size(); ++s)
      checkpoint.optimizer_state.push_back(
          tensor_of(tensor, states[s], tensor.name + "/" + manifest.layout.optimizer_states[s]));
  return checkpoint;
}

}  // namespace trainctl
