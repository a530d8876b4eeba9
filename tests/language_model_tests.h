// What the language model kinds' unit tests share (test_gpt2, test_llama), on the CPU device:
// batches of random tokens, a model's flat buffers to and from the host, its tensors by name or by
// element, and the checks that hold for every kind: every parameter's gradient against central
// finite differences of the mean loss, layer_done's reports, recompute's bitwise gradients, bf16
// GEMMs near fp32, and next_token_logits against evaluate.
#pragma once

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "batch.h"
#include "device.h"
#include "model.h"
#include "rng.h"

namespace language_model_tests {

inline const trainctl::Device& cpu() { return trainctl::cpu_device(); }

// Random tokens and targets below `vocab`, int32 [examples, context], as data/token_source.h
// gives them.
inline trainctl::Batch token_batch(int64_t examples, int64_t context, int64_t vocab, uint64_t seed) {
  trainctl::Rng rng(seed, trainctl::kSyntheticDataStream);
  trainctl::Batch batch;
  batch.examples = examples;
  for (const char* name : {"tokens", "targets"}) {
    int32_t* values = batch.ints(name, {examples, context});
    for (int64_t i = 0; i < examples * context; ++i)
      values[i] = static_cast<int32_t>(rng.below(static_cast<uint64_t>(vocab)));
  }
  return batch;
}

inline std::vector<float> download(const float* device_values, int64_t count) {
  std::vector<float> host(static_cast<size_t>(count));
  cpu().memory.download(trainctl::Stream{}, host.data(), device_values, host.size() * sizeof(float));
  return host;
}

inline void upload(trainctl::Model& model, const std::vector<float>& values) {
  cpu().memory.upload(trainctl::Stream{}, model.parameters(), values.data(), values.size() * sizeof(float));
}

inline const trainctl::ParameterSlice& slice_named(const trainctl::Model& model, const std::string& name) {
  for (const trainctl::ParameterSlice& slice : model.parameter_layout())
    if (slice.name == name) return slice;
  FAIL("no slice named ", name);
  return model.parameter_layout().front();
}

inline const trainctl::ParameterSlice& slice_holding(const trainctl::Model& model, int64_t index) {
  for (const trainctl::ParameterSlice& slice : model.parameter_layout())
    if (index >= slice.offset && index < slice.offset + slice.count) return slice;
  FAIL("no slice holds parameter ", index);
  return model.parameter_layout().front();
}

inline double mean_loss(trainctl::Model& model, const trainctl::Batch& batch) {
  return model.evaluate(batch).loss_sum / static_cast<double>(batch.examples * model.loss_terms_per_example());
}

// The gradient of the mean loss of `batch` in every parameter, at `parameters`, against central
// differences with `step`: within absolute + relative * |numeric| each; prints the worst.
inline void check_gradients(trainctl::Model& model, const std::vector<float>& parameters,
                            const trainctl::Batch& batch, float step, double absolute, double relative) {
  upload(model, parameters);
  model.zero_gradients();
  model.forward_backward(batch,
                         1.0f / static_cast<float>(batch.examples * model.loss_terms_per_example()));
  const std::vector<float> analytic = download(model.gradients(), model.parameter_count());
  double worst_ratio = -1.0, worst_analytic = 0.0, worst_numeric = 0.0;
  int64_t worst_index = 0, failures = 0;
  std::vector<float> perturbed = parameters;
  for (int64_t i = 0; i < model.parameter_count(); ++i) {
    const float p = parameters[static_cast<size_t>(i)];
    const float up = p + step, down = p - step;
    perturbed[static_cast<size_t>(i)] = up;
    upload(model, perturbed);
    const double plus = mean_loss(model, batch);
    perturbed[static_cast<size_t>(i)] = down;
    upload(model, perturbed);
    const double minus = mean_loss(model, batch);
    perturbed[static_cast<size_t>(i)] = p;
    const double numeric = (plus - minus) / (static_cast<double>(up) - static_cast<double>(down));
    const double gradient = analytic[static_cast<size_t>(i)];
    const double ratio = std::abs(gradient - numeric) / (absolute + relative * std::abs(numeric));
    if (ratio > 1.0) ++failures;
    if (ratio > worst_ratio) {
      worst_ratio = ratio;
      worst_index = i;
      worst_analytic = gradient;
      worst_numeric = numeric;
    }
  }
  const trainctl::ParameterSlice& worst = slice_holding(model, worst_index);
  MESSAGE(fmt::format("{} parameters checked (tolerance {:g} + {:g} |numeric|, step {:g}); worst: {}[{}] analytic "
                      "{:.6g} numeric {:.6g} ({:.2f} of tolerance)",
                      model.parameter_count(), absolute, relative, step, worst.name, worst_index - worst.offset,
                      worst_analytic, worst_numeric, worst_ratio));
  CHECK(failures == 0);
}

// One forward_backward's layer_done reports: every parameter reported exactly once, and the
// reports are the spans from each pair's first tensor to its last, in the pairs' order.
inline void check_layer_done(trainctl::Model& model, const trainctl::Batch& batch,
                             const std::vector<std::pair<std::string, std::string>>& spans) {
  std::vector<std::pair<int64_t, int64_t>> reports;
  std::vector<int> times_reported(static_cast<size_t>(model.parameter_count()), 0);
  model.forward_backward(batch, 0.1f, [&](int64_t offset, int64_t count) {
    reports.emplace_back(offset, count);
    for (int64_t i = offset; i < offset + count; ++i) ++times_reported[static_cast<size_t>(i)];
  });
  CHECK(std::all_of(times_reported.begin(), times_reported.end(), [](int times) { return times == 1; }));
  std::vector<std::pair<int64_t, int64_t>> expected;
  for (const auto& [first, last] : spans) {
    const trainctl::ParameterSlice& from = slice_named(model, first);
    const trainctl::ParameterSlice& to = slice_named(model, last);
    expected.emplace_back(from.offset, to.offset + to.count - from.offset);
  }
  CHECK(reports == expected);
}

// A model that stores its activations and one that recomputes them, both at `parameters`, over
// two micro-batches (the second accumulating onto the first): the same loss, hits and gradients,
// bitwise.
inline void check_recompute_bitwise(trainctl::Model& stored, trainctl::Model& recomputed,
                                    const std::vector<float>& parameters, const trainctl::Batch& first,
                                    const trainctl::Batch& second) {
  for (trainctl::Model* model : {&stored, &recomputed}) upload(*model, parameters);
  for (const trainctl::Batch* batch : {&first, &second}) {
    const trainctl::BatchResult a = stored.forward_backward(*batch, 0.05f);
    const trainctl::BatchResult b = recomputed.forward_backward(*batch, 0.05f);
    CHECK(a.loss_sum == b.loss_sum);
    CHECK(a.correct == b.correct);
  }
  const std::vector<float> a = download(stored.gradients(), stored.parameter_count());
  const std::vector<float> b = download(recomputed.gradients(), recomputed.parameter_count());
  CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
  CHECK(std::any_of(a.begin(), a.end(), [](float g) { return g != 0.0f; }));
}

// The same model in fp32 and with bf16 GEMMs, at `parameters`: losses within 1e-2 relative, not equal.
inline void check_bf16_near_fp32(trainctl::Model& fp32_model, trainctl::Model& bf16_model,
                                 const std::vector<float>& parameters, const trainctl::Batch& batch) {
  for (trainctl::Model* model : {&fp32_model, &bf16_model}) upload(*model, parameters);
  const double fp32_loss = fp32_model.forward_backward(batch, 1.0f).loss_sum;
  const double bf16_loss = bf16_model.forward_backward(batch, 1.0f).loss_sum;
  MESSAGE(fmt::format("loss sum: fp32 {:.9g}, bf16 {:.9g} (relative difference {:.3g})", fp32_loss, bf16_loss,
                      std::abs(bf16_loss - fp32_loss) / fp32_loss));
  CHECK(bf16_loss != fp32_loss);
  CHECK(std::abs(bf16_loss - fp32_loss) <= 1e-2 * fp32_loss);
}

// next_token_logits of each prefix of a one-example batch: a softmax over them gives evaluate's
// token losses (1e-6 relative) and argmax hits. The model is causal: the logits at position t
// depend on tokens [0, t] alone, so the prefix of length t + 1 predicts target t.
inline void check_next_token_logits(trainctl::LanguageModel& model, const trainctl::Batch& batch) {
  const int32_t* tokens = batch.ints("tokens");
  const int32_t* targets = batch.ints("targets");
  double loss_sum = 0.0;
  int64_t correct = 0;
  std::vector<float> logits(static_cast<size_t>(model.vocab_size()));
  for (int64_t length = 1; length <= model.context_size(); ++length) {
    model.next_token_logits(tokens, length, logits.data());
    const double max_logit = *std::max_element(logits.begin(), logits.end());
    double denominator = 0.0;
    for (float logit : logits) denominator += std::exp(logit - max_logit);
    const int32_t target = targets[length - 1];
    loss_sum += std::log(denominator) - (logits[static_cast<size_t>(target)] - max_logit);
    correct += std::max_element(logits.begin(), logits.end()) - logits.begin() == target;
  }
  const trainctl::BatchResult evaluated = model.evaluate(batch);
  MESSAGE(fmt::format("loss sum from next_token_logits {:.9g}, from evaluate {:.9g} (relative difference {:.3g}, "
                      "tolerance 1e-6)", loss_sum, evaluated.loss_sum,
                      std::abs(loss_sum - evaluated.loss_sum) / evaluated.loss_sum));
  CHECK(std::abs(loss_sum - evaluated.loss_sum) <= 1e-6 * evaluated.loss_sum);
  CHECK(correct == evaluated.correct);
}

}  // namespace language_model_tests
