// What the language model kinds (GPT-2, Llama) share beside the model seam: a batch of token
// windows checked and uploaded, the next token's logits read back, and their data, llm.c's token
// shards, for the kind bundle (model_kind.h).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "batch.h"
#include "device.h"
#include "model_kind.h"

namespace trainctl {

// The sizes of a language model that its batches and data are checked against.
struct TokenWindows {
  int64_t block_size = 0;   // tokens per example
  int64_t vocab_size = 0;   // every token below it
  int64_t max_examples = 0;  // the most examples a batch may have
};

// Checks `batch` ("tokens" and "targets", int32 [examples, block_size], every token below
// vocab_size: the embedding and the loss index with them) and uploads both to the device buffers
// of max_examples rows; returns its examples. Throws std::logic_error for a batch that breaks
// that (a bug of the caller's, not bad input).
int64_t upload_token_batch(const Device& device, Stream stream, const Batch& batch, const TokenWindows& windows,
                           int32_t* tokens, int32_t* targets);

// logits[0, vocab) from the device's `device_logits` (f32 or bf16), a host synchronisation.
void download_logits(const Device& device, Stream stream, ConstTypedPtr device_logits, int64_t vocab,
                     float* logits);

// A language model's data: the token shards `pattern` names, each window block_size + 1 tokens.
std::unique_ptr<BatchSource> open_token_shards(const std::string& pattern, int64_t block_size, int64_t vocab_size);
void check_token_shards(const std::string& pattern, int64_t block_size);
DataFootprint token_shards_footprint(const std::string& pattern, int64_t block_size);

// The kind bundle's open_data, check_data and data_footprint (model_kind.h) for a spec of type
// Spec (its block_size and vocab_size).
template <typename Spec>
std::unique_ptr<BatchSource> open_tokens_of(const std::string& pattern, const ModelSpec& spec) {
  return open_token_shards(pattern, spec.as<Spec>().block_size, spec.as<Spec>().vocab_size);
}
template <typename Spec>
void check_tokens_of(const std::string& pattern, const ModelSpec& spec) {
  check_token_shards(pattern, spec.as<Spec>().block_size);
}
template <typename Spec>
DataFootprint tokens_footprint_of(const std::string& pattern, const ModelSpec& spec) {
  return token_shards_footprint(pattern, spec.as<Spec>().block_size);
}

// What a language model of `tensors` holds and computes for `options` besides its kind's
// particulars: parameter_footprint, the buffers its plan counts (plan_buffers with a counting
// BufferPlan), the CPU attention's scratch (a seq x seq matrix of probabilities for forward, two
// for backward), a batch of tokens and targets, block_size "tokens" an example. The kind adds
// its bf16 GEMMs' scratch and its FLOPs.
ModelFootprint language_model_footprint(const std::vector<ParameterSlice>& tensors, const ModelOptions& options,
                                        int64_t block_size, const std::function<void(BufferPlan&)>& plan_buffers);

}  // namespace trainctl
