// Tests for a model's config.json (models/config_json.h), from its kind's one list of fields:
// export's file holds every field and torch_dtype, and init_from's check of a directory's
// config.json passes what export wrote, compares only the fields that stand for a [model] key,
// takes an absent or null field as the default its reader takes, compares numbers by value, and
// names the file, the first field that differs and both values.
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "bad_input.h"
#include "config_json.h"
#include "gpt2/gpt2_spec.h"
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

TEST_CASE("config.json: checked only where there is one; one that is no JSON object is refused") {
  const WeightsDirectory directory;
  CHECK_NOTHROW(trainctl::check_init_from_config(directory.path, small_gpt2()));  // none there
  directory.write("[1, 2]");
  CHECK_NOTHROW(trainctl::check_init_from_config(directory.path + "/model.safetensors", small_gpt2()));
  CHECK_THROWS_WITH_AS(trainctl::check_init_from_config(directory.path, small_gpt2()),
                       ("train.init_from: " + directory.config() + " is not a JSON object").c_str(), trainctl::BadInput);
}
