// Tests for config validation as `trainctl validate` sees it: load_config (cli/config_file.cpp)
// over the training tables of common/train_spec.cpp, the model kinds' [model] schemas
// (models/<kind>/<kind>_spec.cpp) and the reader of common/config_reader.cpp.
// Checks that the demo config validates, the defaults of a minimal config, the exact
// "FILE:LINE:COL: key: message" text of every kind of bad input in [model], [data], [train],
// [checkpoint] and at the top level, [notify] read with the rest, nearest_key's typo suggestions,
// and resolve_data_paths.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "config_file.h"
#include "config_files.h"
#include "bad_input.h"
#include "config_reader.h"
#include "gpt2/gpt2_spec.h"
#include "llama/llama_spec.h"
#include "mlp/mlp_spec.h"
#include "registry.h"
#include "train_spec.h"

using trainctl::ConfigError;
using trainctl::nearest_key;

using namespace config_files;

namespace {

namespace fs = std::filesystem;

// `text` with the line `from` (which must occur exactly once, as a whole line) replaced by `to`;
// an empty `to` deletes the line.
std::string replace_line(std::string_view text, std::string_view from, std::string_view to) {
  std::string needle("\n");
  needle.append(from).append("\n");
  std::string lines("\n");
  lines.append(text);
  const size_t at = lines.find(needle);
  REQUIRE_MESSAGE(at != std::string::npos, "line not found: " << from);
  REQUIRE_MESSAGE(lines.find(needle, at + 1) == std::string::npos, "line occurs twice: " << from);
  std::string replacement("\n");
  if (!to.empty()) replacement.append(to).append("\n");
  lines.replace(at, needle.size(), replacement);
  return lines.substr(1);
}

// `text` with `key_line` inserted as the first line of table `header` (e.g. "[train]"), so that
// it sits on the header's line + 1.
std::string with_key(std::string_view text, std::string_view header, std::string_view key_line) {
  return replace_line(text, header, std::string(header) + "\n" + std::string(key_line));
}

// kMinimalConfig with a [checkpoint] table holding `key_line`: [checkpoint] is line 15, the key 16.
std::string with_checkpoint_key(std::string_view key_line) {
  return std::string(kMinimalConfig) + "\n[checkpoint]\n" + std::string(key_line) + "\n";
}

// `text` without the table `header` and its lines up to the next blank line.
std::string without_table(std::string_view text, std::string_view header) {
  std::string result(text);
  const size_t begin = result.find(std::string(header) + "\n");
  REQUIRE_MESSAGE(begin != std::string::npos, "table not found: " << header);
  const size_t blank = result.find("\n\n", begin);
  return result.erase(begin, blank == std::string::npos ? std::string::npos : blank + 2 - begin);
}

fs::path configs_dir() {
  const char* source_dir = std::getenv("TRAINCTL_SOURCE_DIR");
  return source_dir != nullptr ? fs::path(source_dir) / "configs" : fs::path("../configs");
}

std::string demo_config_path() { return (configs_dir() / "mlp_demo.toml").string(); }

}  // namespace

TEST_CASE("every example config in configs/ validates, its sweep too") {
  size_t configs = 0;
  for (const auto& entry : fs::directory_iterator(configs_dir())) {
    if (entry.path().extension() != ".toml") continue;
    INFO("config: ", entry.path().string());
    const trainctl::Config config = trainctl::load_config(entry.path().string());
    if (config.sweep) CHECK(trainctl::expand_sweep(*config.sweep).size() > 1);
    ++configs;
  }
  CHECK(configs >= 2);
}

TEST_CASE("the demo config validates with the values it sets") {
  const std::string path = demo_config_path();
  INFO("demo config: ", path, " (set TRAINCTL_SOURCE_DIR to the source root)");
  REQUIRE(fs::is_regular_file(path));
  const trainctl::Config config = trainctl::load_config(path);
  CHECK(config.job.name == "mlp-demo");
  CHECK(config.job.world_size() == 2);

  const trainctl::RunSpec& run = *config.run;
  const auto& model = run.model.as<trainctl::MlpSpec>();
  CHECK(model.inputs == 32);
  CHECK(model.hidden == std::vector<int64_t>{128, 128});
  CHECK(model.classes == 4);
  CHECK(model.activation == trainctl::Activation::kGelu);
  CHECK(run.data.train == "../demo-data/demo_train.h5");  // kept as written until resolve_data_paths
  CHECK(run.data.val == std::optional<std::string>("../demo-data/demo_val.h5"));
  CHECK(run.data.shuffle);
  CHECK(run.train.steps == 600);
  CHECK(run.train.micro_batch == 64);
  CHECK(run.train.grad_accum == 2);
  CHECK(run.train.optimizer == trainctl::OptimizerKind::kAdamW);
  CHECK(run.train.lr == 3e-3);
  CHECK(run.train.weight_decay == 0.01);
  CHECK(run.train.beta1 == 0.9);
  CHECK(run.train.beta2 == 0.999);
  CHECK(run.train.warmup_steps == 50);
  CHECK(run.train.schedule == trainctl::Schedule::kCosine);
  CHECK(run.train.grad_clip == 1.0);
  CHECK(run.train.seed == 1234);
  CHECK(run.train.eval_every == 100);
  CHECK(run.train.log_every == 50);
  CHECK(run.train.device == "cpu");
  CHECK(run.checkpoint.every_steps == 100);
  CHECK(run.checkpoint.every_minutes == 5.0);  // an integer is accepted as a number
  CHECK(run.checkpoint.keep_last == 3);
}

TEST_CASE("a minimal config gets the documented defaults") {
  const trainctl::RunSpec run = *load_text(kMinimalConfig).run;
  CHECK(std::string(run.model.kind()) == "mlp");
  CHECK(run.model.as<trainctl::MlpSpec>().hidden.empty());
  CHECK(run.model.as<trainctl::MlpSpec>().activation == trainctl::Activation::kRelu);
  CHECK_FALSE(run.train.recompute);
  CHECK(run.data.train == "train.h5");
  CHECK_FALSE(run.data.val.has_value());
  CHECK(run.data.shuffle);
  CHECK(run.train.grad_accum == 1);
  CHECK(run.train.optimizer == trainctl::OptimizerKind::kAdamW);
  CHECK(run.train.lr == 1e-3);
  CHECK(run.train.weight_decay == 0.0);
  CHECK(run.train.momentum == 0.9);
  CHECK(run.train.beta1 == 0.9);
  CHECK(run.train.beta2 == 0.999);
  CHECK(run.train.eps == 1e-8);
  CHECK(run.train.warmup_steps == 0);
  CHECK(run.train.schedule == trainctl::Schedule::kConstant);
  CHECK(run.train.grad_clip == 0.0);
  CHECK(run.train.seed == 0);
  CHECK(run.train.eval_every == 0);
  CHECK(run.train.log_every == 10);
  CHECK(run.train.device == "cpu");
  CHECK(run.checkpoint.every_steps == 0);
  CHECK(run.checkpoint.every_minutes == 0.0);
  CHECK(run.checkpoint.keep_last == 3);
}

TEST_CASE("parse_run_spec reads the training tables without a [job] table") {
  const toml::table root = trainctl::parse_config_text(without_table(kMinimalConfig, "[job]"), "run.toml");
  const trainctl::RunSpec run = trainctl::parse_run_spec(root, "run.toml");
  CHECK(run.model.as<trainctl::MlpSpec>().inputs == 4);
  CHECK(run.model.as<trainctl::MlpSpec>().classes == 3);
  CHECK(run.train.steps == 100);
  CHECK(run.train.micro_batch == 8);
}

TEST_CASE("a config path that is no regular file is bad input with a message of its own") {
  CHECK_THROWS_WITH_AS(trainctl::load_config("/nonexistent/trainctl.toml"),
                       "config /nonexistent/trainctl.toml does not exist", trainctl::BadInput);
  const TempDir dir;
  const std::string directory = (dir.path() / "configs.toml").string();
  fs::create_directory(directory);
  CHECK_THROWS_WITH_AS(trainctl::load_config(directory),
                       ("config " + directory + " is a directory, not a config file").c_str(), trainctl::BadInput);
  // Opening a FIFO for reading would wait for a writer: this returns only if it is never opened.
  const std::string fifo = (dir.path() / "fifo.toml").string();
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_THROWS_WITH_AS(trainctl::load_config(fifo), ("config " + fifo + " is a FIFO, not a regular file").c_str(),
                       trainctl::BadInput);
  const std::string link = (dir.path() / "link.toml").string();
  fs::create_symlink(fifo, link);
  CHECK_THROWS_WITH_AS(trainctl::load_config(link), ("config " + link + " is a FIFO, not a regular file").c_str(),
                       trainctl::BadInput);
}

TEST_CASE("unknown keys and tables are reported with a suggestion") {
  CHECK(load_error(with_key(kMinimalConfig, "[train]", "lrr = 0.1")) ==
        R"(FILE:12:7: train.lrr: unknown key (did you mean "lr"?))");
  CHECK(load_error(with_key(kMinimalConfig, "[data]", "shufle = false")) ==
        R"(FILE:9:10: data.shufle: unknown key (did you mean "shuffle"?))");
  CHECK(load_error(with_key(kMinimalConfig, "[model]", "dropout = 0.1")) == "FILE:5:11: model.dropout: unknown key");
  CHECK(load_error(with_checkpoint_key("keep_lst = 2")) ==
        R"(FILE:16:12: checkpoint.keep_lst: unknown key (did you mean "keep_last"?))");
  CHECK(load_error(replace_line(kMinimalConfig, "[train]", "[trian]")) ==
        "FILE:11:1: trian: unknown table (did you mean [train]?)");
  CHECK(load_error(std::string(kMinimalConfig) + "\n[optimizer]\nlr = 1\n") == "FILE:15:1: optimizer: unknown table");
  // A key before any table, and the earliest of several unknown entries in the file.
  CHECK(load_error("steps = 5\n" + std::string(kMinimalConfig)) ==
        "FILE:1:9: steps: unknown top-level key (keys belong in a table)");
  CHECK(load_error(std::string(kMinimalConfig) + "\n[precision]\nx = 1\n[alpha]\ny = 2\n") ==
        "FILE:15:1: precision: unknown table");
}

TEST_CASE("[notify] is read with the config and checked as its own table (tests/test_notify_spec.cpp)") {
  CHECK_FALSE(load_text(kMinimalConfig).notify.has_value());
  const trainctl::Config config =
      load_text(std::string(kMinimalConfig) + "\n[notify]\non = [\"failed\"]\ncommand = [\"notify.sh\"]\n");
  REQUIRE(config.notify.has_value());
  CHECK(config.notify->on == std::vector<std::string>{"failed"});
  CHECK(config.notify->command == std::vector<std::string>{"notify.sh"});
  CHECK(load_error(std::string(kMinimalConfig) + "\n[notify]\non = [\"done\"]\nwebhook = \"https://x.org\"\n") ==
        R"(FILE:16:6: notify.on: element 0 is "done", not an event: the events are "failed", "hung", "requeued", "completed")");
  CHECK(load_error(std::string(kMinimalConfig) + "\n[notfy]\nwebhook = \"https://x.org\"\n") ==
        "FILE:15:1: notfy: unknown table (did you mean [notify]?)");
}

TEST_CASE("a TOML syntax error names its position") {
  CHECK(load_error(replace_line(kMinimalConfig, "micro_batch = 8", "micro_batch = 8 8")) ==
        "FILE:13:17: invalid TOML: Error while parsing key-value pair: expected a comment or whitespace, saw '8'");
  CHECK(load_error(with_key(kMinimalConfig, "[train]", "steps = 5")) ==
        "FILE:13:9: invalid TOML: Error while parsing key-value pair: cannot redefine existing integer 'steps'");
}

TEST_CASE("missing required keys and tables are reported at the table header") {
  CHECK(load_error(replace_line(kMinimalConfig, "steps = 100", "")) ==
        "FILE:11:1: train.steps: required key is missing");
  CHECK(load_error(replace_line(kMinimalConfig, "inputs = 4", "")) ==
        "FILE:4:1: model.inputs: required key is missing");
  CHECK(load_error(replace_line(kMinimalConfig, "train = \"train.h5\"", "")) ==
        "FILE:8:1: data.train: required key is missing");
  CHECK(load_error(without_table(kMinimalConfig, "[model]")) ==
        "FILE:1:1: model.kind: required table [model] is missing");
  CHECK(load_error(without_table(kMinimalConfig, "[train]")) ==
        "FILE:1:1: train.steps: required table [train] is missing");
  CHECK(load_error("model = 3\n" + without_table(kMinimalConfig, "[model]")) ==
        "FILE:1:9: model: expected a table, got an integer");
}

TEST_CASE("values of the wrong type name the type wanted and the type found") {
  CHECK(load_error(replace_line(kMinimalConfig, "steps = 100", R"(steps = "100")")) ==
        "FILE:12:9: train.steps: expected an integer, got a string");
  CHECK(load_error(replace_line(kMinimalConfig, "steps = 100", "steps = 100.0")) ==
        "FILE:12:9: train.steps: expected an integer, got a float");
  CHECK(load_error(with_key(kMinimalConfig, "[train]", R"(lr = "fast")")) ==
        "FILE:12:6: train.lr: expected a number, got a string");
  CHECK(load_error(with_key(kMinimalConfig, "[data]", "shuffle = 1")) ==
        "FILE:9:11: data.shuffle: expected a boolean, got an integer");
  // An element's error points at the element.
  CHECK(load_error(with_key(kMinimalConfig, "[model]", R"(hidden = [64, "x"])")) ==
        "FILE:5:15: model.hidden: expected an array of integers, but element 1 is a string");
  CHECK(load_error(with_key(kMinimalConfig, "[train]", "betas = 0.9")) ==
        "FILE:12:9: train.betas: expected an array of numbers, got a float");
}

TEST_CASE("values out of range name the bound") {
  CHECK(load_error(replace_line(kMinimalConfig, "steps = 100", "steps = 0")) ==
        "FILE:12:9: train.steps: must be at least 1 (got 0)");
  CHECK(load_error(replace_line(kMinimalConfig, "micro_batch = 8", "micro_batch = -1")) ==
        "FILE:13:15: train.micro_batch: must be at least 1 (got -1)");
  CHECK(load_error(replace_line(kMinimalConfig, "micro_batch = 8", "micro_batch = 16777217")) ==
        "FILE:13:15: train.micro_batch: must be at most 16777216 (got 16777217)");
  CHECK(load_error(with_key(kMinimalConfig, "[model]", "hidden = [64, 0]")) ==
        "FILE:5:10: model.hidden: every element must be at least 1 (got 0)");
  CHECK(load_error(replace_line(kMinimalConfig, "classes = 3", "classes = 1")) ==
        "FILE:6:11: model.classes: must be at least 2 (got 1)");
  CHECK(load_error(with_key(kMinimalConfig, "[train]", "lr = 0")) == "FILE:12:6: train.lr: must be greater than 0");
  CHECK(load_error(with_key(kMinimalConfig, "[train]", "lr = -1e-3")) == "FILE:12:6: train.lr: must be greater than 0");
  CHECK(load_error(with_key(kMinimalConfig, "[train]", "weight_decay = -0.1")) ==
        "FILE:12:16: train.weight_decay: must not be negative");
  CHECK(load_error(with_key(kMinimalConfig, "[train]", "momentum = 1.0")) ==
        "FILE:12:12: train.momentum: must be in [0, 1)");
  CHECK(load_error(with_key(kMinimalConfig, "[train]", "betas = [0.9]")) ==
        "FILE:12:9: train.betas: must have exactly two elements [beta1, beta2]");
  CHECK(load_error(with_key(kMinimalConfig, "[train]", "betas = [0.9, 1.5]")) ==
        "FILE:12:9: train.betas: each beta must be in [0, 1)");
  CHECK(load_error(with_key(kMinimalConfig, "[train]", "eps = 0.0")) == "FILE:12:7: train.eps: must be greater than 0");
  CHECK(load_error(with_key(kMinimalConfig, "[train]", "warmup_steps = 101")) ==
        "FILE:12:16: train.warmup_steps: must not exceed train.steps");
  CHECK(load_error(with_key(kMinimalConfig, "[train]", "grad_clip = -1.0")) ==
        "FILE:12:13: train.grad_clip: must not be negative (0 disables clipping)");
  CHECK(load_error(with_key(kMinimalConfig, "[train]", "log_every = 0")) ==
        "FILE:12:13: train.log_every: must be at least 1 (got 0)");
  CHECK(load_error(with_checkpoint_key("keep_last = 0")) ==
        "FILE:16:13: checkpoint.keep_last: must be at least 1 (got 0)");
  CHECK(load_error(with_checkpoint_key("every_minutes = -5")) ==
        "FILE:16:17: checkpoint.every_minutes: must not be negative (0 disables)");
}

TEST_CASE("early stopping and keep_best are read, and need a validation set evaluated every N steps") {
  const std::string validated = with_key(with_key(kMinimalConfig, "[data]", R"(val = "val.h5")"), "[train]",
                                         "eval_every = 10\nearly_stop = { patience = 4, min_delta = 0.01 }");
  const trainctl::RunSpec spec = *load_text(validated + "[checkpoint]\nkeep_best = true\n").run;
  REQUIRE(spec.train.early_stop.has_value());
  CHECK(spec.train.early_stop->metric == "val_loss");
  CHECK(spec.train.early_stop->patience == 4);
  CHECK(spec.train.early_stop->min_delta == 0.01);
  CHECK(spec.checkpoint.keep_best);

  CHECK(load_error(with_key(kMinimalConfig, "[train]", "early_stop = { patience = 2 }")) ==
        "FILE:12:14: train.early_stop: is judged by the validation loss: set data.val to a validation set");
  CHECK(load_error(with_key(with_key(kMinimalConfig, "[data]", R"(val = "val.h5")"), "[train]",
                            "early_stop = { patience = 2 }")) ==
        "FILE:13:14: train.early_stop: is judged by the validation loss: set train.eval_every to evaluate every N steps");
  CHECK(load_error(with_checkpoint_key("keep_best = true")) ==
        "FILE:16:13: checkpoint.keep_best: is judged by the validation loss: set data.val to a validation set");
  CHECK(load_error(with_key(kMinimalConfig, "[train]", "early_stop = { min_delta = 0.1 }")) ==
        "FILE:12:14: train.early_stop.patience: required key is missing");
  CHECK(load_error(with_key(kMinimalConfig, "[train]", R"(early_stop = { patience = 2, metric = "loss" })")) ==
        R"(FILE:12:39: train.early_stop.metric: must be one of "val_loss" (got "loss"))");
  CHECK(load_error(with_key(kMinimalConfig, "[train]", "early_stop = { patience = 2, min_delta = -1.0 }")) ==
        "FILE:12:42: train.early_stop.min_delta: must not be negative");
  CHECK(load_error(with_key(kMinimalConfig, "[train]", "early_stop = 3")) ==
        "FILE:12:14: train.early_stop: expected a table, got an integer");
}

TEST_CASE("warmup may last the whole run") {
  CHECK(load_text(with_key(kMinimalConfig, "[train]", "warmup_steps = 100")).run->train.warmup_steps == 100);
}

TEST_CASE("choices list what is allowed") {
  CHECK(load_error(with_key(kMinimalConfig, "[train]", R"(optimizer = "adam")")) ==
        R"(FILE:12:13: train.optimizer: must be one of "sgd", "adamw" (got "adam"))");
  CHECK(load_error(with_key(kMinimalConfig, "[train]", R"(schedule = "step")")) ==
        R"(FILE:12:12: train.schedule: must be one of "constant", "linear", "cosine" (got "step"))");
  CHECK(load_error(with_key(kMinimalConfig, "[model]", R"(activation = "tanh")")) ==
        R"(FILE:5:14: model.activation: must be one of "relu", "gelu" (got "tanh"))");
  CHECK(load_error(with_key(kMinimalConfig, "[model]", R"(kind = "cnn")")) ==
        R"(FILE:5:8: model.kind: must be one of "mlp", "gpt2", "llama" (got "cnn"))");
  CHECK(load_error(with_key(kMinimalConfig, "[train]", R"(device = "tpu")")) ==
        R"(FILE:12:10: train.device: must be one of "cpu", "cuda" (got "tpu"))");
  // CUDA is the runtime's to check on its node; the config must ask for one rank per GPU.
  CHECK(load_error(with_key(kMinimalConfig, "[train]", R"(device = "cuda")")) ==
        R"(FILE:1:1: job.gpus_per_node: train.device = "cuda" needs GPUs: set gpus_per_node, and ranks_per_node to the same number (one rank per GPU))");
  CHECK(load_error(with_key(with_key(kMinimalConfig, "[train]", R"(device = "cuda")"), "[job]",
                            "ranks_per_node = 2\ngpus_per_node = 1")) ==
        R"(FILE:2:18: job.ranks_per_node: train.device = "cuda" runs one rank per GPU, so ranks_per_node (2) must equal gpus_per_node (1))");
  CHECK(load_error(with_key(kMinimalConfig, "[train]", R"(precision = "fp16")")) ==
        R"(FILE:12:13: train.precision: must be one of "fp32", "bf16" (got "fp16"))");
}

// The smallest gpt2 config: [model] is lines 4-10, [train] starts at line 15.
constexpr std::string_view kGpt2Config = R"([job]
name = "unit-test"

[model]
kind = "gpt2"
n_layer = 2
n_head = 4
n_embd = 64
block_size = 32
vocab_size = 256

[data]
train = "tokens.bin"

[train]
steps = 10
micro_batch = 2
)";

TEST_CASE("a gpt2 [model] is read by its kind's schema") {
  const trainctl::RunSpec run = *load_text(kGpt2Config).run;
  REQUIRE(std::string(run.model.kind()) == "gpt2");
  const auto& model = run.model.as<trainctl::Gpt2Spec>();
  CHECK(model.n_layer == 2);
  CHECK(model.n_head == 4);
  CHECK(model.n_embd == 64);
  CHECK(model.block_size == 32);
  CHECK(model.vocab_size == 256);
  CHECK(run.model.describe() == "gpt2 2 layers x 64 wide, 4 heads, block 32, vocab 256");
  CHECK(load_text(with_key(kGpt2Config, "[train]", "recompute = true")).run->train.recompute);
}

TEST_CASE("bad gpt2 [model] values name the key") {
  CHECK(load_error(replace_line(kGpt2Config, "n_head = 4", "n_head = 3")) ==
        "FILE:8:10: model.n_embd: 64 is not divisible by n_head = 3");
  CHECK(load_error(replace_line(kGpt2Config, "n_layer = 2", "")) ==
        "FILE:4:1: model.n_layer: required key is missing");
  CHECK(load_error(replace_line(kGpt2Config, "vocab_size = 256", "vocab_size = 65537")) ==
        "FILE:10:14: model.vocab_size: must be at most 65536 (got 65537)");
  CHECK(load_error(replace_line(kGpt2Config, "block_size = 32", "block_size = 0")) ==
        "FILE:9:14: model.block_size: must be at least 1 (got 0)");
  // Another kind's keys are unknown to this one.
  CHECK(load_error(with_key(kGpt2Config, "[model]", "hidden = [64]")) ==
        "FILE:5:10: model.hidden: unknown key");
}

// The smallest llama config: [model] is lines 4-11.
constexpr std::string_view kLlamaConfig = R"([job]
name = "unit-test"

[model]
kind = "llama"
n_layer = 2
n_embd = 64
n_head = 8
intermediate_size = 176
block_size = 32
vocab_size = 256

[data]
train = "tokens.bin"

[train]
steps = 10
micro_batch = 2
)";

TEST_CASE("a llama [model] is read with LlamaConfig's defaults, and rope_scaling as config.json spells it") {
  const trainctl::RunSpec run = *load_text(kLlamaConfig).run;
  REQUIRE(std::string(run.model.kind()) == "llama");
  const auto& model = run.model.as<trainctl::LlamaSpec>();
  CHECK(model.n_kv_head == 8);
  CHECK(model.head_dim == 8);
  CHECK(model.rope_theta == 500000.0);
  CHECK(model.rms_norm_eps == 1e-5);
  CHECK(!model.tie_embeddings);
  CHECK(!model.rope_scaling);
  CHECK(run.model.describe() == "llama 2 layers x 64 wide, 8 heads (8 key/value) of 8, MLP 176, block 32, vocab 256");
  const trainctl::RunSpec scaled = *load_text(with_key(
      with_key(kLlamaConfig, "[model]",
               R"(rope_scaling = { rope_type = "llama3", factor = 32.0, low_freq_factor = 1.0, high_freq_factor = 4.0, original_max_position_embeddings = 8192 })"),
      "[model]", "n_kv_head = 2\nhead_dim = 16\ntie_embeddings = true"))
                                         .run;
  const auto& llama = scaled.model.as<trainctl::LlamaSpec>();
  REQUIRE(llama.rope_scaling);
  CHECK(llama.rope_scaling->factor == 32.0);
  CHECK(llama.rope_scaling->original_max_position_embeddings == 8192);
  CHECK(scaled.model.describe() ==
        "llama 2 layers x 64 wide, 8 heads (2 key/value) of 16, MLP 176, block 32, vocab 256, rope scaling x32, tied");
}

TEST_CASE("bad llama [model] values and combinations name the file, line and key") {
  const auto scaling = [](std::string_view body) {
    return load_error(with_key(kLlamaConfig, "[model]", "rope_scaling = { " + std::string(body) + " }"));
  };
  CHECK(load_error(with_key(kLlamaConfig, "[model]", "n_kv_head = 3")) ==
        "FILE:5:13: model.n_kv_head: 3 does not divide n_head = 8: each key/value head serves as many query heads "
        "as every other");
  CHECK(load_error(replace_line(kLlamaConfig, "n_head = 8", "n_head = 6")) ==
        "FILE:7:10: model.n_embd: 64 is not divisible by n_head = 6 (or set head_dim)");
  CHECK(load_error(replace_line(kLlamaConfig, "n_head = 8", "n_head = 64")) ==
        "FILE:7:10: model.n_embd: n_embd / n_head = 1 is odd: RoPE rotates the two halves of a head");
  CHECK(load_error(with_key(kLlamaConfig, "[model]", "head_dim = 15")) ==
        "FILE:5:12: model.head_dim: 15 is odd: RoPE rotates the two halves of a head");
  CHECK(load_error(with_key(kLlamaConfig, "[model]", "rope_theta = 0.0")) ==
        "FILE:5:14: model.rope_theta: must be above 0 (got 0)");
  CHECK(load_error(with_key(kLlamaConfig, "[model]", "rms_norm_eps = -1e-5")) ==
        "FILE:5:16: model.rms_norm_eps: must be above 0 (got -1e-05)");
  CHECK(load_error(replace_line(kLlamaConfig, "vocab_size = 256", "vocab_size = 16777217")) ==
        "FILE:11:14: model.vocab_size: must be at most 16777216 (got 16777217)");
  CHECK(load_error(replace_line(kLlamaConfig, "intermediate_size = 176", "")) ==
        "FILE:4:1: model.intermediate_size: required key is missing");
  CHECK(scaling(R"(rope_type = "yarn", factor = 32.0)") ==
        R"(FILE:5:30: model.rope_scaling.rope_type: must be one of "llama3" (got "yarn"))");
  CHECK(scaling(R"(rope_type = "llama3", factor = 0.5, low_freq_factor = 1.0)") ==
        "FILE:5:49: model.rope_scaling.factor: must be at least 1 (got 0.5)");
  CHECK(scaling(R"(rope_type = "llama3", factor = 8.0, low_freq_factor = 4.0, high_freq_factor = 1.0, )"
                R"(original_max_position_embeddings = 8192)") ==
        "FILE:5:96: model.rope_scaling.high_freq_factor: must be above low_freq_factor = 4 (got 1)");
  CHECK(scaling(R"(rope_type = "llama3", factor = 8.0, low_freq_factor = 1.0, high_freq_factor = 4.0)") ==
        "FILE:5:16: model.rope_scaling.original_max_position_embeddings: required key is missing");
  CHECK(scaling(R"(rope_type = "llama3", factor = 8.0, low_freq_factor = 1.0, high_freq_factor = 4.0, )"
                R"(original_max_position_embeddings = 8192, type = "llama3")") ==
        "FILE:5:149: model.rope_scaling.type: unknown key");
  // GPT-2's keys are unknown to a llama.
  CHECK(load_error(with_key(kLlamaConfig, "[model]", "n_positions = 32")) ==
        "FILE:5:15: model.n_positions: unknown key");
}

TEST_CASE("an empty training data path is rejected") {
  CHECK(load_error(replace_line(kMinimalConfig, R"(train = "train.h5")", R"(train = "")")) ==
        "FILE:9:9: data.train: must not be empty");
}

TEST_CASE("an empty validation data path is rejected") {
  CHECK(load_error(with_key(kMinimalConfig, "[data]", R"(val = "")")) ==
        "FILE:9:7: data.val: must not be empty (leave the key out for no validation)");
}

TEST_CASE("nearest_key suggests the closest known key within the typo distance") {
  const std::vector<std::string> train_keys{"lr", "steps", "optimizer", "warmup_steps", "schedule"};
  CHECK(nearest_key("lrr", train_keys) == std::optional<std::string>("lr"));
  CHECK(nearest_key("stpes", train_keys) == std::optional<std::string>("steps"));  // a swap is two edits
  CHECK(nearest_key("optimiser", train_keys) == std::optional<std::string>("optimizer"));
  CHECK(nearest_key("warmup", train_keys) == std::nullopt);          // 6 deletions
  CHECK(nearest_key("warmupstep", train_keys) == std::optional<std::string>("warmup_steps"));
  CHECK(nearest_key("steps", train_keys) == std::optional<std::string>("steps"));
  CHECK(nearest_key("dropout", train_keys) == std::nullopt);
  CHECK(nearest_key("lr", {}) == std::nullopt);
  // Ties go to the first candidate.
  CHECK(nearest_key("ab", {"ac", "ad"}) == std::optional<std::string>("ac"));
  // The allowed distance is max(2, length / 3): 3 for a 9-letter key, so 3 edits suggest, 4 do not.
  CHECK(nearest_key("schXXXler", {"scheduler"}) == std::optional<std::string>("scheduler"));
  CHECK(nearest_key("scXXXXler", {"scheduler"}) == std::nullopt);
  // A short key may not be replaced wholesale: "x" is two edits from "lr" but no typo of it.
  CHECK(nearest_key("x", train_keys) == std::nullopt);
  CHECK(nearest_key("lx", train_keys) == std::optional<std::string>("lr"));
}

TEST_CASE("resolve_data_paths makes relative data paths absolute against the config directory") {
  toml::table root = trainctl::parse_config_text(R"([data]
train = "data/train.h5"
val = "/datasets/../datasets/val.h5"
)",
                                                 "paths.toml");
  trainctl::resolve_data_paths(root, "/home/user/configs");
  CHECK(root["data"]["train"].value<std::string>() == std::optional<std::string>("/home/user/configs/data/train.h5"));
  CHECK(root["data"]["val"].value<std::string>() == std::optional<std::string>("/datasets/val.h5"));

  toml::table parent = trainctl::parse_config_text("[data]\ntrain = \"../data/train.h5\"\n", "paths.toml");
  trainctl::resolve_data_paths(parent, "/home/user/configs");
  CHECK(parent["data"]["train"].value<std::string>() == std::optional<std::string>("/home/user/data/train.h5"));
}

TEST_CASE("resolve_data_paths resolves a relative config directory against the working directory") {
  toml::table root = trainctl::parse_config_text("[data]\ntrain = \"train.h5\"\n", "paths.toml");
  trainctl::resolve_data_paths(root, "configs");
  CHECK(root["data"]["train"].value<std::string>() ==
        std::optional<std::string>((fs::current_path() / "configs" / "train.h5").lexically_normal().string()));
}

TEST_CASE("resolve_data_paths leaves a config without data paths alone") {
  toml::table root = trainctl::parse_config_text("[data]\ntrain = \"\"\n[model]\ninputs = 3\n", "paths.toml");
  trainctl::resolve_data_paths(root, "/home/user/configs");
  CHECK(root["data"]["train"].value<std::string>() == std::optional<std::string>(""));
  CHECK_FALSE(root["data"]["val"]);

  toml::table no_data = trainctl::parse_config_text("[model]\ninputs = 3\n", "paths.toml");
  trainctl::resolve_data_paths(no_data, "/home/user/configs");
  CHECK_FALSE(no_data["data"]);
}

TEST_CASE("nan and inf are refused in every float key, with one message") {
  const char* train_keys[] = {"lr", "weight_decay", "momentum", "eps", "grad_clip"};
  for (const char* value : {"nan", "inf", "-inf", "+inf", "-nan"}) {
    CAPTURE(value);
    const std::string shown = std::string(value) == "+inf" ? "inf" : std::string(value) == "-nan" ? "nan" : value;
    for (const char* key : train_keys) {
      CAPTURE(key);
      CHECK(load_error(with_key(kMinimalConfig, "[train]", fmt::format("{} = {}", key, value))) ==
            fmt::format("FILE:12:{}: train.{}: must be a finite number (got {})", std::string_view(key).size() + 4, key,
                        shown));
    }
    CHECK(load_error(with_checkpoint_key(fmt::format("every_minutes = {}", value))) ==
          fmt::format("FILE:16:17: checkpoint.every_minutes: must be a finite number (got {})", shown));
    CHECK(load_error(with_key(kMinimalConfig, "[train]", fmt::format("betas = [0.9, {}]", value))) ==
          fmt::format("FILE:12:9: train.betas: element 1 must be a finite number (got {})", shown));
  }
  // An integer is a number, also beyond 2^53 where a double cannot hold it exactly.
  CHECK(load_text(with_key(kMinimalConfig, "[train]", "lr = 9007199254740993")).run->train.lr == 9007199254740992.0);
  // Finite but beyond any use: a checkpoint interval is at most a year.
  CHECK(load_error(with_checkpoint_key("every_minutes = 1e300")) ==
        "FILE:16:17: checkpoint.every_minutes: must be at most 527040 (a year)");
  CHECK(load_text(with_checkpoint_key("every_minutes = 527040")).run->checkpoint.every_minutes == 527040.0);
}

TEST_CASE("every count has an upper bound: 2^63-1 is refused with it") {
  constexpr std::string_view kMax = "9223372036854775807";
  const struct {
    const char* key;
    const char* message;
  } train_cases[] = {
      {"micro_batch", "must be at most 16777216"},
      {"grad_accum", "must be at most 65536"},
      {"eval_every", "must be at most 1000000000"},
      {"log_every", "must be at most 1000000000"},
  };
  for (const auto& [key, message] : train_cases) {
    CAPTURE(key);
    const std::string text = std::string_view(key) == "micro_batch"
                                 ? replace_line(kMinimalConfig, "micro_batch = 8", fmt::format("micro_batch = {}", kMax))
                                 : with_key(kMinimalConfig, "[train]", fmt::format("{} = {}", key, kMax));
    const int line = std::string_view(key) == "micro_batch" ? 13 : 12;
    CHECK(load_error(text) == fmt::format("FILE:{}:{}: train.{}: {} (got {})", line, std::string_view(key).size() + 4,
                                          key, message, kMax));
  }
  CHECK(load_error(replace_line(kMinimalConfig, "steps = 100", fmt::format("steps = {}", kMax))) ==
        fmt::format("FILE:12:9: train.steps: must be at most 1000000000 (got {})", kMax));
  CHECK(load_error(with_key(kMinimalConfig, "[train]", fmt::format("warmup_steps = {}", kMax))) ==
        "FILE:12:16: train.warmup_steps: must not exceed train.steps");
  CHECK(load_text(with_key(kMinimalConfig, "[train]", fmt::format("seed = {}", kMax))).run->train.seed ==
        uint64_t{9223372036854775807});  // any seed is a seed
  CHECK(load_error(with_checkpoint_key(fmt::format("every_steps = {}", kMax))) ==
        fmt::format("FILE:16:15: checkpoint.every_steps: must be at most 1000000000 (got {})", kMax));
  CHECK(load_error(with_checkpoint_key(fmt::format("keep_last = {}", kMax))) ==
        fmt::format("FILE:16:13: checkpoint.keep_last: must be at most 1000 (got {})", kMax));
  CHECK(load_error(replace_line(kMinimalConfig, "inputs = 4", fmt::format("inputs = {}", kMax))) ==
        fmt::format("FILE:5:10: model.inputs: must be at most 1048576 (got {})", kMax));
  CHECK(load_error(replace_line(kMinimalConfig, "classes = 3", fmt::format("classes = {}", kMax))) ==
        fmt::format("FILE:6:11: model.classes: must be at most 1048576 (got {})", kMax));
  CHECK(load_error(with_key(kMinimalConfig, "[model]", fmt::format("hidden = [64, {}]", kMax))) ==
        fmt::format("FILE:5:10: model.hidden: every element must be at most 1048576 (got {})", kMax));
  for (const auto& [key, bound] : {std::pair{"n_layer", 1024}, {"n_head", 1024}, {"n_embd", 65536},
                                   {"block_size", 65536}, {"vocab_size", 65536}}) {
    CAPTURE(key);
    const std::string line = fmt::format("{} = ", key);
    std::string text(kGpt2Config);
    const size_t at = text.find("\n" + line) + 1;
    text.replace(at, text.find('\n', at) - at, line + std::string(kMax));
    const int line_number = static_cast<int>(std::count(text.begin(), text.begin() + at, '\n')) + 1;
    CHECK(load_error(text) == fmt::format("FILE:{}:{}: model.{}: must be at most {} (got {})", line_number,
                                          line.size() + 1, key, bound, kMax));
  }
  // [job]'s counts are bounded in their own schema (test_job_spec.cpp).
  CHECK(load_error(with_key(kMinimalConfig, "[job]", fmt::format("nodes = {}", kMax))) ==
        fmt::format("FILE:2:9: job.nodes: must be at most 100000 (got {})", kMax));
}

TEST_CASE("the global batch, whose factors are each bounded, must fit its own bound") {
  const std::string largest = with_key(replace_line(kMinimalConfig, "micro_batch = 8", "micro_batch = 16777216"),
                                       "[job]", "nodes = 100000\nranks_per_node = 4096");
  CHECK(load_error(with_key(largest, "[train]", "grad_accum = 65536")) ==
        "FILE:16:15: train.micro_batch: the global batch, micro_batch (16777216) x grad_accum (65536) x job.nodes "
        "(100000) x job.ranks_per_node (4096), must be at most 4294967296");
  const std::string at_bound = with_key(replace_line(kMinimalConfig, "micro_batch = 8", "micro_batch = 65536"), "[job]",
                                        "nodes = 256\nranks_per_node = 256");
  CHECK(load_error(at_bound) == "(no error)");
  CHECK(load_error(with_key(at_bound, "[train]", "grad_accum = 2")) ==
        "FILE:16:15: train.micro_batch: the global batch, micro_batch (65536) x grad_accum (2) x job.nodes (256) x "
        "job.ranks_per_node (256), must be at most 4294967296");
}

TEST_CASE("a data path of 1 MB or holding a NUL is refused") {
  CHECK(load_error(replace_line(kMinimalConfig, R"(train = "train.h5")", "train = \"" + std::string(1 << 20, 'd') + "\"")) ==
        "FILE:9:9: data.train: must be at most 4096 characters (got 1048576)");
  CHECK(load_error(with_key(kMinimalConfig, "[data]", "val = \"" + std::string(4097, 'd') + "\"")) ==
        "FILE:9:7: data.val: must be at most 4096 characters (got 4097)");
  // A C path ends at the NUL: "train.h5\0.bak" would silently read train.h5.
  CHECK(load_error(replace_line(kMinimalConfig, R"(train = "train.h5")", R"(train = "train.h5\u0000.bak")")) ==
        "FILE:9:9: data.train: must not contain a NUL character");
  CHECK(load_error(with_key(kMinimalConfig, "[data]", R"(val = "\u0000")")) ==
        "FILE:9:7: data.val: must not contain a NUL character");
}

TEST_CASE("a key with a NUL or a control character is shown escaped, the message whole") {
  CHECK(load_error(with_key(kMinimalConfig, "[train]", R"("l\u0000r" = 0.1)")) ==
        R"(FILE:12:14: train.l\x00r: unknown key (did you mean "lr"?))");
  CHECK(load_error(with_key(kMinimalConfig, "[model]", R"("\u0007bell\u001b[2J" = 1)")) ==
        R"(FILE:5:25: model.\x07bell\x1b[2J: unknown key)");
  CHECK(load_error("\"\\u0000\" = 1\n" + std::string(kMinimalConfig)) ==
        R"(FILE:1:12: \x00: unknown top-level key (keys belong in a table))");
  CHECK(trainctl::printable("a\tb\x7f\xc2\x9b[c\xc3\xa9") == R"(a\x09b\x7f\u009b[cé)");
  // A value's control characters are escaped too, wherever a message quotes it.
  CHECK(load_error(with_key(kMinimalConfig, "[train]", R"(optimizer = "sgd\u001b[31m")")) ==
        R"(FILE:12:13: train.optimizer: must be one of "sgd", "adamw" (got "sgd\x1b[31m"))");
}
