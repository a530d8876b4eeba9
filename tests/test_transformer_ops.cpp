// Tests for the CPU reference's transformer ops (kernels/cpu/): embedding, LayerNorm (with the
// residual add fused in), causal attention (multi-head, and grouped-query with each key/value head
// shared by a group of query heads), tanh GELU (activation_forward with kGeluTanh), the
// residual add, and cross-entropy over a vocabulary of 256 with one row per token, in place over
// the logits. Each forward is compared with a double-precision evaluation of its definition, and
// each backward with central finite differences of the scalar loss L = sum(out * w) for fixed
// random weights w (so grad_out = w), the loss summed in double and each input perturbed by +-h
// in float. Each comparison prints its worst element; tolerances are abs + rel * |reference|.
// Ops whose gradients accumulate are shown to add to what their outputs held; attention is shown
// to be causal. In bf16 each op is shown to compute in float on its widened inputs and round its
// result once: bitwise the f32 op on the same values, rounded.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "device.h"

namespace {

using trainctl::Activation;
using trainctl::Bf16;

constexpr trainctl::Stream kStream{};
// Small shapes: every input element is perturbed, in well under a second.
constexpr int64_t kBatch = 2, kSeq = 5, kChannels = 8, kHeads = 2, kRows = kBatch * kSeq;
constexpr float kStep = 1e-2f;

const trainctl::Device& cpu() { return trainctl::cpu_device(); }

std::vector<float> random_values(size_t size, uint32_t seed, float scale = 1.0f, float offset = 0.0f) {
  std::mt19937 generator(seed);
  std::uniform_real_distribution<float> uniform(-scale, scale);
  std::vector<float> values(size);
  for (float& value : values) value = offset + uniform(generator);
  return values;
}

std::vector<int32_t> random_tokens(size_t size, uint32_t seed, int32_t vocab) {
  std::mt19937 generator(seed);
  std::uniform_int_distribution<int32_t> uniform(0, vocab - 1);
  std::vector<int32_t> tokens(size);
  for (int32_t& token : tokens) token = uniform(generator);
  return tokens;
}

double weighted_sum(const std::vector<float>& out, const std::vector<float>& weights) {
  double sum = 0.0;
  for (size_t i = 0; i < out.size(); ++i) sum += static_cast<double>(out[i]) * weights[i];
  return sum;
}

struct Tolerance {
  double abs, rel;
};

// Element by element; prints the worst element, the one furthest over (or nearest to) its
// tolerance.
template <typename Actual, typename Expected>
void check_close(const std::string& what, const std::vector<Actual>& actual, const std::vector<Expected>& expected,
                 Tolerance tolerance) {
  REQUIRE(actual.size() == expected.size());
  size_t worst = 0, over = 0;
  double worst_ratio = -1.0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double reference = static_cast<double>(expected[i]);
    const double error = std::abs(static_cast<double>(actual[i]) - reference);
    const double ratio = error / (tolerance.abs + tolerance.rel * std::abs(reference));
    if (!(ratio <= 1.0)) ++over;
    if (!(ratio <= worst_ratio)) {
      worst_ratio = ratio;
      worst = i;
    }
  }
  const double reference = static_cast<double>(expected[worst]);
  const double error = std::abs(static_cast<double>(actual[worst]) - reference);
  MESSAGE(fmt::format("{}: worst [{}] {:.9g} vs reference {:.9g}: abs {:.3g}, rel {:.3g} ({:.3g} of {:g} + {:g} * "
                      "|ref|), {} of {} over",
                      what, worst, static_cast<double>(actual[worst]), reference, error,
                      reference != 0.0 ? error / std::abs(reference) : 0.0, worst_ratio, tolerance.abs, tolerance.rel,
                      over, actual.size()));
  CHECK(over == 0);
}

// Central differences (L(x + h) - L(x - h)) / (2h) of `loss` in every element of `input`,
// dividing by the step actually taken in float, against the analytic gradient.
void check_gradient(const std::string& what, std::vector<float>& input, const std::vector<float>& analytic,
                    const std::function<double()>& loss, Tolerance tolerance) {
  std::vector<double> numeric(input.size());
  for (size_t i = 0; i < input.size(); ++i) {
    const float original = input[i];
    const float up = original + kStep, down = original - kStep;
    input[i] = up;
    const double plus = loss();
    input[i] = down;
    const double minus = loss();
    input[i] = original;
    numeric[i] = (plus - minus) / (static_cast<double>(up) - static_cast<double>(down));
  }
  check_close(what + " gradient vs finite differences", analytic, numeric, tolerance);
}

// a + b, element by element, in float: what an accumulating op adds to its prior contents
// (to within the rounding of adding its terms one by one).
std::vector<float> plus(const std::vector<float>& a, const std::vector<float>& b) {
  std::vector<float> sum(a.size());
  for (size_t i = 0; i < a.size(); ++i) sum[i] = a[i] + b[i];
  return sum;
}

std::vector<Bf16> to_bf16(const std::vector<float>& values) {
  std::vector<Bf16> rounded(values.size());
  for (size_t i = 0; i < values.size(); ++i) rounded[i] = trainctl::to_bf16(values[i]);
  return rounded;
}

std::vector<float> to_floats(const std::vector<Bf16>& values) {
  std::vector<float> widened(values.size());
  for (size_t i = 0; i < values.size(); ++i) widened[i] = trainctl::to_float(values[i]);
  return widened;
}

// What a bf16 tensor holding `values` rounded holds, widened again.
std::vector<float> rounded(const std::vector<float>& values) { return to_floats(to_bf16(values)); }

// Accumulated sums of a few float terms: within a few ulps of the prior contents plus the fresh
// result.
constexpr Tolerance kAccumulated{1e-6, 1e-6};
// Gradients by finite differences with h = 1e-2: truncation error O(h^2), and float rounding of
// the forward's outputs, ~1e-7 each, divided by 2h.
constexpr Tolerance kFiniteDifferences{1e-4, 1e-3};

}  // namespace

TEST_CASE("embedding: forward adds token and position rows; backward accumulates both") {
  const int32_t vocab = 7;  // fewer tokens than positions: repeated tokens accumulate
  const std::vector<int32_t> tokens = random_tokens(kRows, 1, vocab);
  std::vector<float> wte = random_values(vocab * kChannels, 2), wpe = random_values(kSeq * kChannels, 3);
  const std::vector<float> weights = random_values(kRows * kChannels, 4);
  auto forward = [&] {
    std::vector<float> out(kRows * kChannels);
    cpu().embedding->embedding_forward(kStream, out.data(), tokens.data(), wte.data(), wpe.data(), kBatch, kSeq,
                                       kChannels);
    return out;
  };
  std::vector<double> expected(kRows * kChannels);
  for (int64_t r = 0; r < kRows; ++r)
    for (int64_t c = 0; c < kChannels; ++c)
      expected[r * kChannels + c] = static_cast<double>(wte[tokens[r] * kChannels + c]) + wpe[r % kSeq * kChannels + c];
  check_close("embedding forward", forward(), expected, {0.0, 1e-7});

  auto backward = [&](std::vector<float>& grad_wte, std::vector<float>& grad_wpe) {
    cpu().embedding->embedding_backward(kStream, grad_wte.data(), grad_wpe.data(), weights.data(), tokens.data(),
                                        kBatch, kSeq, kChannels);
  };
  std::vector<float> grad_wte(wte.size(), 0.0f), grad_wpe(wpe.size(), 0.0f);
  backward(grad_wte, grad_wpe);
  auto loss = [&] { return weighted_sum(forward(), weights); };
  check_gradient("embedding wte", wte, grad_wte, loss, kFiniteDifferences);
  check_gradient("embedding wpe", wpe, grad_wpe, loss, kFiniteDifferences);

  const std::vector<float> prior_wte = random_values(wte.size(), 5), prior_wpe = random_values(wpe.size(), 6);
  std::vector<float> accumulated_wte = prior_wte, accumulated_wpe = prior_wpe;
  backward(accumulated_wte, accumulated_wpe);
  check_close("embedding grad_wte accumulates", accumulated_wte, plus(prior_wte, grad_wte), kAccumulated);
  check_close("embedding grad_wpe accumulates", accumulated_wpe, plus(prior_wpe, grad_wpe), kAccumulated);
}

TEST_CASE("layernorm: forward normalizes each row and saves mean and rstd; backward accumulates") {
  const float eps = 1e-5f;
  // Off-center rows, so that the mean matters.
  std::vector<float> x = random_values(kRows * kChannels, 10, 1.0f, 0.5f);
  std::vector<float> weight = random_values(kChannels, 11, 1.0f, 1.0f), bias = random_values(kChannels, 12);
  const std::vector<float> weights = random_values(kRows * kChannels, 13);
  std::vector<float> mean(kRows), rstd(kRows);
  auto forward = [&] {
    std::vector<float> out(kRows * kChannels);
    cpu().norm->layernorm_forward(kStream, out.data(), mean.data(), rstd.data(), x.data(), {}, nullptr,
                                  weight.data(), bias.data(), kRows, kChannels, eps);
    return out;
  };
  std::vector<double> expected(kRows * kChannels), expected_mean(kRows), expected_rstd(kRows);
  for (int64_t r = 0; r < kRows; ++r) {
    double sum = 0.0, squares = 0.0;
    for (int64_t c = 0; c < kChannels; ++c) sum += x[r * kChannels + c];
    expected_mean[r] = sum / kChannels;
    for (int64_t c = 0; c < kChannels; ++c) squares += std::pow(x[r * kChannels + c] - expected_mean[r], 2);
    expected_rstd[r] = 1.0 / std::sqrt(squares / kChannels + eps);
    for (int64_t c = 0; c < kChannels; ++c)
      expected[r * kChannels + c] = (x[r * kChannels + c] - expected_mean[r]) * expected_rstd[r] * weight[c] + bias[c];
  }
  check_close("layernorm forward", forward(), expected, {1e-6, 1e-6});
  check_close("layernorm mean", mean, expected_mean, {1e-7, 1e-7});
  check_close("layernorm rstd", rstd, expected_rstd, {0.0, 1e-6});

  auto backward = [&](std::vector<float>& grad_x, std::vector<float>& grad_weight, std::vector<float>& grad_bias) {
    forward();
    cpu().norm->layernorm_backward(kStream, grad_x.data(), {}, grad_weight.data(), grad_bias.data(), weights.data(),
                                   x.data(), weight.data(), mean.data(), rstd.data(), kRows, kChannels);
  };
  std::vector<float> grad_x(x.size(), 0.0f), grad_weight(kChannels, 0.0f), grad_bias(kChannels, 0.0f);
  backward(grad_x, grad_weight, grad_bias);
  auto loss = [&] { return weighted_sum(forward(), weights); };
  check_gradient("layernorm x", x, grad_x, loss, kFiniteDifferences);
  check_gradient("layernorm weight", weight, grad_weight, loss, kFiniteDifferences);
  check_gradient("layernorm bias", bias, grad_bias, loss, kFiniteDifferences);

  const std::vector<float> prior_x = random_values(x.size(), 14), prior_weight = random_values(kChannels, 15),
                           prior_bias = random_values(kChannels, 16);
  std::vector<float> accumulated_x = prior_x, accumulated_weight = prior_weight, accumulated_bias = prior_bias;
  backward(accumulated_x, accumulated_weight, accumulated_bias);
  check_close("layernorm grad_x accumulates", accumulated_x, plus(prior_x, grad_x), kAccumulated);
  check_close("layernorm grad_weight accumulates", accumulated_weight, plus(prior_weight, grad_weight), kAccumulated);
  check_close("layernorm grad_bias accumulates", accumulated_bias, plus(prior_bias, grad_bias), kAccumulated);

  SUBCASE("the residual add fused in: x + add is written and normalized, bitwise as apart") {
    const std::vector<float> add = random_values(x.size(), 17);
    const std::vector<float> sum = plus(x, add);
    std::vector<float> written(x.size()), fused(x.size()), fused_mean(kRows), fused_rstd(kRows);
    cpu().norm->layernorm_forward(kStream, fused.data(), fused_mean.data(), fused_rstd.data(), x.data(), add.data(),
                                  written.data(), weight.data(), bias.data(), kRows, kChannels, eps);
    CHECK(written == sum);
    x = sum;
    CHECK(fused == forward());
    CHECK(fused_mean == mean);
    CHECK(fused_rstd == rstd);
  }
  SUBCASE("bf16: out rounded once, a bf16 add and grad_out widened, grad_x's copy after the accumulation") {
    const std::vector<Bf16> add = to_bf16(random_values(x.size(), 18));
    std::vector<float> written(x.size()), bf16_mean(kRows), bf16_rstd(kRows);
    std::vector<Bf16> out(x.size());
    cpu().norm->layernorm_forward(kStream, out.data(), bf16_mean.data(), bf16_rstd.data(), x.data(), add.data(),
                                  written.data(), weight.data(), bias.data(), kRows, kChannels, eps);
    x = plus(x, to_floats(add));
    CHECK(written == x);
    CHECK(to_floats(out) == rounded(forward()));
    CHECK(bf16_mean == mean);

    const std::vector<Bf16> grad_out = to_bf16(weights);
    std::vector<float> grad_x = prior_x, grad_weight(kChannels, 0.0f), grad_bias(kChannels, 0.0f);
    std::vector<Bf16> copy(x.size());
    cpu().norm->layernorm_backward(kStream, grad_x.data(), copy.data(), grad_weight.data(), grad_bias.data(),
                                   grad_out.data(), x.data(), weight.data(), mean.data(), rstd.data(), kRows,
                                   kChannels);
    std::vector<float> expected_x = prior_x, expected_weight(kChannels, 0.0f), expected_bias(kChannels, 0.0f);
    const std::vector<float> widened = to_floats(grad_out);
    cpu().norm->layernorm_backward(kStream, expected_x.data(), {}, expected_weight.data(), expected_bias.data(),
                                   widened.data(), x.data(), weight.data(), mean.data(), rstd.data(), kRows,
                                   kChannels);
    CHECK(grad_x == expected_x);
    CHECK(grad_weight == expected_weight);
    CHECK(to_floats(copy) == rounded(grad_x));
  }
}

namespace {

// The attention test's shapes: multi-head (GPT-2's kind, 2 heads of 4), and grouped-query (Llama's
// kind: 6 query heads in 2 groups of 3, each group's key/value head shared).
constexpr trainctl::AttentionShape kMultiHead{kBatch, kSeq, kHeads, kHeads, kChannels / kHeads};
constexpr trainctl::AttentionShape kGroupedQuery{kBatch, kSeq, 6, 2, 4};

// Causal attention by its definition, in double: out and the log-sum-exp of each row, query head
// h reading key/value head h / (heads / kv_heads).
void reference_attention(const std::vector<float>& qkv, const trainctl::AttentionShape& shape,
                         std::vector<double>& out, std::vector<double>& lse) {
  const int64_t size = shape.head_size, group = shape.heads / shape.kv_heads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(size));
  out.assign(shape.batch * shape.seq * shape.out_width(), 0.0);
  lse.assign(shape.batch * shape.heads * shape.seq, 0.0);
  // Column c of head `head` of sequence b, position t, where head counts the query heads, then
  // the key heads, then the value heads.
  auto at = [&](int64_t b, int64_t t, int64_t head, int64_t c) {
    return static_cast<double>(qkv[(b * shape.seq + t) * shape.qkv_width() + head * size + c]);
  };
  for (int64_t b = 0; b < shape.batch; ++b)
    for (int64_t h = 0; h < shape.heads; ++h) {
      const int64_t key_head = shape.heads + h / group, value_head = key_head + shape.kv_heads;
      for (int64_t i = 0; i < shape.seq; ++i) {
        std::vector<double> scores(i + 1);
        for (int64_t j = 0; j <= i; ++j)
          for (int64_t c = 0; c < size; ++c) scores[j] += at(b, i, h, c) * at(b, j, key_head, c) * scale;
        double sum = 0.0;
        for (const double score : scores) sum += std::exp(score);
        lse[(b * shape.heads + h) * shape.seq + i] = std::log(sum);
        for (int64_t j = 0; j <= i; ++j)
          for (int64_t c = 0; c < size; ++c)
            out[(b * shape.seq + i) * shape.out_width() + h * size + c] +=
                std::exp(scores[j]) / sum * at(b, j, value_head, c);
      }
    }
}

// Forward against the definition, backward against finite differences, bf16 as f32 rounded once,
// and causality.
void test_attention(const trainctl::AttentionShape& shape) {
  const int64_t qkv_width = shape.qkv_width(), out_width = shape.out_width();
  std::vector<float> qkv = random_values(kRows * qkv_width, 20, 1.5f);
  const std::vector<float> weights = random_values(kRows * out_width, 21);
  std::vector<float> lse(kBatch * shape.heads * kSeq);
  auto forward = [&](const std::vector<float>& input) {
    std::vector<float> out(kRows * out_width);
    cpu().attention->attention_forward(kStream, out.data(), lse.data(), input.data(), shape);
    return out;
  };
  SUBCASE("bf16: computed in float on the widened tensors, each result rounded once") {
    const std::vector<float> qkv_values = rounded(qkv), weight_values = rounded(weights);
    const std::vector<Bf16> qkv_bf16 = to_bf16(qkv), weights_bf16 = to_bf16(weights);
    std::vector<Bf16> out_bf16(kRows * out_width), grad_bf16(qkv.size());
    std::vector<float> lse_bf16(lse.size());
    cpu().attention->attention_forward(kStream, out_bf16.data(), lse_bf16.data(), qkv_bf16.data(), shape);
    const std::vector<float> out_f32 = forward(qkv_values);
    CHECK(to_floats(out_bf16) == rounded(out_f32));
    CHECK(lse_bf16 == lse);
    cpu().attention->attention_backward(kStream, grad_bf16.data(), weights_bf16.data(), qkv_bf16.data(),
                                        out_bf16.data(), lse.data(), shape);
    std::vector<float> grad_f32(qkv.size());
    const std::vector<float> out_values = to_floats(out_bf16);
    cpu().attention->attention_backward(kStream, grad_f32.data(), weight_values.data(), qkv_values.data(),
                                        out_values.data(), lse.data(), shape);
    CHECK(to_floats(grad_bf16) == rounded(grad_f32));
  }
  std::vector<double> expected, expected_lse;
  reference_attention(qkv, shape, expected, expected_lse);
  const std::vector<float> out = forward(qkv);
  const std::string name = fmt::format("attention ({} heads, {} key/value heads)", shape.heads, shape.kv_heads);
  check_close(name + " forward", out, expected, {1e-6, 1e-5});
  check_close(name + " lse", lse, expected_lse, {1e-6, 1e-6});

  // Starts from garbage: grad_qkv is overwritten.
  std::vector<float> grad_qkv = random_values(qkv.size(), 22, 100.0f);
  cpu().attention->attention_backward(kStream, grad_qkv.data(), weights.data(), qkv.data(), out.data(), lse.data(),
                                      shape);
  check_gradient(name + " qkv", qkv, grad_qkv, [&] { return weighted_sum(forward(qkv), weights); },
                 kFiniteDifferences);

  // A later token's k and v do not reach an earlier output; they do reach their own row.
  const int64_t later = 3;
  std::vector<float> changed = qkv;
  for (int64_t c = shape.heads * shape.head_size; c < qkv_width; ++c) changed[later * qkv_width + c] += 0.5f;
  const std::vector<float> changed_out = forward(changed);
  for (int64_t t = 0; t < kSeq; ++t) {
    CAPTURE(t);
    const auto row = [&](const std::vector<float>& values) {
      return std::vector<float>(values.begin() + t * out_width, values.begin() + (t + 1) * out_width);
    };
    if (t < later)
      CHECK(row(changed_out) == row(out));
    else
      CHECK(row(changed_out) != row(out));
  }
  // The other sequence of the batch is untouched.
  CHECK(std::vector<float>(changed_out.begin() + kSeq * out_width, changed_out.end()) ==
        std::vector<float>(out.begin() + kSeq * out_width, out.end()));
}

}  // namespace

TEST_CASE("causal multi-head attention: forward against its definition, backward in q, k and v, and causality") {
  test_attention(kMultiHead);
}

TEST_CASE("grouped-query attention: each key/value head shared by its group, its gradient summed over it") {
  test_attention(kGroupedQuery);
}

TEST_CASE("tanh GELU: activation_forward with kGeluTanh, in place or not, its backward, and in bf16") {
  // Wide enough to reach the tails, where tanh saturates.
  std::vector<float> z = random_values(kRows * kChannels, 30, 4.0f);
  const std::vector<float> weights = random_values(kRows * kChannels, 32);
  const auto n = static_cast<int64_t>(z.size());
  auto forward = [&] {
    std::vector<float> out(z.size());
    cpu().elementwise.activation_forward(kStream, out.data(), z.data(), n, Activation::kGeluTanh);
    return out;
  };
  const std::vector<float> out = forward();
  std::vector<double> expected(z.size());
  for (size_t i = 0; i < z.size(); ++i) {
    const double x = static_cast<double>(z[i]);
    expected[i] = 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
  }
  check_close("gelu_tanh forward", out, expected, {1e-7, 1e-6});

  std::vector<float> in_place = z;
  cpu().elementwise.activation_forward(kStream, in_place.data(), in_place.data(), n, Activation::kGeluTanh);
  CHECK(in_place == out);

  std::vector<float> grad_z(z.size());
  cpu().elementwise.activation_backward(kStream, grad_z.data(), weights.data(), z.data(), out.data(), n,
                                        Activation::kGeluTanh);
  check_gradient("gelu_tanh z", z, grad_z, [&] { return weighted_sum(forward(), weights); }, kFiniteDifferences);

  const std::vector<Bf16> z_bf16 = to_bf16(z), weights_bf16 = to_bf16(weights);
  std::vector<Bf16> out_bf16(z.size()), grad_bf16(z.size());
  cpu().elementwise.activation_forward(kStream, out_bf16.data(), z_bf16.data(), n, Activation::kGeluTanh);
  z = rounded(z);
  CHECK(to_floats(out_bf16) == rounded(forward()));
  cpu().elementwise.activation_backward(kStream, grad_bf16.data(), weights_bf16.data(), z_bf16.data(),
                                        out_bf16.data(), n, Activation::kGeluTanh);
  const std::vector<float> weight_values = to_floats(weights_bf16), out_values = to_floats(out_bf16);
  cpu().elementwise.activation_backward(kStream, grad_z.data(), weight_values.data(), z.data(), out_values.data(), n,
                                        Activation::kGeluTanh);
  CHECK(to_floats(grad_bf16) == rounded(grad_z));
}

TEST_CASE("residual add: out = a + b, into a third buffer or onto an input") {
  std::vector<float> a = random_values(kRows * kChannels, 40), b = random_values(kRows * kChannels, 41);
  const std::vector<float> weights = random_values(kRows * kChannels, 42);
  auto forward = [&] {
    std::vector<float> out(a.size());
    cpu().elementwise.add(kStream, out.data(), a.data(), b.data(), static_cast<int64_t>(a.size()));
    return out;
  };
  const std::vector<float> out = forward();
  CHECK(out == plus(a, b));
  std::vector<float> onto_a = a, onto_b = b;
  cpu().elementwise.add(kStream, onto_a.data(), onto_a.data(), b.data(), static_cast<int64_t>(a.size()));
  cpu().elementwise.add(kStream, onto_b.data(), a.data(), onto_b.data(), static_cast<int64_t>(a.size()));
  CHECK(onto_a == out);
  CHECK(onto_b == out);
  // The gradient of each input is grad_out itself.
  auto loss = [&] { return weighted_sum(forward(), weights); };
  check_gradient("add a", a, weights, loss, kFiniteDifferences);
  check_gradient("add b", b, weights, loss, kFiniteDifferences);
}

// A Llama's ops: RMSNorm, SwiGLU, the embedding without positions and RoPE.
TEST_CASE("rmsnorm: forward is weight * (x * rstd) and saves rstd; backward accumulates") {
  const float eps = 1e-5f;
  // Off-center rows: unlike LayerNorm, RMSNorm does not take the mean out.
  std::vector<float> x = random_values(kRows * kChannels, 60, 1.0f, 0.5f);
  std::vector<float> weight = random_values(kChannels, 61, 1.0f, 1.0f);
  const std::vector<float> weights = random_values(kRows * kChannels, 62);
  std::vector<float> rstd(kRows);
  auto forward = [&] {
    std::vector<float> out(kRows * kChannels);
    cpu().norm->rmsnorm_forward(kStream, out.data(), rstd.data(), x.data(), {}, nullptr, weight.data(), kRows,
                                kChannels, eps);
    return out;
  };
  std::vector<double> expected(kRows * kChannels), expected_rstd(kRows);
  for (int64_t r = 0; r < kRows; ++r) {
    double squares = 0.0;
    for (int64_t c = 0; c < kChannels; ++c) squares += std::pow(x[r * kChannels + c], 2);
    expected_rstd[r] = 1.0 / std::sqrt(squares / kChannels + eps);
    for (int64_t c = 0; c < kChannels; ++c)
      expected[r * kChannels + c] = weight[c] * (x[r * kChannels + c] * expected_rstd[r]);
  }
  check_close("rmsnorm forward", forward(), expected, {1e-6, 1e-6});
  check_close("rmsnorm rstd", rstd, expected_rstd, {0.0, 1e-6});

  auto backward = [&](std::vector<float>& grad_x, std::vector<float>& grad_weight) {
    forward();
    cpu().norm->rmsnorm_backward(kStream, grad_x.data(), {}, grad_weight.data(), weights.data(), x.data(),
                                 weight.data(), rstd.data(), kRows, kChannels);
  };
  std::vector<float> grad_x(x.size(), 0.0f), grad_weight(kChannels, 0.0f);
  backward(grad_x, grad_weight);
  auto loss = [&] { return weighted_sum(forward(), weights); };
  check_gradient("rmsnorm x", x, grad_x, loss, kFiniteDifferences);
  check_gradient("rmsnorm weight", weight, grad_weight, loss, kFiniteDifferences);

  const std::vector<float> prior_x = random_values(x.size(), 63), prior_weight = random_values(kChannels, 64);
  std::vector<float> accumulated_x = prior_x, accumulated_weight = prior_weight;
  backward(accumulated_x, accumulated_weight);
  check_close("rmsnorm grad_x accumulates", accumulated_x, plus(prior_x, grad_x), kAccumulated);
  check_close("rmsnorm grad_weight accumulates", accumulated_weight, plus(prior_weight, grad_weight), kAccumulated);

  SUBCASE("the residual add fused in: x + add is written and normalized, bitwise as apart") {
    const std::vector<float> add = random_values(x.size(), 65);
    const std::vector<float> sum = plus(x, add);
    std::vector<float> written(x.size()), fused(x.size()), fused_rstd(kRows);
    cpu().norm->rmsnorm_forward(kStream, fused.data(), fused_rstd.data(), x.data(), add.data(), written.data(),
                                weight.data(), kRows, kChannels, eps);
    CHECK(written == sum);
    x = sum;
    CHECK(fused == forward());
    CHECK(fused_rstd == rstd);
  }
  SUBCASE("bf16: out rounded once, a bf16 add and grad_out widened, grad_x's copy after the accumulation") {
    const std::vector<Bf16> add = to_bf16(random_values(x.size(), 66));
    std::vector<float> written(x.size()), bf16_rstd(kRows);
    std::vector<Bf16> out(x.size());
    cpu().norm->rmsnorm_forward(kStream, out.data(), bf16_rstd.data(), x.data(), add.data(), written.data(),
                                weight.data(), kRows, kChannels, eps);
    x = plus(x, to_floats(add));
    CHECK(written == x);
    CHECK(to_floats(out) == rounded(forward()));
    CHECK(bf16_rstd == rstd);

    const std::vector<Bf16> grad_out = to_bf16(weights);
    std::vector<float> grad_x = prior_x, grad_weight(kChannels, 0.0f);
    std::vector<Bf16> copy(x.size());
    cpu().norm->rmsnorm_backward(kStream, grad_x.data(), copy.data(), grad_weight.data(), grad_out.data(), x.data(),
                                 weight.data(), rstd.data(), kRows, kChannels);
    std::vector<float> expected_x = prior_x, expected_weight(kChannels, 0.0f);
    const std::vector<float> widened = to_floats(grad_out);
    cpu().norm->rmsnorm_backward(kStream, expected_x.data(), {}, expected_weight.data(), widened.data(), x.data(),
                                 weight.data(), rstd.data(), kRows, kChannels);
    CHECK(grad_x == expected_x);
    CHECK(grad_weight == expected_weight);
    CHECK(to_floats(copy) == rounded(grad_x));
  }
}

TEST_CASE("swiglu: silu(gate) * up over rows of gate and up side by side; backward overwrites both; bf16") {
  const int64_t width = kChannels;
  // Wide enough to reach the tails, where the sigmoid saturates.
  std::vector<float> gate_up = random_values(kRows * 2 * width, 70, 6.0f);
  const std::vector<float> weights = random_values(kRows * width, 71);
  auto forward = [&] {
    std::vector<float> out(kRows * width);
    cpu().elementwise.swiglu_forward(kStream, out.data(), gate_up.data(), kRows, width);
    return out;
  };
  std::vector<double> expected(kRows * width);
  for (int64_t r = 0; r < kRows; ++r)
    for (int64_t j = 0; j < width; ++j) {
      const double gate = gate_up[r * 2 * width + j], up = gate_up[r * 2 * width + width + j];
      expected[r * width + j] = gate / (1.0 + std::exp(-gate)) * up;
    }
  check_close("swiglu forward", forward(), expected, {1e-7, 1e-6});

  // Starts from garbage: grad_gate_up is overwritten.
  std::vector<float> grad = random_values(gate_up.size(), 72, 100.0f);
  cpu().elementwise.swiglu_backward(kStream, grad.data(), weights.data(), gate_up.data(), kRows, width);
  check_gradient("swiglu gate_up", gate_up, grad, [&] { return weighted_sum(forward(), weights); },
                 kFiniteDifferences);

  const std::vector<Bf16> gate_up_bf16 = to_bf16(gate_up), weights_bf16 = to_bf16(weights);
  std::vector<Bf16> out_bf16(kRows * width), grad_bf16(gate_up.size());
  cpu().elementwise.swiglu_forward(kStream, out_bf16.data(), gate_up_bf16.data(), kRows, width);
  gate_up = rounded(gate_up);
  CHECK(to_floats(out_bf16) == rounded(forward()));
  cpu().elementwise.swiglu_backward(kStream, grad_bf16.data(), weights_bf16.data(), gate_up_bf16.data(), kRows,
                                    width);
  const std::vector<float> weight_values = to_floats(weights_bf16);
  cpu().elementwise.swiglu_backward(kStream, grad.data(), weight_values.data(), gate_up.data(), kRows, width);
  CHECK(to_floats(grad_bf16) == rounded(grad));
}

TEST_CASE("embedding without positions (wpe null): the token's row alone; backward accumulates it alone") {
  const int32_t vocab = 7;
  const std::vector<int32_t> tokens = random_tokens(kRows, 80, vocab);
  std::vector<float> wte = random_values(vocab * kChannels, 81);
  const std::vector<float> weights = random_values(kRows * kChannels, 82);
  auto forward = [&] {
    std::vector<float> out(kRows * kChannels);
    cpu().embedding->embedding_forward(kStream, out.data(), tokens.data(), wte.data(), nullptr, kBatch, kSeq,
                                       kChannels);
    return out;
  };
  const std::vector<float> out = forward();
  for (int64_t r = 0; r < kRows; ++r)
    CHECK(std::equal(out.begin() + r * kChannels, out.begin() + (r + 1) * kChannels,
                     wte.begin() + tokens[r] * kChannels));
  const std::vector<float> prior = random_values(wte.size(), 83);
  std::vector<float> grad_wte(wte.size(), 0.0f), accumulated = prior;
  cpu().embedding->embedding_backward(kStream, grad_wte.data(), nullptr, weights.data(), tokens.data(), kBatch, kSeq,
                                      kChannels);
  check_gradient("embedding without positions wte", wte, grad_wte, [&] { return weighted_sum(forward(), weights); },
                 kFiniteDifferences);
  cpu().embedding->embedding_backward(kStream, accumulated.data(), nullptr, weights.data(), tokens.data(), kBatch,
                                      kSeq, kChannels);
  check_close("embedding without positions grad_wte accumulates", accumulated, plus(prior, grad_wte), kAccumulated);
}

TEST_CASE("rope: each query and key head's halves rotated (rotate_half), the values untouched; backward the transpose") {
  const trainctl::AttentionShape shape = kGroupedQuery;
  const int64_t half = shape.head_size / 2, width = shape.qkv_width();
  std::vector<float> qkv = random_values(kRows * width, 90, 1.5f);
  const std::vector<float> angles = random_values(kSeq * half, 91, 3.0f);
  std::vector<float> cos(angles.size()), sin(angles.size());
  for (size_t i = 0; i < angles.size(); ++i) {
    cos[i] = std::cos(angles[i]);
    sin[i] = std::sin(angles[i]);
  }
  const std::vector<float> weights = random_values(qkv.size(), 92);
  auto forward = [&](const std::vector<float>& input) {
    std::vector<float> out = input;
    cpu().rope->rope_forward(kStream, out.data(), cos.data(), sin.data(), shape);
    return out;
  };
  const std::vector<float> out = forward(qkv);
  std::vector<double> expected(qkv.begin(), qkv.end());
  for (int64_t r = 0; r < kRows; ++r)
    for (int64_t h = 0; h < shape.heads + shape.kv_heads; ++h)
      for (int64_t i = 0; i < half; ++i) {
        const int64_t at = r * width + h * shape.head_size + i, t = r % kSeq;
        const double x1 = qkv[at], x2 = qkv[at + half], c = cos[t * half + i], s = sin[t * half + i];
        expected[at] = x1 * c - x2 * s;
        expected[at + half] = x2 * c + x1 * s;
      }
  check_close("rope forward (the value heads as they were)", out, expected, {1e-7, 1e-6});
  for (int64_t r = 0; r < kRows; ++r) {
    const auto values = qkv.begin() + r * width + (shape.heads + shape.kv_heads) * shape.head_size;
    CHECK(std::equal(values, values + shape.kv_heads * shape.head_size,
                     out.begin() + (values - qkv.begin())));
  }

  // The op is linear in qkv: the gradient of sum(weights * rope(qkv)) is the backward of weights.
  std::vector<float> grad = weights;
  cpu().rope->rope_backward(kStream, grad.data(), cos.data(), sin.data(), shape);
  check_gradient("rope qkv", qkv, grad, [&] { return weighted_sum(forward(qkv), weights); }, kFiniteDifferences);
  // cos^2 + sin^2 = 1: the backward undoes the forward.
  std::vector<float> undone = out;
  cpu().rope->rope_backward(kStream, undone.data(), cos.data(), sin.data(), shape);
  check_close("rope backward of forward", undone, qkv, {1e-6, 1e-6});

  std::vector<Bf16> qkv_bf16 = to_bf16(qkv);
  cpu().rope->rope_forward(kStream, qkv_bf16.data(), cos.data(), sin.data(), shape);
  CHECK(to_floats(qkv_bf16) == rounded(forward(rounded(qkv))));
}

TEST_CASE("cross-entropy over a vocabulary of 256, one row per token, its gradient over the logits") {
  const int64_t vocab = 256;
  std::vector<float> logits = random_values(kRows * vocab, 50, 3.0f);
  const std::vector<int32_t> labels = random_tokens(kRows, 51, static_cast<int32_t>(vocab));
  // The mean over tokens, as the model's loss is.
  const float grad_scale = 1.0f / kRows;
  // The loss of `logits` (left as they are), and in `gradient` the gradient over a copy of them.
  auto loss_of = [&](std::vector<float>* gradient, int64_t* correct) {
    double loss_sum = 0.0;
    int64_t hits = 0;
    std::vector<float> in_place = logits;
    cpu().loss.softmax_cross_entropy(kStream, in_place.data(), labels.data(), kRows, vocab, vocab,
                                     gradient != nullptr ? std::optional<float>(grad_scale) : std::nullopt,
                                     &loss_sum, &hits);
    if (gradient != nullptr) *gradient = in_place;
    if (correct != nullptr) *correct = hits;
    return loss_sum;
  };
  std::vector<double> expected_loss(1, 0.0);
  int64_t expected_correct = 0;
  for (int64_t r = 0; r < kRows; ++r) {
    const float* row = logits.data() + r * vocab;
    double sum = 0.0;
    int64_t argmax = 0;
    for (int64_t c = 0; c < vocab; ++c) {
      sum += std::exp(static_cast<double>(row[c]));
      if (row[c] > row[argmax]) argmax = c;
    }
    expected_loss[0] += std::log(sum) - row[labels[r]];
    expected_correct += argmax == labels[r] ? 1 : 0;
  }
  std::vector<float> grad_logits;
  int64_t correct = -1;
  const double loss_sum = loss_of(&grad_logits, &correct);
  // The op subtracts the row's max in float before its double exp: float rounding of the logits.
  check_close("cross-entropy loss_sum", std::vector<double>{loss_sum}, expected_loss, {0.0, 1e-7});
  CHECK(correct == expected_correct);
  // Evaluation (no gradient, the logits left alone) gives the same loss.
  std::vector<float> untouched = logits;
  double eval_loss = 0.0;
  int64_t eval_correct = 0;
  cpu().loss.softmax_cross_entropy(kStream, untouched.data(), labels.data(), kRows, vocab, vocab, std::nullopt,
                                   &eval_loss, &eval_correct);
  CHECK(eval_loss == loss_sum);
  CHECK(untouched == logits);
  check_gradient("cross-entropy logits", logits, grad_logits, [&] { return grad_scale * loss_of(nullptr, nullptr); },
                 kFiniteDifferences);

  // The totals accumulate over calls (micro-batches), and bf16 logits are read widened and their
  // gradient rounded once.
  double totals = 1.5;
  int64_t hits = 2;
  std::vector<Bf16> logits_bf16 = to_bf16(logits);
  cpu().loss.softmax_cross_entropy(kStream, logits_bf16.data(), labels.data(), kRows, vocab, vocab, grad_scale,
                                   &totals, &hits);
  const std::vector<float> widened = rounded(logits);
  std::vector<float> gradient_f32 = widened;
  double widened_loss = 0.0;
  int64_t widened_correct = 0;
  cpu().loss.softmax_cross_entropy(kStream, gradient_f32.data(), labels.data(), kRows, vocab, vocab, grad_scale,
                                   &widened_loss, &widened_correct);
  CHECK(totals == 1.5 + widened_loss);
  CHECK(hits == 2 + widened_correct);
  CHECK(to_floats(logits_bf16) == rounded(gradient_f32));
}

TEST_CASE("cross-entropy over a padded vocabulary: the padding takes no probability and no gradient") {
  // GPT-2's vocabulary is padded from 50257 to 50304 for the GEMMs; 61 padded to 64 here.
  const int64_t vocab = 61, padded = 64;
  std::vector<float> logits = random_values(kRows * vocab, 52, 3.0f);
  const std::vector<int32_t> labels = random_tokens(kRows, 53, static_cast<int32_t>(vocab));
  // The padded columns hold what no logit may become: were they read, the loss would show it.
  std::vector<float> padded_logits(static_cast<size_t>(kRows * padded), std::numeric_limits<float>::quiet_NaN());
  for (int64_t r = 0; r < kRows; ++r)
    std::copy_n(logits.begin() + r * vocab, vocab, padded_logits.begin() + r * padded);
  const float grad_scale = 1.0f / kRows;
  double loss = 0.0, padded_loss = 0.0;
  int64_t correct = 0, padded_correct = 0;
  cpu().loss.softmax_cross_entropy(kStream, logits.data(), labels.data(), kRows, vocab, vocab, grad_scale, &loss,
                                   &correct);
  cpu().loss.softmax_cross_entropy(kStream, padded_logits.data(), labels.data(), kRows, vocab, padded, grad_scale,
                                   &padded_loss, &padded_correct);
  CHECK(padded_loss == loss);
  CHECK(padded_correct == correct);
  for (int64_t r = 0; r < kRows; ++r)
    for (int64_t c = 0; c < padded; ++c) {
      const float expected = c < vocab ? logits[static_cast<size_t>(r * vocab + c)] : 0.0f;
      CHECK(padded_logits[static_cast<size_t>(r * padded + c)] == expected);
    }
}
