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

// What a model of a spec holds and computes for given options, worked out without building it
// (`trainctl estimate`); tests/test_estimate.cpp holds it to what a built model allocates.
struct ModelFootprint {
  int64_t parameters = 0;      // floats of the parameter buffer; the gradient buffer has as many
  int64_t largest_tensor = 0;  // floats of the largest parameter tensor
  // What the activations and their gradients are stored in (bf16 for precision bf16).
  ElementType activation_type = ElementType::kF32;
  // The parameters' bf16 compute copy, for precision bf16.
  int64_t compute_copy_bytes = 0;
  // Every other device buffer the model allocates for options.max_examples examples: the
  // batch's device copy, activations and their gradients, the loss totals.
  int64_t activation_bytes = 0;
  // What the CPU ops keep for themselves beside those buffers (thread_local, grown to the
  // largest call and kept): operands widened from bf16, attention score matrices.
  int64_t cpu_scratch_bytes = 0;
  int64_t host_batch_bytes = 0;  // one micro-batch as the data seam hands it to the model
  int64_t terms_per_example = 1;          // Model::loss_terms_per_example()
  const char* term_unit = "samples";      // Model::term_unit()
  double training_flops_per_term = 0.0;   // Model::training_flops_per_term()
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

// A footprint with what Model itself allocates for a model of `tensors` (their shapes) in
// `precision`: the parameters, largest_tensor, the compute copy and the loss totals; the rest for
// the model kind to fill in.
ModelFootprint parameter_footprint(const std::vector<ParameterSlice>& tensors, Precision precision);

// Throws ModelInputError when `device` lacks an op family the model of `spec` needs: checked
// before a device is bound, so that the message does not depend on one being present.
void require_op_families(const ModelSpec& spec, const Device& device);

// Builds the model of `spec` on `device` (require_op_families first).
std::unique_ptr<Model> build_model(const ModelSpec& spec, const Device& device, const ModelOptions& options);

}  // namespace trainctl
