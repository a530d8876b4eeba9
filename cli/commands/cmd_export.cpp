// trainctl export RUN_OR_CKPT -o DIR: a checkpoint's model as DIR/model.safetensors and
// DIR/config.json, once its tensors are found to be those of the model its stored config
// describes (models/named_tensors.h), which config.json then describes too, as the model's kind
// writes it: for a kind whose tensors carry a transformers class's state_dict names, Hugging
// Face's config, so that from_pretrained(DIR) loads it.
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "atomic_file.h"
#include "commands.h"
#include "config_json.h"
#include "named_tensors.h"
#include "registry.h"
#include "safetensors.h"
#include "runs/stored_checkpoint.h"

namespace trainctl {

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
    match_tensors(checkpoint.model, parameter_layout(stored.spec.model), TensorMatch::kCheckpoint,
                  fmt::format("checkpoint {}", stored.path));
    std::filesystem::create_directories(options->out);
    const std::string tensors_path = options->out + "/model.safetensors";
    const std::string config_path = options->out + "/config.json";
    write_safetensors(tensors_path, checkpoint.model);
    const nlohmann::json config = exported_config_json(stored.spec.model, "float32");
    write_file_atomically(config_path, config.dump(2) + "\n");
    fmt::print("exported {} (step {}, model {}): {} ({} tensors), {}\n", stored.path, checkpoint.meta.step,
               stored.spec.model.kind(), tensors_path, checkpoint.model.size(), config_path);
  });
}

}  // namespace trainctl
