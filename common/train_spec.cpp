// The train-spec schema: see train_spec.h.
#include "train_spec.h"

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "config_reader.h"

namespace trainctl {

namespace {

// Upper bounds far beyond any real run, so that every count is bounded and no product of them
// (samples seen = steps x global batch) can overflow.
constexpr int64_t kMaxSteps = 1'000'000'000;
constexpr int64_t kMaxKeepLast = 1000;
constexpr double kMaxEveryMinutes = 366 * 24 * 60;
constexpr size_t kMaxPathLength = 4096;  // PATH_MAX: no longer path can be opened

void check_path_length(const TableReader& reader, std::string_view key, const std::string& path) {
  if (path.size() > kMaxPathLength)
    reader.fail(key, fmt::format("must be at most {} characters (got {})", kMaxPathLength, path.size()));
}

ModelSpec parse_model(TableReader reader, std::span<const ModelSchema> schemas) {
  if (!reader.present()) reader.fail("kind", "required table [model] is missing");
  std::vector<std::string> kinds;
  for (const ModelSchema& schema : schemas) kinds.emplace_back(schema.kind);
  const std::string kind = reader.choice("kind", kinds, kinds.front());
  const ModelSchema& schema = *std::find_if(schemas.begin(), schemas.end(),
                                            [&](const ModelSchema& candidate) { return kind == candidate.kind; });
  ModelSpec model = schema.parse(reader);
  reader.reject_unknown();
  return model;
}

DataSpec parse_data(TableReader reader) {
  if (!reader.present()) reader.fail("train", "required table [data] is missing");
  DataSpec data;
  data.train = reader.string("train");
  if (data.train.empty()) reader.fail("train", "must not be empty");
  check_path_length(reader, "train", data.train);
  data.val = reader.optional_string("val");
  if (data.val && data.val->empty()) reader.fail("val", "must not be empty (leave the key out for no validation)");
  if (data.val) check_path_length(reader, "val", *data.val);
  data.shuffle = reader.boolean("shuffle", true);
  data.tokenizer = reader.optional_string("tokenizer");
  if (data.tokenizer && data.tokenizer->empty()) reader.fail("tokenizer", "must not be empty (leave the key out for bytes)");
  if (data.tokenizer) check_path_length(reader, "tokenizer", *data.tokenizer);
  reader.reject_unknown();
  return data;
}

TrainSpec parse_train(TableReader reader) {
  if (!reader.present()) reader.fail("steps", "required table [train] is missing");
  TrainSpec train;
  train.steps = reader.integer("steps", std::nullopt, 1, kMaxSteps);
  train.micro_batch = reader.integer("micro_batch", std::nullopt, 1, 1 << 24);
  train.grad_accum = reader.integer("grad_accum", 1, 1, 1 << 16);
  std::string optimizer = reader.choice("optimizer", {"sgd", "adamw"}, "adamw");
  train.optimizer = optimizer == "sgd" ? OptimizerKind::kSgd : OptimizerKind::kAdamW;
  train.lr = reader.number("lr", train.lr);
  if (!(train.lr > 0.0)) reader.fail("lr", "must be greater than 0");
  train.weight_decay = reader.number("weight_decay", 0.0);
  if (train.weight_decay < 0.0) reader.fail("weight_decay", "must not be negative");
  train.momentum = reader.number("momentum", train.momentum);
  if (train.momentum < 0.0 || train.momentum >= 1.0) reader.fail("momentum", "must be in [0, 1)");
  std::vector<double> betas = reader.number_list("betas", std::vector<double>{0.9, 0.999});
  if (betas.size() != 2) reader.fail("betas", "must have exactly two elements [beta1, beta2]");
  for (double beta : betas)
    if (beta < 0.0 || beta >= 1.0) reader.fail("betas", "each beta must be in [0, 1)");
  train.beta1 = betas[0];
  train.beta2 = betas[1];
  train.eps = reader.number("eps", train.eps);
  if (!(train.eps > 0.0)) reader.fail("eps", "must be greater than 0");
  train.warmup_steps = reader.integer("warmup_steps", 0, 0);
  if (train.warmup_steps > train.steps) reader.fail("warmup_steps", "must not exceed train.steps");
  std::string schedule = reader.choice("schedule", {"constant", "linear", "cosine"}, "constant");
  train.schedule = schedule == "constant" ? Schedule::kConstant
                   : schedule == "linear" ? Schedule::kLinear
                                          : Schedule::kCosine;
  train.grad_clip = reader.number("grad_clip", 0.0);
  if (train.grad_clip < 0.0) reader.fail("grad_clip", "must not be negative (0 disables clipping)");
  train.seed = static_cast<uint64_t>(reader.integer("seed", 0, 0));
  train.eval_every = reader.integer("eval_every", 0, 0, kMaxSteps);
  train.log_every = reader.integer("log_every", 10, 1, kMaxSteps);
  train.device = reader.choice("device", {"cpu", "cuda"}, "cpu");
  train.precision = reader.choice("precision", {"fp32", "bf16"}, "fp32") == "bf16" ? Precision::kBf16 : Precision::kFp32;
  train.recompute = reader.boolean("recompute", false);
  train.zero = reader.integer("zero", 0, 0, 3);
  // FSDP2's reshard_after_forward: with false, a layer's gathered weights stay from its forward to
  // its backward (every layer's at once) instead of being gathered again.
  train.reshard_after_forward = reader.boolean("reshard_after_forward", true);
  if (!train.reshard_after_forward && train.zero != 3)
    reader.fail("reshard_after_forward", fmt::format("applies to train.zero = 3 only (this config has {}), which "
                                                     "gathers each layer's weights before use",
                                                     train.zero));
  train.init_from = reader.optional_string("init_from");
  if (train.init_from && train.init_from->empty()) reader.fail("init_from", "must not be empty (leave the key out for a fresh init)");
  if (train.init_from) check_path_length(reader, "init_from", *train.init_from);
  if (TableReader early_stop = reader.table("early_stop"); early_stop.present()) {
    EarlyStopSpec spec;
    spec.metric = early_stop.choice("metric", {"val_loss"}, spec.metric);
    spec.patience = early_stop.integer("patience", std::nullopt, 1, kMaxSteps);
    spec.min_delta = early_stop.number("min_delta", 0.0);
    if (spec.min_delta < 0.0) early_stop.fail("min_delta", "must not be negative");
    early_stop.reject_unknown();
    train.early_stop = spec;
  }
  reader.reject_unknown();
  return train;
}

CheckpointSpec parse_checkpoint(TableReader reader, const TrainSpec& train) {
  CheckpointSpec checkpoint;
  checkpoint.every_steps = reader.integer("every_steps", 0, 0, kMaxSteps);
  checkpoint.every_minutes = reader.number("every_minutes", 0.0);
  if (checkpoint.every_minutes < 0.0) reader.fail("every_minutes", "must not be negative (0 disables)");
  if (checkpoint.every_minutes > kMaxEveryMinutes)
    reader.fail("every_minutes", fmt::format("must be at most {} (a year)", kMaxEveryMinutes));
  checkpoint.keep_last = reader.integer("keep_last", 3, 1, kMaxKeepLast);
  checkpoint.keep_best = reader.boolean("keep_best", false);
  checkpoint.sharded = reader.boolean("sharded", train.zero > 0);
  if (train.zero > 0 && !checkpoint.sharded)
    reader.fail("sharded", fmt::format("must be true with train.zero = {}: no rank holds the whole optimizer state",
                                       train.zero));
  checkpoint.async = reader.boolean("async", false);
  reader.reject_unknown();
  return checkpoint;
}

MetricsSpec parse_metrics(TableReader reader) {
  MetricsSpec metrics;
  metrics.prometheus = reader.optional_string("prometheus");
  if (metrics.prometheus && metrics.prometheus->empty())
    reader.fail("prometheus", "must not be empty (leave the key out for no Prometheus file)");
  if (metrics.prometheus) check_path_length(reader, "prometheus", *metrics.prometheus);
  reader.reject_unknown();
  return metrics;
}

// Early stopping and the best checkpoint are judged by validation, so they need one.
void require_validation(const RunSpec& spec, const toml::table& root, const std::string& file) {
  TableReader train = TableReader::child(root, "train", file);
  TableReader checkpoint = TableReader::child(root, "checkpoint", file);
  const auto check = [&](bool used, const TableReader& reader, std::string_view key) {
    if (!used) return;
    if (!spec.data.val)
      reader.fail(key, "is judged by the validation loss: set data.val to a validation set");
    if (spec.train.eval_every == 0)
      reader.fail(key, "is judged by the validation loss: set train.eval_every to evaluate every N steps");
  };
  check(spec.train.early_stop.has_value(), train, "early_stop");
  check(spec.checkpoint.keep_best, checkpoint, "keep_best");
}

}  // namespace

RunSpec parse_run_spec(const toml::table& root, const std::string& file, std::span<const ModelSchema> model_schemas) {
  RunSpec spec;
  spec.model = parse_model(TableReader::child(root, "model", file), model_schemas);
  spec.data = parse_data(TableReader::child(root, "data", file));
  spec.train = parse_train(TableReader::child(root, "train", file));
  spec.checkpoint = parse_checkpoint(TableReader::child(root, "checkpoint", file), spec.train);
  spec.metrics = parse_metrics(TableReader::child(root, "metrics", file));
  require_validation(spec, root, file);
  return spec;
}

void resolve_data_paths(toml::table& root, const std::string& base_dir) {
  const std::pair<const char*, const char*> input_paths[] = {
      {"data", "train"}, {"data", "val"}, {"data", "tokenizer"}, {"train", "init_from"}};
  for (const auto& [table_name, key] : input_paths) {
    toml::table* table = root[table_name].as_table();
    toml::value<std::string>* path = table != nullptr ? (*table)[key].as_string() : nullptr;
    if (path == nullptr || path->get().empty()) continue;
    std::filesystem::path resolved = std::filesystem::path(base_dir) / path->get();
    if (std::filesystem::path(path->get()).is_absolute()) resolved = path->get();
    *path = std::filesystem::absolute(resolved).lexically_normal().string();
  }
}

}  // namespace trainctl
