// A model's config.json, both ways, from the one list of fields its kind declares
// (ModelKind::config_json): the file `trainctl export` writes beside the weights, and the check
// of a downloaded one against [model] that `train.init_from` makes before it reads any weights.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "train_spec.h"

namespace trainctl {

// Every field of the kind's config.json, and torch_dtype: the dtype the weights beside it are
// stored in ("float32", "bfloat16").
nlohmann::json exported_config_json(const ModelSpec& spec, const std::string& torch_dtype);

// When `init_from` is a directory holding a config.json, compares that with `spec`, field by
// field in the kind's order, only the fields that stand for a [model] key; a field the file
// lacks, or states as null, counts as the value its reader takes then (rope_scaling: null, or
// absent, is no scaling); transformers 5's rope_parameters is read as rope_theta and rope_scaling,
// as transformers 5 reads it. Throws BadInput naming the file and the first field that differs, with
// both values: "train.init_from: DIR/config.json: n_layer is 12 but the config's model.n_layer
// is 2"; or that the file cannot be read or is not a JSON object.
void check_init_from_config(const std::string& init_from, const ModelSpec& spec);

}  // namespace trainctl
