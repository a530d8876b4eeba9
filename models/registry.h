// The model registry: the list of the model kinds a program knows (model_kinds.cpp, included by
// the CLI and the runtime; a test links a list of its own to register a kind from the test tree),
// and what goes through it. The trainer, the config reader, the checkpoint tools and the CLI's
// commands name no model kind themselves.
#pragma once

#include <memory>
#include <span>
#include <string>

#include "bad_input.h"
#include "model_kind.h"

namespace trainctl {

// A model or its data cannot work as configured (a device without an op family the model needs,
// a dataset that does not fit the model): exit code 2 in both programs.
class ModelInputError : public BadInput {
 public:
  using BadInput::BadInput;
};

// The kinds this program was linked with, the default model.kind first: defined by the list it
// links (model_kinds.cpp, or a test's), so that a kind is added without an edit here.
std::span<const ModelKind* const> model_kinds();

// Their schemas, in the same order: what the config reader reads [model] with.
std::span<const ModelSchema> model_schemas();

// parse_run_spec (train_spec.h) with the kinds of this program.
RunSpec parse_run_spec(const toml::table& root, const std::string& file);

const ModelKind& model_kind(const ModelSpec& spec);

// Throws ModelInputError when `device` lacks an op family the model of `spec` needs: checked
// before a device is bound, so that the message does not depend on one being present.
void require_op_families(const ModelSpec& spec, const Device& device);

// The flat layout of the parameters of a model of `spec`, as a built one's parameter_layout().
std::vector<ParameterSlice> parameter_layout(const ModelSpec& spec);

// Builds the model of `spec` on `device` (require_op_families first).
std::unique_ptr<Model> build_model(const ModelSpec& spec, const Device& device, const ModelOptions& options);

// Opens `path`, the config's data.`key` ("train" or "val"), as the data of a model of `spec`;
// throws BadInput naming the key, the file and the problem.
std::unique_ptr<BatchSource> open_model_data(const ModelSpec& spec, const char* key, const std::string& path);

}  // namespace trainctl
