// What the language model kinds share: see language_model.h.
#include "language_model.h"

#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "token_file.h"
#include "token_source.h"

namespace trainctl {

namespace {

// The header of every shard `pattern` names, each holding at least one window.
std::vector<TokenFileHeader> checked_token_headers(const std::string& pattern, int64_t block_size) {
  std::vector<TokenFileHeader> headers;
  for (const std::string& path : token_file_paths(pattern)) {
    require_regular_file(path);
    headers.push_back(read_token_header(path));
    require_one_window(path, headers.back().count, block_size);
  }
  return headers;
}

}  // namespace

int64_t upload_token_batch(const Device& device, Stream stream, const Batch& batch, const TokenWindows& windows,
                           int32_t* tokens, int32_t* targets) {
  const int64_t examples = batch.examples;
  if (examples < 1 || examples > windows.max_examples)
    throw std::logic_error(fmt::format("a batch of {} sequences, outside [1, {}]", examples, windows.max_examples));
  for (const char* name : {"tokens", "targets"}) {
    const HostTensor& tensor = batch.tensor(name);
    if (tensor.dtype != DType::kInt32 || tensor.shape != std::vector<int64_t>{examples, windows.block_size})
      throw std::logic_error(
          fmt::format("batch tensor \"{}\" is not int32 [{}, {}]", name, examples, windows.block_size));
    // The embedding and the loss index with them: a bad id would read outside the tensors.
    for (int32_t token : tensor.ints)
      if (token < 0 || token >= windows.vocab_size)
        throw std::logic_error(fmt::format("batch tensor \"{}\" holds token {}, outside [0, {})", name, token,
                                           windows.vocab_size));
  }
  const size_t bytes = static_cast<size_t>(examples * windows.block_size) * sizeof(int32_t);
  device.memory.upload(stream, tokens, batch.ints("tokens"), bytes);
  device.memory.upload(stream, targets, batch.ints("targets"), bytes);
  return examples;
}

void download_logits(const Device& device, Stream stream, ConstTypedPtr device_logits, int64_t vocab,
                     float* logits) {
  std::vector<std::byte> host(static_cast<size_t>(vocab) * element_bytes(device_logits.type));
  device.memory.download(stream, host.data(), device_logits.data, host.size());
  for (int64_t i = 0; i < vocab; ++i)
    logits[i] = device_logits.type == ElementType::kBf16 ? to_float(reinterpret_cast<const Bf16*>(host.data())[i])
                                                         : reinterpret_cast<const float*>(host.data())[i];
}

std::unique_ptr<BatchSource> open_token_shards(const std::string& pattern, int64_t block_size, int64_t vocab_size) {
  return std::make_unique<TokenSource>(pattern, block_size, vocab_size);
}

void check_token_shards(const std::string& pattern, int64_t block_size) {
  checked_token_headers(pattern, block_size);
}

DataFootprint token_shards_footprint(const std::string& pattern, int64_t block_size) {
  DataFootprint footprint;
  footprint.mapped = true;  // TokenSource maps the shards
  for (const auto [format, count] : checked_token_headers(pattern, block_size)) {
    footprint.bytes += count * bytes_per_token(format);
    footprint.examples += (count - 1) / block_size;  // its windows
  }
  return footprint;
}

ModelFootprint language_model_footprint(const std::vector<ParameterSlice>& tensors, const ModelOptions& options,
                                        int64_t block_size, const std::function<void(BufferPlan&)>& plan_buffers) {
  constexpr auto kFloat = static_cast<int64_t>(sizeof(float)), kInt = static_cast<int64_t>(sizeof(int32_t));
  ModelFootprint footprint = parameter_footprint(tensors, options.precision);
  BufferPlan plan(nullptr, footprint.activation_type);
  plan_buffers(plan);
  footprint.activation_bytes += plan.bytes();
  footprint.cpu_scratch_bytes = 3 * block_size * block_size * kFloat;
  footprint.host_batch_bytes = 2 * options.max_examples * block_size * kInt;
  footprint.terms_per_example = block_size;
  footprint.term_unit = "tokens";
  return footprint;
}

}  // namespace trainctl
