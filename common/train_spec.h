// The train-spec schema: [model], [data], [train], [checkpoint] and [metrics] of a config, with defaults
// and checks. The CLI validates with it and the runtime trains from it, so both read a config
// the same way. ([job] belongs to slurm/job_spec.h.)
#pragma once

#include <cstdint>
#include <concepts>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <toml++/toml.h>

namespace trainctl {

enum class OptimizerKind { kSgd, kAdamW };
enum class Schedule { kConstant, kLinear, kCosine };
// bf16: activations and their gradients stored in bfloat16, the GEMMs reading a bf16 copy of the
// weights and summing in fp32; weights, gradients, the residual stream and optimizer state stay
// fp32 (docs/runtime.md, "bf16").
enum class Precision { kFp32, kBf16 };

// A [model] table as its kind's schema read it: what the kind builds from. Each kind defines its
// own in its folder (models/<kind>/), and nothing outside that folder looks inside.
class ModelConfig {
 public:
  virtual ~ModelConfig() = default;
  virtual const char* kind() const = 0;  // model.kind
  // One line for people: the kind and its sizes ("<kind> 32-64-4").
  virtual std::string describe() const = 0;
};

// [model]: the kind's config, shared (a spec is copied freely and never changed).
struct ModelSpec {
  ModelSpec() = default;
  template <std::derived_from<ModelConfig> Config>
  ModelSpec(Config config) : config(std::make_shared<const Config>(std::move(config))) {}

  const char* kind() const { return config->kind(); }
  std::string describe() const { return config->describe(); }
  // The kind's own config; only that kind's code asks for it.
  template <std::derived_from<ModelConfig> Config>
  const Config& as() const {
    return dynamic_cast<const Config&>(*config);
  }

  std::shared_ptr<const ModelConfig> config;
};

class TableReader;

// How one model kind reads its [model] table: its keys, defaults and checks, with the one config
// reader (config_reader.h), so that its errors name file, line and key as every other table's do.
// `reader` is the [model] table; the schema reads every key but kind, and rejects none (the
// caller rejects what no one read).
struct ModelSchema {
  const char* kind;
  ModelSpec (*parse)(TableReader& reader);
};

struct DataSpec {
  // The data the model kind reads (a classifier's HDF5 file, a language model's token shards).
  std::string train;
  std::optional<std::string> val;  // same layout
  bool shuffle = true;
  // A language model's: the GPT-2 tokenizer directory (vocab.json + merges.txt, or tokenizer.json) the token
  // files were written with; the run records it so that `trainctl sample` decodes with it.
  std::optional<std::string> tokenizer;
};

// [train] early_stop: training ends once the metric has not improved by more than min_delta for
// `patience` evaluations in a row.
struct EarlyStopSpec {
  std::string metric = "val_loss";  // lower is better
  int64_t patience = 0;
  double min_delta = 0.0;
};

struct TrainSpec {
  int64_t steps = 0;
  int64_t micro_batch = 0;  // per rank
  int64_t grad_accum = 1;
  OptimizerKind optimizer = OptimizerKind::kAdamW;
  double lr = 1e-3;
  double weight_decay = 0.0;
  double momentum = 0.9;           // sgd
  double beta1 = 0.9, beta2 = 0.999;  // adamw
  double eps = 1e-8;               // adamw
  int64_t warmup_steps = 0;
  Schedule schedule = Schedule::kConstant;
  double grad_clip = 0.0;  // max global L2 norm; 0 disables
  uint64_t seed = 0;
  int64_t eval_every = 0;  // 0 disables validation
  int64_t log_every = 10;
  std::string device = "cpu";  // "cpu" or "cuda"; the runtime checks that it has one
  Precision precision = Precision::kFp32;
  // Blocks keep only their inputs and recompute the rest in backward (gradients unchanged).
  bool recompute = false;
  std::optional<EarlyStopSpec> early_stop;  // needs data.val and eval_every
  // Weights to start from at step 0 (a model.safetensors with GPT2LMHeadModel's names, or a
  // trainctl checkpoint), with a fresh optimizer. A run that has checkpoints of its own resumes
  // from them instead.
  std::optional<std::string> init_from;
  // ZeRO stage: 0 keeps the whole optimizer state on every rank; 1 shards it across the
  // data-parallel ranks (gradients reduce-scattered, each rank stepping its own shard, parameters
  // all-gathered); 2 also keeps only the rank's shard of the gradients, each layer's
  // reduce-scattered as backward finishes it; 3 also only its shard of the parameters, each
  // layer's gathered just before use (docs/runtime.md).
  int64_t zero = 0;
  // zero = 3: the layers' gathered weights are released after forward and gathered again for
  // backward (true), or kept from one to the other (false: every layer's at once).
  bool reshard_after_forward = true;
};

struct CheckpointSpec {
  int64_t every_steps = 0;    // 0: only on signal and at the end
  double every_minutes = 0.0;  // 0: off
  int64_t keep_last = 3;
  bool keep_best = false;  // also keep the checkpoint of the lowest validation loss, beyond keep_last
  // Every rank writes its own shard of the state into a step directory (storage/sharded_checkpoint.h)
  // instead of rank 0 writing one file. Always with train.zero = 1, whose optimizer state no rank
  // holds whole.
  bool sharded = false;
  // Saves copy the state into staging buffers and a writer thread persists it while training
  // goes on; a stop signal's save is always synchronous.
  bool async = false;
};

struct MetricsSpec {
  // A Prometheus textfile rewritten at every log step; relative to the run directory.
  std::optional<std::string> prometheus;
};

struct RunSpec {
  ModelSpec model;
  DataSpec data;
  TrainSpec train;
  CheckpointSpec checkpoint;
  MetricsSpec metrics;
};

// Reads the tables of `root`, [model] by the schema of the kind it names among `model_schemas`
// (the first is the default kind); throws ConfigError. Relative paths of input files are kept as
// written (resolve_data_paths makes them absolute for a run directory). models/registry.h has
// the overload with the kinds of the build.
RunSpec parse_run_spec(const toml::table& root, const std::string& file, std::span<const ModelSchema> model_schemas);

// Rewrites the input paths in `root` (data.train, data.val, data.tokenizer, train.init_from)
// relative to `base_dir`, so a resolved config can be used from any working directory.
void resolve_data_paths(toml::table& root, const std::string& base_dir);

}  // namespace trainctl
