// What the language model kinds' unit tests share (test_gpt2, test_llama), on the CPU device:
// batches of random tokens, a model's flat buffers to and from the host, its tensors by name or by
// element, and the check of every parameter's gradient against central finite differences of the
// mean loss.
#pragma once

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <string>
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

}  // namespace language_model_tests
