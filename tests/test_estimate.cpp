// Tests for what `trainctl estimate` computes without building anything: the models' footprints
// (models/registry.h) against what a built MLP, GPT-2 and Llama allocate through the device seam,
// counted by a CPU device whose alloc and release keep a tally (fp32 and bf16, with and without
// recompute), and against the built models' parameter counts, largest tensors and FLOPs; the
// data footprints against the sources that read the files; and the SLURM memory and time syntax
// the estimate reads and suggests (slurm/job_spec.h).
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "classification_file.h"
#include "device.h"
#include "gpt2/gpt2.h"
#include "llama/llama.h"
#include "job_spec.h"
#include "mlp/mlp.h"
#include "registry.h"
#include "token_file.h"
#include "token_source.h"

using trainctl::ModelFootprint;
using trainctl::ModelOptions;
using trainctl::ModelSpec;
using trainctl::Precision;

namespace {

namespace fs = std::filesystem;

// The bytes allocated through counting_cpu() and not yet released.
struct Tally {
  std::map<void*, size_t> sizes;
  int64_t current = 0;
};

Tally& tally() {
  static Tally instance;
  return instance;
}

void* counting_alloc(size_t bytes) {
  void* pointer = trainctl::cpu_device().memory.alloc(bytes);
  tally().sizes[pointer] = bytes;
  tally().current += static_cast<int64_t>(bytes);
  return pointer;
}

void counting_release(void* pointer) {
  tally().current -= static_cast<int64_t>(tally().sizes.at(pointer));
  tally().sizes.erase(pointer);
  trainctl::cpu_device().memory.release(pointer);
}

// The CPU device, its allocations counted.
const trainctl::Device& counting_cpu() {
  static const trainctl::Device device = [] {
    trainctl::Device counting = trainctl::cpu_device();
    counting.memory.alloc = counting_alloc;
    counting.memory.release = counting_release;
    return counting;
  }();
  return device;
}

// Builds the model of `spec` on counting_cpu() and checks the footprint against it: parameters
// and gradients, then every other buffer, byte for byte.
void check_footprint(const ModelSpec& spec, const ModelOptions& options) {
  const ModelFootprint footprint = trainctl::model_kind(spec).footprint(spec, options);
  const int64_t before = tally().current;
  const std::unique_ptr<trainctl::Model> model = trainctl::build_model(spec, counting_cpu(), options);
  const int64_t allocated = tally().current - before;

  CHECK(footprint.parameters == model->parameter_count());
  const auto& layout = model->parameter_layout();
  CHECK(footprint.largest_tensor ==
        std::max_element(layout.begin(), layout.end(), [](const auto& a, const auto& b) { return a.count < b.count; })
            ->count);
  const int64_t parameters_and_gradients = 2 * model->parameter_count() * static_cast<int64_t>(sizeof(float));
  CHECK(footprint.compute_copy_bytes == (options.precision == Precision::kBf16 ? 2 * model->parameter_count() : 0));
  CHECK(footprint.activation_bytes + footprint.compute_copy_bytes == allocated - parameters_and_gradients);
  CHECK(footprint.terms_per_example == model->loss_terms_per_example());
  CHECK(std::string(footprint.term_unit) == model->term_unit());
  CHECK(footprint.training_flops_per_term == model->training_flops_per_term());
}

ModelSpec mlp_spec() {
  trainctl::MlpSpec mlp;
  mlp.inputs = 5;
  mlp.hidden = {9, 6};
  mlp.classes = 3;
  return {mlp};
}

ModelSpec gpt2_spec() {
  trainctl::Gpt2Spec gpt2;
  gpt2.n_layer = 3;
  gpt2.n_head = 2;
  gpt2.n_embd = 8;
  gpt2.block_size = 5;
  gpt2.vocab_size = 11;
  return {gpt2};
}

// Grouped-query attention, head_dim 4 (n_head * head_dim = 12, not n_embd 8), untied or tied.
ModelSpec llama_spec(bool tied) {
  trainctl::LlamaSpec llama;
  llama.n_layer = 3;
  llama.n_head = 3;
  llama.n_kv_head = 1;
  llama.head_dim = 4;
  llama.n_embd = 8;
  llama.intermediate_size = 20;
  llama.block_size = 5;
  llama.vocab_size = 11;
  llama.tie_embeddings = tied;
  return {llama};
}

ModelOptions options_for(int64_t examples, Precision precision, bool recompute) {
  ModelOptions options;
  options.max_examples = examples;
  options.precision = precision;
  options.recompute = recompute;
  return options;
}

class TemporaryDirectory {
 public:
  TemporaryDirectory() {
    std::string pattern = (fs::temp_directory_path() / "trainctl-estimate-XXXXXX").string();
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    path_ = pattern;
  }
  ~TemporaryDirectory() { fs::remove_all(path_); }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

}  // namespace

TEST_CASE("the MLP's footprint is what a built MLP allocates, for fp32 and bf16") {
  for (const Precision precision : {Precision::kFp32, Precision::kBf16}) {
    CAPTURE(static_cast<int>(precision));
    check_footprint(mlp_spec(), options_for(7, precision, false));
  }
  // 5 -> 9 -> 6 -> 3: three weights and biases.
  const ModelFootprint footprint = trainctl::mlp_footprint(mlp_spec(), options_for(7, Precision::kFp32, false));
  CHECK(footprint.parameters == 5 * 9 + 9 + 9 * 6 + 6 + 6 * 3 + 3);
  CHECK(footprint.largest_tensor == 9 * 6);
  CHECK(footprint.host_batch_bytes == 7 * (5 * 4 + 4));
  CHECK(footprint.cpu_scratch_bytes == 0);
  // bf16 widens the widest activation [7, 9] (A) and the largest of a weight [6, 9] and a layer
  // input [7, 9] (B), and forms the widest activation (C) in float.
  CHECK(trainctl::mlp_footprint(mlp_spec(), options_for(7, Precision::kBf16, false)).cpu_scratch_bytes ==
        (7 * 9 + 7 * 9 + 7 * 9) * 4);
}

TEST_CASE("GPT-2's footprint is what a built GPT-2 allocates, with and without recompute, which needs less") {
  for (const bool recompute : {false, true})
    for (const Precision precision : {Precision::kFp32, Precision::kBf16}) {
      CAPTURE(recompute);
      CAPTURE(static_cast<int>(precision));
      check_footprint(gpt2_spec(), options_for(2, precision, recompute));
    }
  const ModelFootprint stored = trainctl::gpt2_footprint(gpt2_spec(), options_for(2, Precision::kFp32, false));
  const ModelFootprint recomputed = trainctl::gpt2_footprint(gpt2_spec(), options_for(2, Precision::kFp32, true));
  CHECK(recomputed.activation_bytes < stored.activation_bytes);
  CHECK(stored.host_batch_bytes == 2 * 2 * 5 * 4);  // tokens and targets, int32 [2, 5]
  CHECK(stored.cpu_scratch_bytes == 3 * 5 * 5 * 4);  // the attention's three 5 x 5 matrices
  CHECK(stored.largest_tensor == 4 * 8 * 8);         // c_fc's weight, beside wte's 11 x 8
  // bf16 adds the widest A, the logits' gradient [10, 128] (the vocabulary of 11 padded to 128
  // rows), the widest B, wte in memory [128, 8], and the widest C, the logits [10, 128], in float.
  CHECK(trainctl::gpt2_footprint(gpt2_spec(), options_for(2, Precision::kBf16, false)).cpu_scratch_bytes ==
        (3 * 5 * 5 + 10 * 128 + 128 * 8 + 10 * 128) * 4);
}

TEST_CASE("Llama's footprint is what a built Llama allocates, tied or not, with and without recompute") {
  for (const bool tied : {false, true})
    for (const bool recompute : {false, true})
      for (const Precision precision : {Precision::kFp32, Precision::kBf16}) {
        CAPTURE(tied);
        CAPTURE(recompute);
        CAPTURE(static_cast<int>(precision));
        check_footprint(llama_spec(tied), options_for(2, precision, recompute));
      }
  const ModelFootprint stored = trainctl::llama_footprint(llama_spec(false), options_for(2, Precision::kFp32, false));
  CHECK(trainctl::llama_footprint(llama_spec(false), options_for(2, Precision::kFp32, true)).activation_bytes <
        stored.activation_bytes);
  CHECK(stored.host_batch_bytes == 2 * 2 * 5 * 4);  // tokens and targets, int32 [2, 5]
  CHECK(stored.largest_tensor == 20 * 8);           // gate_proj's, up_proj's and down_proj's, beside 11 x 8
  // bf16 adds two of the widest outputs (A and C), gate_up [10, 40], and the widest B, gate_up's
  // weights [40, 8] (beside the activations [10, 20]), in float.
  CHECK(trainctl::llama_footprint(llama_spec(false), options_for(2, Precision::kBf16, false)).cpu_scratch_bytes ==
        (3 * 5 * 5 + 2 * 10 * 40 + 40 * 8) * 4);
}

TEST_CASE("the data footprints are what the sources hold, read from the files' headers") {
  const TemporaryDirectory directory;
  trainctl::ClassificationData data;
  data.samples = 10;
  data.features = 5;
  data.x.assign(50, 0.5f);
  data.y.assign(10, 1);
  trainctl::write_classification_file(directory / "train.h5", data);
  const trainctl::DataFootprint classification =
      trainctl::model_kind(mlp_spec()).data_footprint(directory / "train.h5", mlp_spec());
  const trainctl::ClassificationSource source(directory / "train.h5");
  CHECK(classification.examples == source.examples());
  CHECK(classification.bytes ==
        static_cast<int64_t>(source.data().x.size() * sizeof(float) + source.data().y.size() * sizeof(int32_t)));

  const std::vector<uint16_t> tokens(23, 3);
  trainctl::write_token_file(directory / "shard-0.bin", tokens);
  trainctl::write_token_file(directory / "shard-1.bin", std::vector<uint16_t>(tokens.begin(), tokens.begin() + 12));
  const std::string shards = directory / "shard-*.bin";
  const trainctl::DataFootprint token = trainctl::model_kind(gpt2_spec()).data_footprint(shards, gpt2_spec());
  CHECK(token.examples == trainctl::TokenSource(shards, 5, 11).examples());  // 4 + 2 windows
  CHECK(token.bytes == (23 + 12) * 2);
  CHECK(token.mapped);  // the shards' pages, once per node
  CHECK_FALSE(classification.mapped);
  CHECK_THROWS_AS(trainctl::model_kind(gpt2_spec()).data_footprint(directory / "none.bin", gpt2_spec()),
                  trainctl::DataError);
}

TEST_CASE("job.mem is read in SLURM's units, and time limits are written as SLURM writes them") {
  CHECK(trainctl::memory_bytes("4000") == 4000LL << 20);
  CHECK(trainctl::memory_bytes("512K") == 512LL << 10);
  CHECK(trainctl::memory_bytes("4000M") == 4000LL << 20);
  CHECK(trainctl::memory_bytes("16G") == 16LL << 30);
  CHECK(trainctl::memory_bytes("2T") == 2LL << 40);
  CHECK(trainctl::memory_bytes("99999999999999999999") == INT64_MAX);
  CHECK(trainctl::memory_bytes("9999999999T") == INT64_MAX);

  CHECK(trainctl::slurm_time(59) == "0:00:59");
  CHECK(trainctl::slurm_time(3600 + 2 * 60) == "1:02:00");
  CHECK(trainctl::slurm_time(86400 + 3 * 3600 + 4 * 60 + 5) == "1-03:04:05");
}
