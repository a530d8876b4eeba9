// The model registry: model.kind -> how to build that model and open its data. The trainer, the
// checkpoint tools and `trainctl sample` go through it and name no model themselves.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "bad_input.h"
#include "batch.h"
#include "device.h"
#include "model.h"
#include "train_spec.h"

namespace trainctl {

// A model or its data cannot work as configured (a device without an op family the model needs,
// a dataset that does not fit the model): exit code 2 in both programs.
class ModelInputError : public BadInput {
 public:
  using BadInput::BadInput;
};

// What a data file holds in memory once open_data has read it, from its headers alone.
struct DataFootprint {
  int64_t bytes = 0;
  int64_t examples = 0;  // what the sampler draws from
  // The bytes are the files' pages, mapped: in every rank's resident set, but held once per node
  // (token shards), rather than read into each rank (classification data).
  bool mapped = false;
};

struct ModelKind {
  const char* name;  // model.kind
  std::vector<OptionalFamily> needs;
  std::unique_ptr<Model> (*build)(const ModelSpec& spec, const Device& device, const ModelOptions& options);
  // The model's parameter tensors in state_dict order, which build lays out (laid_out).
  std::vector<ParameterSlice> (*parameter_tensors)(const ModelSpec& spec);
  // What build would allocate for `options`, worked out without building.
  ModelFootprint (*footprint)(const ModelSpec& spec, const ModelOptions& options);
  // Opens `path` (data.train or data.val, after path resolution) as this model's data, checked
  // against `spec`; throws DataError naming the file and the problem.
  std::unique_ptr<BatchSource> (*open_data)(const std::string& path, const ModelSpec& spec);
  // The cheap part of open_data, headers only (the file there, its types and shapes fitting
  // `spec`), no data read: what can be checked before a job waits in a queue. Throws DataError.
  void (*check_data)(const std::string& path, const ModelSpec& spec);
  // open_data's memory for `path`, read from headers as check_data reads them. Throws DataError.
  DataFootprint (*data_footprint)(const std::string& path, const ModelSpec& spec);
};

const ModelKind& model_kind(const ModelSpec& spec);

// Throws ModelInputError when `device` lacks an op family the model of `spec` needs: checked
// before a device is bound, so that the message does not depend on one being present.
void require_op_families(const ModelSpec& spec, const Device& device);

// The flat layout of the parameters of a model of `spec`, as a built one's parameter_layout().
std::vector<ParameterSlice> parameter_layout(const ModelSpec& spec);

// Builds the model of `spec` on `device` (require_op_families first).
std::unique_ptr<Model> build_model(const ModelSpec& spec, const Device& device, const ModelOptions& options);

}  // namespace trainctl
