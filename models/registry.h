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

struct ModelOptions {
  int64_t max_examples = 1;  // the largest batch (micro_batch) forward_backward and evaluate get
  Precision precision = Precision::kFp32;
  bool recompute = false;
  Stream stream{};
};

struct ModelKind {
  const char* name;  // model.kind
  std::vector<OpFamily> needs;
  std::unique_ptr<Model> (*build)(const ModelSpec& spec, const Device& device, const ModelOptions& options);
  // Opens `path` (data.train or data.val, after path resolution) as this model's data, checked
  // against `spec`; throws DataError naming the file and the problem.
  std::unique_ptr<BatchSource> (*open_data)(const std::string& path, const ModelSpec& spec);
  // The cheap part of open_data, headers only (the file there, its types and shapes fitting
  // `spec`), no data read: what can be checked before a job waits in a queue. Throws DataError.
  void (*check_data)(const std::string& path, const ModelSpec& spec);
};

const ModelKind& model_kind(const ModelSpec& spec);

// Throws ModelInputError when `device` lacks an op family the model of `spec` needs: checked
// before a device is bound, so that the message does not depend on one being present.
void require_op_families(const ModelSpec& spec, const Device& device);

// Builds the model of `spec` on `device` (require_op_families first).
std::unique_ptr<Model> build_model(const ModelSpec& spec, const Device& device, const ModelOptions& options);

}  // namespace trainctl
