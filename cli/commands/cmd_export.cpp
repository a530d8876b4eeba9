// trainctl export RUN_OR_CKPT -o DIR [--dtype fp32|bf16] [--max-shard-size SIZE]: a checkpoint's
// model as a Hugging Face model directory, once its tensors are found to be those of the model its
// stored config describes (models/named_tensors.h): config.json as the model's kind declares it
// (models/config_json.h), with torch_dtype, and the tensors in fp32 (as trained) or bf16, in
// model.safetensors or, above the shard size, in shards with their index, as save_pretrained
// writes them (storage/hugging_face_weights.h). DIR is written whole or not at all: a reader
// sees an earlier export there, or this one complete.
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <regex>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "atomic_file.h"
#include "commands.h"
#include "config_json.h"
#include "errors.h"
#include "hugging_face_weights.h"
#include "named_tensors.h"
#include "registry.h"
#include "runs/stored_checkpoint.h"

namespace trainctl {

namespace {

// The names export writes: a directory holding only these (or nothing) is replaced whole.
bool is_export_file(const std::string& name) {
  static const std::regex shard(R"(model-\d{5}-of-\d{5}\.safetensors)");
  return name == "config.json" || name == kSafetensorsName || name == kSafetensorsIndexName ||
         std::regex_match(name, shard);
}

void require_replaceable(const std::string& out) {
  std::error_code ignored;
  if (!std::filesystem::exists(out, ignored)) return;
  if (!std::filesystem::is_directory(out, ignored)) throw UsageError(fmt::format("{} exists and is no directory", out));
  for (const auto& entry : std::filesystem::directory_iterator(out)) {
    const std::string name = entry.path().filename().string();
    if (!is_export_file(name))
      throw UsageError(fmt::format("{} holds {}, which export does not write: export replaces the whole directory, so "
                                   "name a new one, or one an export wrote",
                                   out, name));
  }
}

}  // namespace

void add_export_command(CLI::App& app) {
  auto* command = app.add_subcommand(
      "export", "write a checkpoint's model as a Hugging Face model directory: safetensors and config.json");
  struct Options {
    std::string path, out, dtype = "fp32", max_shard_size = kDefaultMaxShardSize;
  };
  auto options = std::make_shared<Options>();
  command->add_option("path", options->path, "checkpoint file, or a run directory for its newest valid one")->type_name(path_kind::kPath)
      ->required();
  command->add_option("-o,--out", options->out, "directory to write, whole (replacing an earlier export there)")
      ->type_name(path_kind::kDirectory)
      ->required();
  command->add_option("--dtype", options->dtype, "the tensors' dtype: fp32 as trained, or bf16 (rounded to nearest)")
      ->check(CLI::IsMember({"fp32", "bf16"}))
      ->capture_default_str();
  command->add_option("--max-shard-size", options->max_shard_size,
                      "above this many bytes, shards with an index, as save_pretrained's max_shard_size (5GB, 500MB)")
      ->capture_default_str();
  command->callback([options] {
    uint64_t max_shard_size = 0;
    try {
      max_shard_size = parse_shard_size(options->max_shard_size);
    } catch (const std::invalid_argument& error) {
      throw UsageError(fmt::format("--max-shard-size: {}", error.what()));
    }
    const bool bf16 = options->dtype == "bf16";
    const StoredCheckpoint stored = load_stored_checkpoint(options->path);
    const Checkpoint& checkpoint = stored.checkpoint;
    match_tensors(checkpoint.model, parameter_layout(stored.spec.model), TensorMatch::kCheckpoint,
                  fmt::format("checkpoint {}", stored.path));
    require_replaceable(options->out);

    AtomicDirectoryWriter directory(options->out);
    std::vector<std::string> files =
        write_hugging_face_weights(directory.temporary(), checkpoint.model,
                                   bf16 ? SafetensorsDtype::kBf16 : SafetensorsDtype::kF32, max_shard_size);
    const nlohmann::json config = exported_config_json(stored.spec.model, bf16 ? "bfloat16" : "float32");
    write_file_atomically(directory.temporary() + "/config.json", config.dump(2) + "\n");
    files.push_back("config.json");
    // A test hook (docs/runtime.md): the export killed with everything written but not published.
    if (std::getenv("TRAINCTL_TEST_KILL_DURING_EXPORT") != nullptr) std::raise(SIGKILL);
    directory.publish();
    fmt::print("exported {} (step {}, model {}): {} tensors, {}, to {}: {}\n", stored.path, checkpoint.meta.step,
               stored.spec.model.kind(), checkpoint.model.size(), options->dtype, options->out, fmt::join(files, ", "));
  });
}

}  // namespace trainctl
