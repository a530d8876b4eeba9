// Tests for a model's config.json (models/config_json.h), from its kind's one list of fields:
// export's file holds every field and torch_dtype, and init_from's check of a directory's
// config.json passes what export wrote, compares only the fields that stand for a [model] key,
// takes an absent or null field as the default its reader takes, reads transformers 5's
// rope_parameters as transformers 4.x's fields, compares numbers by value, and names the file, the
// first field that differs and both values.
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "bad_input.h"
#include "config_json.h"
#include "gpt2/gpt2_spec.h"
#include "llama/llama_spec.h"
#include "mlp/mlp_spec.h"

namespace {

trainctl::ModelSpec small_gpt2() {
  trainctl::Gpt2Spec gpt2;
  gpt2.n_layer = 2;
  gpt2.n_head = 2;
  gpt2.n_embd = 32;
  gpt2.block_size = 16;
  gpt2.vocab_size = 50257;
  return gpt2;
}

// Llama 3.2 1B's shape shrunk: grouped-query heads, its rope scaling, tied.
trainctl::LlamaSpec small_llama() {
  trainctl::LlamaSpec llama;
  llama.n_layer = 2;
  llama.n_embd = 64;
  llama.n_head = 4;
  llama.n_kv_head = 2;
  llama.head_dim = 16;
  llama.intermediate_size = 128;
  llama.vocab_size = 256;
  llama.block_size = 32;
  llama.tie_embeddings = true;
  llama.rope_scaling = trainctl::Llama3RopeScaling{32.0, 1.0, 4.0, 8192};
  return llama;
}

struct WeightsDirectory {
  std::string path = (std::filesystem::temp_directory_path() / ("trainctl-test-config-json-" + std::to_string(getpid())))
                         .string();
  WeightsDirectory() { std::filesystem::create_directories(path); }
  ~WeightsDirectory() { std::filesystem::remove_all(path); }
  void write(const std::string& text) const { std::ofstream(path + "/config.json") << text; }
  std::string config() const { return path + "/config.json"; }
};

// What the check says of `config`: "" when it passes.
std::string checked(const WeightsDirectory& directory, const nlohmann::json& config, const trainctl::ModelSpec& spec) {
  directory.write(config.dump());
  try {
    trainctl::check_init_from_config(directory.path, spec);
  } catch (const trainctl::BadInput& error) {
    return error.what();
  }
  return "";
}

}  // namespace

TEST_CASE("config.json: export's fields, which the check passes") {
  const nlohmann::json exported = trainctl::exported_config_json(small_gpt2(), "bfloat16");
  CHECK(exported["architectures"] == nlohmann::json::array({"GPT2LMHeadModel"}));
  CHECK(exported["torch_dtype"] == "bfloat16");
  CHECK(exported["n_layer"] == 2);
  CHECK(exported["n_positions"] == 16);
  const WeightsDirectory directory;
  CHECK(checked(directory, exported, small_gpt2()) == "");
}

TEST_CASE("config.json: the first [model] field that differs, with both values and the file") {
  const WeightsDirectory directory;
  const std::string prefix = "train.init_from: " + directory.config() + ": ";
  nlohmann::json config = trainctl::exported_config_json(small_gpt2(), "float32");
  config["n_layer"] = 12;
  config["n_embd"] = 768;
  CHECK(checked(directory, config, small_gpt2()) == prefix + "n_layer is 12 but the config's model.n_layer is 2");

  // Fields without a [model] counterpart are not compared; numbers compare by value.
  config = trainctl::exported_config_json(small_gpt2(), "float32");
  config["n_ctx"] = 1024;
  config["activation_function"] = "gelu";
  config["eos_token_id"] = 0;
  config["torch_dtype"] = "float16";
  config["n_embd"] = 32.0;
  CHECK(checked(directory, config, small_gpt2()) == "");

  // Absent or null: GPT2Config's default, equal (vocab_size 50257) or not (n_positions 1024).
  config.erase("vocab_size");
  config["n_head"] = nullptr;
  CHECK(checked(directory, config, small_gpt2()) ==
        prefix + "n_head is null, which means 12, but the config's model.n_head is 2");
  config["n_head"] = 2;
  config.erase("n_positions");
  CHECK(checked(directory, config, small_gpt2()) ==
        prefix + "n_positions is absent, which means 1024, but the config's model.block_size is 16");
}

TEST_CASE("config.json: null is the absent field's value; a field without a default is required") {
  trainctl::MlpSpec mlp;
  mlp.inputs = 4;
  mlp.classes = 3;
  const WeightsDirectory directory;
  nlohmann::json config = trainctl::exported_config_json(mlp, "float32");
  config["hidden"] = nullptr;  // as an absent hidden, no hidden layer
  CHECK(checked(directory, config, mlp) == "");
  config.erase("classes");
  CHECK(checked(directory, config, mlp) ==
        "train.init_from: " + directory.config() + " has no classes, but the config's model.classes is 3");
}

TEST_CASE("config.json: Llama's, as the Hub's Llama 3.2 1B has it (sizes shrunk), and as older files omit fields") {
  trainctl::LlamaSpec llama = small_llama();
  const WeightsDirectory directory;
  const std::string prefix = "train.init_from: " + directory.config() + ": ";
  // The fields as Llama-3.2-1B's config.json spells them: integers where [model] has floats, more
  // max_position_embeddings than the context trained at, token ids, a transformers version.
  nlohmann::json hub = nlohmann::json::parse(R"({
    "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
    "bos_token_id": 128000, "eos_token_id": 128001, "head_dim": 16, "hidden_act": "silu",
    "hidden_size": 64, "initializer_range": 0.02, "intermediate_size": 128,
    "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama",
    "num_attention_heads": 4, "num_hidden_layers": 2, "num_key_value_heads": 2, "pretraining_tp": 1,
    "rms_norm_eps": 1e-05, "rope_scaling": {"factor": 32, "high_freq_factor": 4, "low_freq_factor": 1,
    "original_max_position_embeddings": 8192, "rope_type": "llama3"}, "rope_theta": 500000,
    "tie_word_embeddings": true, "torch_dtype": "bfloat16", "transformers_version": "4.45.0.dev0",
    "use_cache": true, "vocab_size": 256})");
  CHECK(checked(directory, hub, llama) == "");
  // head_dim and num_key_value_heads absent: LlamaConfig derives them, here as [model] has them.
  nlohmann::json older = hub;
  older.erase("head_dim");
  CHECK(checked(directory, older, llama) == "");
  older.erase("num_key_value_heads");
  CHECK(checked(directory, older, llama) ==
        prefix + "num_key_value_heads is absent, which means 4, but the config's model.n_kv_head is 2");
  // rope_scaling: one that differs, then none in the file, then none in [model] either, null or absent.
  nlohmann::json scaled = hub;
  scaled["rope_scaling"]["factor"] = 8.0;
  CHECK(checked(directory, scaled, llama) ==
        prefix + "rope_scaling is {\"factor\":8.0,\"high_freq_factor\":4,\"low_freq_factor\":1,"
                 "\"original_max_position_embeddings\":8192,\"rope_type\":\"llama3\"} but the config's "
                 "model.rope_scaling is {\"factor\":32.0,\"high_freq_factor\":4.0,\"low_freq_factor\":1.0,"
                 "\"original_max_position_embeddings\":8192,\"rope_type\":\"llama3\"}");
  scaled["rope_scaling"] = nullptr;
  CHECK(checked(directory, scaled, llama).starts_with(prefix + "rope_scaling is null, which means null, but"));
  llama.rope_scaling.reset();
  CHECK(checked(directory, scaled, llama) == "");
  scaled.erase("rope_scaling");
  CHECK(checked(directory, scaled, llama) == "");
  // rope_theta absent means LlamaConfig's 10000, not trainctl's 500000.
  scaled.erase("rope_theta");
  CHECK(checked(directory, scaled, llama) ==
        prefix + "rope_theta is absent, which means 10000.0, but the config's model.rope_theta is 500000.0");
}

TEST_CASE("config.json: transformers 5's rope_parameters, read as rope_theta and rope_scaling") {
  trainctl::LlamaSpec llama = small_llama();
  const WeightsDirectory directory;
  const std::string prefix = "train.init_from: " + directory.config() + ": ";
  // As transformers 5 saves Llama 3.2 1B (sizes shrunk): no rope_theta, no rope_scaling.
  nlohmann::json five = trainctl::exported_config_json(llama, "bfloat16");
  five.erase("rope_theta");
  five.erase("rope_scaling");
  five["rope_parameters"] = {{"rope_type", "llama3"}, {"rope_theta", 500000.0}, {"factor", 32.0},
                             {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
                             {"original_max_position_embeddings", 8192}};
  CHECK(checked(directory, five, llama) == "");
  nlohmann::json differs = five;
  differs["rope_parameters"]["rope_theta"] = 10000.0;
  CHECK(checked(directory, differs, llama) ==
        prefix + "rope_parameters.rope_theta is 10000.0 but the config's model.rope_theta is 500000.0");
  differs = five;
  differs["rope_parameters"]["factor"] = 8.0;
  CHECK(checked(directory, differs, llama).starts_with(prefix + "rope_parameters (its scaling) is {\"factor\":8.0,"));
  // A rope_scaling beside it stands over all of it, as transformers 5 reads a file: its rope_theta too.
  differs["rope_scaling"] = trainctl::exported_config_json(llama, "bfloat16")["rope_scaling"];
  CHECK(checked(directory, differs, llama) ==
        prefix + "rope_theta is absent, which means 10000.0, but the config's model.rope_theta is 500000.0");
  differs["rope_theta"] = 500000;
  CHECK(checked(directory, differs, llama) == "");
  // The default type (spelled "type", as older files do) is no scaling; its rope_theta over one beside it.
  llama.rope_scaling.reset();
  llama.rope_theta = 10000.0;
  nlohmann::json unscaled = five;
  unscaled["rope_theta"] = 500000.0;
  unscaled["rope_parameters"] = {{"type", "default"}, {"rope_theta", 10000}};
  CHECK(checked(directory, unscaled, llama) == "");
  unscaled["rope_parameters"].erase("rope_theta");
  CHECK(checked(directory, unscaled, llama) ==
        prefix + "rope_theta is 500000.0 but the config's model.rope_theta is 10000.0");
}

TEST_CASE("config.json: checked only where there is one; one that is no JSON object is refused") {
  const WeightsDirectory directory;
  CHECK_NOTHROW(trainctl::check_init_from_config(directory.path, small_gpt2()));  // none there
  directory.write("[1, 2]");
  CHECK_NOTHROW(trainctl::check_init_from_config(directory.path + "/model.safetensors", small_gpt2()));
  CHECK_THROWS_WITH_AS(trainctl::check_init_from_config(directory.path, small_gpt2()),
                       ("train.init_from: " + directory.config() + " is not a JSON object").c_str(), trainctl::BadInput);
}
