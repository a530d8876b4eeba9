// Writes the seed corpus of the checkpoint fuzzer: real checkpoints saved by save_checkpoint,
// with tensors of a few values so that each seed is a few KB, packed as checkpoint_input.h says.
// Usage (from a fuzzing build): tests/fuzz/make_checkpoint_seeds tests/fuzz/corpus/checkpoint
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>

#include "checkpoint_file.h"
#include "checkpoint_input.h"
#include "json.h"

namespace {

namespace fs = std::filesystem;
using trainctl::Checkpoint;
using trainctl::Tensor;

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_file(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

Tensor tensor(const std::string& name, std::vector<int64_t> shape, float first) {
  size_t count = 1;
  for (int64_t extent : shape) count *= static_cast<size_t>(extent);
  Tensor result{name, std::move(shape), std::vector<float>(count)};
  for (size_t i = 0; i < count; ++i) result.values[i] = first + 0.25f * static_cast<float>(i);
  return result;
}

Checkpoint checkpoint_of(const std::string& model_kind, const std::string& optimizer, std::vector<Tensor> model) {
  Checkpoint checkpoint;
  trainctl::CheckpointMeta& meta = checkpoint.meta;
  meta.model_kind = model_kind;
  meta.step = 10;
  meta.epoch = 1;
  meta.sample_position = 80;
  meta.rng_seed = 7;
  meta.global_batch = 8;
  meta.optimizer = optimizer;
  meta.optimizer_step = 10;
  meta.loss = 0.5;
  meta.config_text = fmt::format("[model]\nkind = \"{}\"\n", model_kind);
  meta.hostnames = "node1";
  meta.created_utc = "2024-01-01T00:00:00Z";
  const std::vector<std::string> states =
      optimizer == "adamw" ? std::vector<std::string>{"exp_avg", "exp_avg_sq"} : std::vector<std::string>{"momentum_buffer"};
  for (const Tensor& parameter : model)
    for (const std::string& state : states)
      checkpoint.optimizer_state.push_back(tensor(parameter.name + "/" + state, parameter.shape, 0.5f));
  checkpoint.model = std::move(model);
  return checkpoint;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
    return 2;
  }
  const fs::path corpus = argv[1];
  const fs::path scratch = fs::temp_directory_path() / fmt::format("trainctl-checkpoint-seeds-{}", getpid());
  fs::create_directories(corpus);
  fs::create_directories(scratch);
  // All at step 10, the name the fuzzer gives the file.
  const std::pair<const char*, Checkpoint> seeds[] = {
      {"no-tensors", checkpoint_of("mlp", "sgd", {})},
      {"gpt2-adamw", checkpoint_of("gpt2", "adamw", {tensor("transformer.wte.weight", {4, 2}, 0.0f),
                                                     tensor("transformer.ln_f.bias", {2}, 0.0f)})},
      {"mlp-sgd", checkpoint_of("mlp", "sgd", {tensor("0.weight", {2, 3}, 1.0f), tensor("0.bias", {2}, -1.0f)})},
  };
  for (const auto& [name, checkpoint] : seeds) {
    const fs::path file = trainctl::save_checkpoint(scratch.string(), checkpoint);
    write_file(corpus / name, trainctl::fuzz::join_checkpoint_input(read_file(fs::path(file).replace_extension(".json")),
                                                                    read_file(file)));
  }
  // The last file saved, beside a sidecar as format 1 and 2 saves wrote it: without the file's
  // size and checksum.
  const fs::path last = scratch / trainctl::checkpoint_file_name(10);
  trainctl::Json old_sidecar = trainctl::Json::parse(read_file(fs::path(last).replace_extension(".json")));
  old_sidecar.erase("file_bytes");
  old_sidecar.erase("file_crc32");
  write_file(corpus / "sidecar-without-checksum",
             trainctl::fuzz::join_checkpoint_input(trainctl::json_text(old_sidecar), read_file(last)));
  fs::remove_all(scratch);
  return 0;
}
