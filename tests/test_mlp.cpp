// Tests for the MLP (models/mlp/mlp.cpp) and the CPU kernels it runs on (kernels/cpu/):
// analytic gradients against central finite differences of the mean loss for every parameter,
// with ReLU and with GELU; the PyTorch nn.Sequential parameter layout; gradient accumulation
// over micro-batches; deterministic, bounded initialisation; and the kernels directly:
// softmax cross-entropy on a hand-computed example, GELU/ReLU forward and backward against
// their formulas.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "device.h"
#include "mlp/mlp.h"
#include "rng.h"

using trainctl::Activation;
using trainctl::Mlp;
using ModelSpec = trainctl::MlpSpec;

namespace {

const trainctl::Device& cpu() { return trainctl::cpu_device(); }

// The model every test uses: 5 -> 7 -> 6 -> 3, 111 parameters.
ModelSpec small_spec(Activation activation) {
  ModelSpec spec;
  spec.inputs = 5;
  spec.hidden = {7, 6};
  spec.classes = 3;
  spec.activation = activation;
  return spec;
}

struct Batch {
  std::vector<float> x;
  std::vector<int32_t> y;
  int64_t rows = 0;
  int64_t inputs = 0;
  // Rows [first, first + count) as the data seam hands them to a model.
  trainctl::Batch rows_of(int64_t first, int64_t count) const {
    trainctl::Batch batch;
    batch.examples = count;
    std::copy_n(x.begin() + first * inputs, count * inputs, batch.floats("x", {count, inputs}));
    std::copy_n(y.begin() + first, count, batch.ints("y", {count}));
    return batch;
  }
  trainctl::Batch all() const { return rows_of(0, rows); }
};

// Standard-normal features and labels that cover every class.
Batch make_batch(const ModelSpec& spec, int64_t rows, uint64_t seed) {
  trainctl::Rng rng(seed, trainctl::kSyntheticDataStream);
  Batch batch;
  batch.rows = rows;
  batch.inputs = spec.inputs;
  for (int64_t i = 0; i < rows * spec.inputs; ++i) batch.x.push_back(static_cast<float>(rng.normal()));
  for (int64_t i = 0; i < rows; ++i) batch.y.push_back(static_cast<int32_t>((i * 2) % spec.classes));
  return batch;
}

std::vector<float> download(const float* device_values, int64_t count) {
  std::vector<float> host(static_cast<size_t>(count));
  cpu().memory.download(trainctl::Stream{}, host.data(), device_values, host.size() * sizeof(float));
  return host;
}

void set_parameter(Mlp& model, int64_t index, float value) {
  cpu().memory.upload(trainctl::Stream{}, model.parameters() + index, &value, sizeof(float));
}

double mean_loss(Mlp& model, const Batch& batch) {
  return model.evaluate(batch.all()).loss_sum / static_cast<double>(batch.rows);
}

std::vector<float> analytic_gradients(Mlp& model, const Batch& batch) {
  model.zero_gradients();
  model.forward_backward(batch.all(), 1.0f / static_cast<float>(batch.rows));
  return download(model.gradients(), model.parameter_count());
}

const trainctl::ParameterSlice& slice_of(const Mlp& model, int64_t index) {
  for (const auto& slice : model.parameter_layout())
    if (index >= slice.offset && index < slice.offset + slice.count) return slice;
  FAIL("no slice holds parameter ", index);
  return model.parameter_layout().front();
}

template <size_t N>
std::array<float, N> filled(float value) {
  std::array<float, N> values;
  values.fill(value);
  return values;
}

double gelu_reference(double z) { return 0.5 * z * (1.0 + std::erf(z / std::sqrt(2.0))); }
double gelu_derivative_reference(double z) {
  return 0.5 * (1.0 + std::erf(z / std::sqrt(2.0))) + z * std::exp(-0.5 * z * z) / std::sqrt(2.0 * M_PI);
}

// A double-precision forward pass of the same network, written from the layout alone: the
// mean loss, and which ReLUs are on, so that the ReLU check can skip a parameter whose
// perturbation flips one (the loss has a kink there and finite differences mean nothing).
struct ReferencePass {
  double mean_loss = 0.0;
  std::vector<bool> active;  // z > 0 for every hidden unit of every row
};

ReferencePass reference_forward(const Mlp& model, const ModelSpec& spec, const std::vector<float>& parameters,
                                const Batch& batch) {
  ReferencePass pass;
  const auto& layout = model.parameter_layout();
  std::vector<double> input(batch.x.begin(), batch.x.end());
  for (size_t layer = 0; layer < layout.size(); layer += 2) {
    const trainctl::ParameterSlice& weight = layout[layer];
    const trainctl::ParameterSlice& bias = layout[layer + 1];
    const int64_t out = weight.shape[0], in = weight.shape[1];
    const bool hidden = layer + 2 < layout.size();
    std::vector<double> output(static_cast<size_t>(batch.rows * out));
    for (int64_t r = 0; r < batch.rows; ++r)
      for (int64_t o = 0; o < out; ++o) {
        double z = parameters[static_cast<size_t>(bias.offset + o)];
        for (int64_t i = 0; i < in; ++i)
          z += static_cast<double>(parameters[static_cast<size_t>(weight.offset + o * in + i)]) *
               input[static_cast<size_t>(r * in + i)];
        if (hidden && spec.activation == Activation::kRelu) pass.active.push_back(z > 0.0);
        if (hidden) z = spec.activation == Activation::kRelu ? std::max(z, 0.0) : gelu_reference(z);
        output[static_cast<size_t>(r * out + o)] = z;
      }
    input = std::move(output);
  }
  for (int64_t r = 0; r < batch.rows; ++r) {
    const auto row = input.begin() + r * spec.classes;
    const double max_logit = *std::max_element(row, row + spec.classes);
    double denominator = 0.0;
    for (int64_t c = 0; c < spec.classes; ++c) denominator += std::exp(row[c] - max_logit);
    pass.mean_loss += std::log(denominator) - (row[batch.y[static_cast<size_t>(r)]] - max_logit);
  }
  pass.mean_loss /= static_cast<double>(batch.rows);
  return pass;
}

struct FiniteDifferenceSettings {
  float step;                 // h
  double absolute_tolerance;  // allowed |analytic - numeric| = abs + rel * |numeric|
  double relative_tolerance;
};

struct FiniteDifferenceReport {
  int64_t checked = 0;
  int64_t skipped_at_kinks = 0;
  int64_t failures = 0;
  std::vector<std::string> slices_checked;
  // The element closest to (or furthest past) its tolerance.
  double worst_ratio = -1.0;
  std::string worst_name;
  int64_t worst_index = 0;
  double worst_analytic = 0.0, worst_numeric = 0.0;
};

// Whether moving parameter `index` to `value` switches any ReLU on or off.
bool flips_a_relu(const Mlp& model, const ModelSpec& spec, std::vector<float> parameters, const Batch& batch,
                  int64_t index, float value, const std::vector<bool>& active) {
  parameters[static_cast<size_t>(index)] = value;
  return reference_forward(model, spec, parameters, batch).active != active;
}

FiniteDifferenceReport compare_with_finite_differences(Mlp& model, const ModelSpec& spec, const Batch& batch,
                                                       const FiniteDifferenceSettings& settings) {
  const std::vector<float> analytic = analytic_gradients(model, batch);
  const std::vector<float> original = download(model.parameters(), model.parameter_count());
  const std::vector<bool> active = reference_forward(model, spec, original, batch).active;
  FiniteDifferenceReport report;
  for (int64_t i = 0; i < model.parameter_count(); ++i) {
    const float p = original[static_cast<size_t>(i)];
    const float up = p + settings.step, down = p - settings.step;
    if (flips_a_relu(model, spec, original, batch, i, up, active) ||
        flips_a_relu(model, spec, original, batch, i, down, active)) {
      ++report.skipped_at_kinks;
      continue;
    }
    set_parameter(model, i, up);
    const double plus = mean_loss(model, batch);
    set_parameter(model, i, down);
    const double minus = mean_loss(model, batch);
    set_parameter(model, i, p);
    // Divide by the step actually taken in float, not the nominal 2h.
    const double numeric = (plus - minus) / (static_cast<double>(up) - static_cast<double>(down));
    const double error = std::abs(analytic[static_cast<size_t>(i)] - numeric);
    const double ratio = error / (settings.absolute_tolerance + settings.relative_tolerance * std::abs(numeric));
    const trainctl::ParameterSlice& slice = slice_of(model, i);
    ++report.checked;
    if (ratio > 1.0) ++report.failures;
    if (std::find(report.slices_checked.begin(), report.slices_checked.end(), slice.name) == report.slices_checked.end())
      report.slices_checked.push_back(slice.name);
    if (ratio > report.worst_ratio) {
      report.worst_ratio = ratio;
      report.worst_name = slice.name;
      report.worst_index = i - slice.offset;
      report.worst_analytic = analytic[static_cast<size_t>(i)];
      report.worst_numeric = numeric;
    }
  }
  return report;
}

// Model 5 -> 7 -> 6 -> 3 on 4 rows: every parameter is compared (111, all six tensors).
void check_gradients_match(Activation activation, const FiniteDifferenceSettings& settings,
                           int64_t allowed_kinks) {
  const ModelSpec spec = small_spec(activation);
  const Batch batch = make_batch(spec, 4, 17);
  Mlp model(spec, cpu(), {batch.rows, trainctl::Precision::kFp32});
  model.init_parameters(3);
  const std::vector<float> parameters = download(model.parameters(), model.parameter_count());
  // The reference forward agrees with the model's before it is trusted to find kinks.
  REQUIRE(mean_loss(model, batch) ==
          doctest::Approx(reference_forward(model, spec, parameters, batch).mean_loss).epsilon(1e-5));

  const FiniteDifferenceReport report = compare_with_finite_differences(model, spec, batch, settings);
  MESSAGE(std::string(trainctl::activation_name(activation)), ": checked ", report.checked, " parameters, skipped ",
          report.skipped_at_kinks, " at ReLU kinks; worst ", report.worst_name, "[", report.worst_index,
          "]: analytic ", report.worst_analytic, ", numeric ", report.worst_numeric, " (",
          report.worst_ratio, " of the tolerance ", settings.absolute_tolerance, " + ",
          settings.relative_tolerance, " * |numeric|)");
  CHECK(report.failures == 0);
  CHECK(report.skipped_at_kinks <= allowed_kinks);
  CHECK(report.checked >= 100);
  CHECK(report.slices_checked ==
        std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias"});
}

}  // namespace

TEST_CASE("GELU gradients match central finite differences for every parameter") {
  // GELU is smooth, so every parameter is checked. With h = 1e-2 the truncation error is
  // O(h^2) and float rounding of the loss adds ~1e-6; the worst element uses under a tenth of
  // abs 3e-5 + rel 3e-3, while gradients off by 2% already fail.
  check_gradients_match(Activation::kGelu, {1e-2f, 3e-5, 3e-3}, 0);
}

TEST_CASE("ReLU gradients match central finite differences away from kinks") {
  // Between kinks the loss is smooth in each parameter; a parameter whose +-h flips a ReLU
  // (found by the reference forward) is skipped; with h = 1e-3 that is at most 8 of 111.
  check_gradients_match(Activation::kRelu, {1e-3f, 1e-4, 3e-3}, 8);
}

TEST_CASE("parameters are laid out as PyTorch's nn.Sequential state_dict") {
  Mlp model(small_spec(Activation::kRelu), cpu(), {1, trainctl::Precision::kFp32});
  const auto& layout = model.parameter_layout();
  REQUIRE(layout.size() == 6);
  const std::vector<std::string> names{"0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias"};
  const std::vector<std::vector<int64_t>> shapes{{7, 5}, {7}, {6, 7}, {6}, {3, 6}, {3}};
  const std::vector<int64_t> offsets{0, 35, 42, 84, 90, 108};
  const std::vector<int64_t> counts{35, 7, 42, 6, 18, 3};
  for (size_t i = 0; i < layout.size(); ++i) {
    CAPTURE(i);
    CHECK(layout[i].name == names[i]);
    CHECK(layout[i].shape == shapes[i]);
    CHECK(layout[i].offset == offsets[i]);
    CHECK(layout[i].count == counts[i]);
  }
  CHECK(model.parameter_count() == 111);
}

TEST_CASE("a model without hidden layers is one Linear") {
  ModelSpec spec = small_spec(Activation::kGelu);
  spec.hidden.clear();
  Mlp model(spec, cpu(), {1, trainctl::Precision::kFp32});
  REQUIRE(model.parameter_layout().size() == 2);
  CHECK(model.parameter_layout()[0].name == "0.weight");
  CHECK(model.parameter_layout()[0].shape == std::vector<int64_t>{3, 5});
  CHECK(model.parameter_layout()[1].name == "0.bias");
  CHECK(model.parameter_layout()[1].offset == 15);
  CHECK(model.parameter_count() == 18);
}

TEST_CASE("gradients accumulated over two half batches equal one whole batch") {
  const ModelSpec spec = small_spec(Activation::kGelu);
  const Batch batch = make_batch(spec, 4, 29);
  const float scale = 1.0f / 4.0f;
  Mlp model(spec, cpu(), {4, trainctl::Precision::kFp32});
  model.init_parameters(8);

  model.zero_gradients();
  const trainctl::BatchResult whole = model.forward_backward(batch.rows_of(0, 4), scale);
  const std::vector<float> whole_gradients = download(model.gradients(), model.parameter_count());

  model.zero_gradients();
  const trainctl::BatchResult first = model.forward_backward(batch.rows_of(0, 2), scale);
  const trainctl::BatchResult second =
      model.forward_backward(batch.rows_of(2, 2), scale);
  const std::vector<float> accumulated = download(model.gradients(), model.parameter_count());

  CHECK(first.loss_sum + second.loss_sum == doctest::Approx(whole.loss_sum).epsilon(1e-9));
  CHECK(first.correct + second.correct == whole.correct);
  // Summing 2 + 2 rows instead of 4 only reorders float additions: relative 1e-6 of the
  // largest gradient bounds the difference.
  float largest = 0.0f;
  for (float g : whole_gradients) largest = std::max(largest, std::abs(g));
  REQUIRE(largest > 0.0f);
  for (size_t i = 0; i < whole_gradients.size(); ++i) {
    CAPTURE(i);
    CHECK(std::abs(accumulated[i] - whole_gradients[i]) <= 1e-6f * largest);
  }
}

TEST_CASE("forward_backward rejects a batch larger than the model was sized for") {
  const ModelSpec spec = small_spec(Activation::kRelu);
  const Batch batch = make_batch(spec, 4, 1);
  Mlp model(spec, cpu(), {3, trainctl::Precision::kFp32});
  CHECK_THROWS_WITH_AS(model.forward_backward(batch.rows_of(0, 4), 1.0f), "batch of 4 rows exceeds 3",
                       std::logic_error);
}

TEST_CASE("evaluate rejects a batch larger than the model was sized for") {
  const ModelSpec spec = small_spec(Activation::kRelu);
  const Batch batch = make_batch(spec, 2, 1);
  Mlp model(spec, cpu(), {1, trainctl::Precision::kFp32});
  CHECK_THROWS_WITH_AS(model.evaluate(batch.rows_of(0, 2)), "batch of 2 rows exceeds 1",
                       std::logic_error);
}

TEST_CASE("init_parameters is deterministic per seed and uniform within 1/sqrt(fan_in)") {
  const ModelSpec spec = small_spec(Activation::kRelu);
  Mlp model(spec, cpu(), {1, trainctl::Precision::kFp32});
  model.init_parameters(1234);
  const std::vector<float> first = download(model.parameters(), model.parameter_count());
  model.init_parameters(1234);
  CHECK(download(model.parameters(), model.parameter_count()) == first);
  model.init_parameters(1235);
  CHECK(download(model.parameters(), model.parameter_count()) != first);

  // Layer by layer, weights then bias, from the weight-init stream of the seed.
  trainctl::Rng rng(1234, trainctl::kWeightInitStream);
  const float bound0 = 1.0f / std::sqrt(5.0f);
  CHECK(first[0] == rng.uniform(-bound0, bound0));
  CHECK(first[1] == rng.uniform(-bound0, bound0));

  for (const auto& slice : model.parameter_layout()) {
    CAPTURE(slice.name);
    const int64_t fan_in = slice.name.starts_with("0.") ? 5 : slice.name.starts_with("2.") ? 7 : 6;
    const float bound = 1.0f / std::sqrt(static_cast<float>(fan_in));
    const auto begin = first.begin() + slice.offset;
    const auto [low, high] = std::minmax_element(begin, begin + slice.count);
    CHECK(*low >= -bound);
    CHECK(*high < bound);
    if (slice.count >= 18) {  // enough draws to spread over the interval
      CHECK(*low < -bound / 2);
      CHECK(*high > bound / 2);
    }
  }
}

TEST_CASE("softmax cross-entropy on a hand-computed 2x3 example") {
  // Row 0: logits [1, 2, 3], label 2: loss = log(e^1 + e^2 + e^3) - 3 = 0.4076059644443806,
  //        argmax 2 = label; softmax [0.0900306, 0.2447285, 0.6652410].
  // Row 1: logits [2, 0, -1], label 1: loss = log(e^2 + 1 + e^-1) - 0 = 2.1698460195562856,
  //        argmax 0 != label; softmax [0.8437947, 0.1141952, 0.0420101].
  const std::vector<float> logits{1.0f, 2.0f, 3.0f, 2.0f, 0.0f, -1.0f};
  const std::vector<int32_t> labels{2, 1};
  // The gradient is written over the logits.
  std::vector<float> grad = logits;
  double loss_sum = 0.0;
  int64_t correct = 0;
  cpu().loss.softmax_cross_entropy(trainctl::Stream{}, grad.data(), labels.data(), 2, 3, 3, 0.5f, &loss_sum, &correct);
  CHECK(loss_sum == doctest::Approx(0.4076059644443806 + 2.1698460195562856).epsilon(1e-7));
  CHECK(correct == 1);
  // (softmax - onehot(label)) * 0.5
  const std::vector<double> expected{0.04501528658519023, 0.12236423552739882, -0.1673795221125891,
                                     0.42189736724066973, -0.4429024003077028, 0.021005033067033024};
  for (size_t i = 0; i < expected.size(); ++i) {
    CAPTURE(i);
    CHECK(grad[i] == doctest::Approx(expected[i]).epsilon(1e-6));
  }

  // Evaluation asks for no gradient, leaves the logits as they are and gets the same loss.
  std::vector<float> untouched = logits;
  double eval_loss = 0.0;
  int64_t eval_correct = 0;
  cpu().loss.softmax_cross_entropy(trainctl::Stream{}, untouched.data(), labels.data(), 2, 3, 3, std::nullopt,
                                   &eval_loss, &eval_correct);
  CHECK(eval_loss == loss_sum);
  CHECK(eval_correct == 1);
  CHECK(untouched == logits);
}

TEST_CASE("GELU forward and backward follow the exact erf formula") {
  constexpr size_t kPoints = 7;
  const std::array<float, kPoints> z{-3.0f, -1.0f, -0.5f, 0.0f, 0.5f, 1.0f, 2.5f};
  std::array<float, kPoints> out{};
  cpu().elementwise.activation_forward(trainctl::Stream{}, out.data(), z.data(), kPoints, Activation::kGelu);

  const std::array<float, kPoints> grad_out = filled<kPoints>(2.0f);
  std::array<float, kPoints> grad_z{};
  cpu().elementwise.activation_backward(trainctl::Stream{}, grad_z.data(), grad_out.data(), z.data(), out.data(),
                                        kPoints, Activation::kGelu);

  for (size_t i = 0; i < kPoints; ++i) {
    CAPTURE(z[i]);
    const double derivative = gelu_derivative_reference(z[i]);
    CHECK(out[i] == doctest::Approx(gelu_reference(z[i])).epsilon(1e-6).scale(1.0));
    CHECK(grad_z[i] == doctest::Approx(2.0 * derivative).epsilon(1e-6).scale(1.0));
  }
  // Anchors: GELU(1) = Phi(1), GELU'(0) = 1/2.
  CHECK(out[5] == doctest::Approx(0.8413447460685429).epsilon(1e-6));
  CHECK(grad_z[3] == 1.0f);
}

TEST_CASE("ReLU backward passes the gradient where z > 0, in place") {
  const std::array<float, 6> z{-1.0f, 0.0f, 2.0f, -1.0f, 0.0f, 2.0f};
  std::array<float, 6> out{};
  cpu().elementwise.activation_forward(trainctl::Stream{}, out.data(), z.data(), 6, Activation::kRelu);
  CHECK(out == std::array<float, 6>{0.0f, 0.0f, 2.0f, 0.0f, 0.0f, 2.0f});

  // grad_z aliases grad_out, as the model calls it.
  std::array<float, 6> grad{3.0f, 5.0f, 7.0f, 11.0f, 13.0f, 17.0f};
  cpu().elementwise.activation_backward(trainctl::Stream{}, grad.data(), grad.data(), z.data(), out.data(), 6,
                                        Activation::kRelu);
  CHECK(grad == std::array<float, 6>{0.0f, 0.0f, 7.0f, 0.0f, 0.0f, 17.0f});  // relu'(0) = 0 as in PyTorch
}

TEST_CASE("backward reports each layer once, last layer first, covering every parameter") {
  const ModelSpec spec = small_spec(Activation::kGelu);
  const Batch batch = make_batch(spec, 4, 5);
  Mlp model(spec, cpu(), {batch.rows, trainctl::Precision::kFp32});
  model.init_parameters(9);
  std::vector<std::pair<int64_t, int64_t>> reported;
  model.forward_backward(batch.all(), 0.25f,
                         [&](int64_t offset, int64_t count) { reported.emplace_back(offset, count); });
  // Layer i is "2i.weight" then "2i.bias" in the layout: one contiguous slice, reported in reverse.
  const auto& layout = model.parameter_layout();
  REQUIRE(reported.size() * 2 == layout.size());
  int64_t end = model.parameter_count();
  for (size_t i = 0; i < reported.size(); ++i) {
    const trainctl::ParameterSlice& weight = layout[layout.size() - 2 * (i + 1)];
    CHECK(reported[i].first == weight.offset);
    CHECK(reported[i].first + reported[i].second == end);
    end = reported[i].first;
  }
  CHECK(end == 0);
}

TEST_CASE("bf16 precision stores activations and the GEMMs' weights in bf16: close to fp32, not equal") {
  const ModelSpec spec = small_spec(Activation::kRelu);
  const Batch batch = make_batch(spec, 4, 21);
  Mlp fp32(spec, cpu(), {batch.rows, trainctl::Precision::kFp32});
  Mlp bf16(spec, cpu(), {batch.rows, trainctl::Precision::kBf16});
  fp32.init_parameters(4);
  bf16.init_parameters(4);
  const double full = fp32.forward_backward(batch.all(), 1.0f).loss_sum;
  const double rounded = bf16.forward_backward(batch.all(), 1.0f).loss_sum;
  MESSAGE("loss sum fp32 ", full, ", bf16 ", rounded);
  CHECK(rounded != full);
  // bf16 keeps 8 significant bits: a relative error of a few 2^-9 through three layers.
  CHECK(rounded == doctest::Approx(full).epsilon(2e-2));
}
