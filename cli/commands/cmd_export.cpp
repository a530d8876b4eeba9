// trainctl export RUN_OR_CKPT -o DIR: a checkpoint's model as DIR/model.safetensors and
// DIR/config.json, once its tensors are found to be those of the model its stored config
// describes (models/named_tensors.h), which config.json then describes too. For gpt2 the tensors
// carry GPT2LMHeadModel's state_dict names (the tied lm_head.weight is not stored), so
// transformers' GPT2LMHeadModel.from_pretrained(DIR) loads it.
#include <filesystem>
#include <variant>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "activation.h"
#include "atomic_file.h"
#include "commands.h"
#include "named_tensors.h"
#include "registry.h"
#include "safetensors.h"
#include "runs/stored_checkpoint.h"
#include "train_spec.h"

namespace trainctl {

namespace {

nlohmann::json model_config(const Gpt2Spec& gpt2) {
  // GPT-2 has no separate BOS/EOS: its one special token, <|endoftext|>, is the last id.
  const int64_t end_of_text = gpt2.vocab_size - 1;
  return {
      {"architectures", nlohmann::json::array({"GPT2LMHeadModel"})},
      {"model_type", "gpt2"},
      {"n_layer", gpt2.n_layer},
      {"n_head", gpt2.n_head},
      {"n_embd", gpt2.n_embd},
      {"n_positions", gpt2.block_size},
      {"n_ctx", gpt2.block_size},
      {"vocab_size", gpt2.vocab_size},
      {"activation_function", "gelu_new"},
      {"layer_norm_epsilon", 1e-5},
      {"resid_pdrop", 0.0},
      {"embd_pdrop", 0.0},
      {"attn_pdrop", 0.0},
      {"tie_word_embeddings", true},
      {"bos_token_id", end_of_text},
      {"eos_token_id", end_of_text},
  };
}

nlohmann::json model_config(const MlpSpec& mlp) {
  return {{"model_type", "trainctl-mlp"},
          {"inputs", mlp.inputs},
          {"hidden", mlp.hidden},
          {"classes", mlp.classes},
          {"activation", activation_name(mlp.activation)}};
}

}  // namespace

void add_export_command(CLI::App& app) {
  auto* command = app.add_subcommand("export", "write a checkpoint's model as model.safetensors and config.json");
  struct Options {
    std::string path, out;
  };
  auto options = std::make_shared<Options>();
  command->add_option("path", options->path, "checkpoint file, or a run directory for its newest valid one")->type_name(path_kind::kPath)
      ->required();
  command->add_option("-o,--out", options->out, "directory to write model.safetensors and config.json to")->type_name(path_kind::kDirectory)
      ->required();
  command->callback([options] {
    const StoredCheckpoint stored = load_stored_checkpoint(options->path);
    const Checkpoint& checkpoint = stored.checkpoint;
    match_tensors(checkpoint.model, parameter_layout(stored.model), TensorMatch::kCheckpoint,
                  fmt::format("checkpoint {}", stored.path));
    std::filesystem::create_directories(options->out);
    const std::string tensors_path = options->out + "/model.safetensors";
    const std::string config_path = options->out + "/config.json";
    write_safetensors(tensors_path, checkpoint.model);
    const nlohmann::json config = std::visit([](const auto& spec) { return model_config(spec); }, stored.model.config);
    write_file_atomically(config_path, config.dump(2) + "\n");
    fmt::print("exported {} (step {}, model {}): {} ({} tensors), {}\n", stored.path, checkpoint.meta.step,
               stored.model.kind(), tensors_path, checkpoint.model.size(), config_path);
  });
}

}  // namespace trainctl
