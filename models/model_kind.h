// What a model kind is, as one bundle: its [model] schema, what its model needs of a device, its
// builder, its parameter layout, its memory footprint, its data, and its config.json (which
// `trainctl export` writes and `train.init_from` checks). Each kind defines one in a folder of its own (models/<kind>/<kind>_kind.cpp) and
// includes only this, the model seam and the data seam; the registry (registry.h) is the list of
// the kinds and includes them.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "batch.h"
#include "device.h"
#include "model.h"
#include "train_spec.h"

namespace trainctl {

// What a data file holds in memory once open_data has read it, from its headers alone.
struct DataFootprint {
  int64_t bytes = 0;
  int64_t examples = 0;  // what the sampler draws from
  // The bytes are the files' pages, mapped: in every rank's resident set, but held once per node
  // (token shards), rather than read into each rank (classification data).
  bool mapped = false;
};

// One field of a kind's config.json, declared once for both directions: `trainctl export` writes
// every field, and `train.init_from` compares a directory's config.json with the fields that
// stand for a [model] key (config_json.h).
struct ConfigJsonField {
  std::string name;      // config.json's key
  nlohmann::json value;  // what the [model] table makes of it
  // The [model] key it stands for; empty for a field written but never compared (the class's name,
  // dropouts, max_position_embeddings, token ids: nothing a model's tensors depend on here).
  std::string model_key;
  // What the file's reader (transformers, for a Hugging Face class) takes when config.json lacks
  // the field; none: a config.json without it is refused.
  std::optional<nlohmann::json> when_absent;
};

struct ModelKind {
  ModelSchema schema;  // model.kind, and how its [model] table is read
  std::vector<OptionalFamily> needs;
  std::unique_ptr<Model> (*build)(const ModelSpec& spec, const Device& device, const ModelOptions& options);
  // The model's parameter tensors in state_dict order, which build lays out (laid_out).
  std::vector<ParameterSlice> (*parameter_tensors)(const ModelSpec& spec);
  // What build would allocate for `options`, counted with the plan build allocates with
  // (BufferPlan), without building.
  ModelFootprint (*footprint)(const ModelSpec& spec, const ModelOptions& options);
  // Opens `path` (data.train or data.val, after path resolution) as this model's data, checked
  // against `spec`; throws DataError naming the file and the problem.
  std::unique_ptr<BatchSource> (*open_data)(const std::string& path, const ModelSpec& spec);
  // The cheap part of open_data, headers only (the file there, its types and shapes fitting
  // `spec`), no data read: what can be checked before a job waits in a queue. Throws DataError.
  void (*check_data)(const std::string& path, const ModelSpec& spec);
  // open_data's memory for `path`, read from headers as check_data reads them. Throws DataError.
  DataFootprint (*data_footprint)(const std::string& path, const ModelSpec& spec);
  // The fields of its config.json, in the order they are compared: Hugging Face's config, for a
  // kind whose tensors carry the names of a transformers class, so that from_pretrained loads an
  // export and init_from checks a download; a kind's own fields otherwise. Export adds
  // torch_dtype.
  std::vector<ConfigJsonField> (*config_json)(const ModelSpec& spec);
};

}  // namespace trainctl
