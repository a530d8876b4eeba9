// Tests for the device seam's CPU side (kernels/cpu/, kernels/device.cpp). gemm with leading
// dimensions, batch strides and transposes against a naive triple loop, in f32 and with bf16
// operands and results; each epilogue against a plain loop; bf16 rounding (memory.convert, which
// every bf16 result rounds as): to nearest with ties to even (1 + 2^-8 down to 1, 1 + 3 * 2^-8 up
// to 1 + 2^-6), NaN stays NaN, infinities stay infinite and FLT_MAX rounds to infinity; bf16
// products summed in fp32, unrounded. The registry: the CPU table is whole and found by name; a
// table with any one op left empty is refused with that op's name (every op of the list, one at a
// time); missing_families names the families a table lacks. Also: the CPU's info family binds to
// nothing, counts nothing and estimates its peak; pin_host/unpin_host and copy work.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "activation_functions.h"
#include "device.h"

namespace {

using trainctl::Bf16;
using trainctl::ElementType;
using trainctl::Epilogue;
using trainctl::Gemm;

const trainctl::Device& cpu() { return trainctl::cpu_device(); }

constexpr trainctl::Stream kStream{};

float round_trip(float x) {
  Bf16 rounded{};
  cpu().memory.convert(kStream, &rounded, &x, 1);
  float widened = 0.0f;
  cpu().memory.convert(kStream, &widened, &rounded, 1);
  return widened;
}

std::vector<Bf16> to_bf16(const std::vector<float>& values) {
  std::vector<Bf16> rounded(values.size());
  cpu().memory.convert(kStream, rounded.data(), values.data(), static_cast<int64_t>(values.size()));
  return rounded;
}

std::vector<float> to_floats(const std::vector<Bf16>& values) {
  std::vector<float> widened(values.size());
  cpu().memory.convert(kStream, widened.data(), values.data(), static_cast<int64_t>(values.size()));
  return widened;
}

// Multiples of 1/8 up to +-modulus/16: at most 6 significant bits, exact in bf16 (8 bits), and so
// are their products and sums in fp32, whatever the order of summation.
std::vector<float> pattern(size_t size, int multiplier, int modulus) {
  std::vector<float> values(size);
  for (size_t i = 0; i < size; ++i)
    values[i] = static_cast<float>(static_cast<int>(i * multiplier % modulus) - modulus / 2) / 8.0f;
  return values;
}

// The GEMM by its definition, in double, touching only the elements the layout names; f32 views
// of the operands (what a bf16 operand holds, widened).
std::vector<float> naive_gemm(const Gemm& g, const float* a_values, const float* b_values, std::vector<float> c) {
  for (int64_t batch = 0; batch < g.batch; ++batch) {
    const float* a = a_values + batch * g.stride_a;
    const float* b = b_values + batch * g.stride_b;
    const int64_t c_offset = batch * g.stride_c;
    for (int64_t i = 0; i < g.m; ++i)
      for (int64_t j = 0; j < g.n; ++j) {
        double sum = 0.0;
        for (int64_t p = 0; p < g.k; ++p)
          sum += static_cast<double>(g.transpose_a ? a[p * g.lda + i] : a[i * g.lda + p]) *
                 (g.transpose_b ? b[j * g.ldb + p] : b[p * g.ldb + j]);
        float& out = c[static_cast<size_t>(c_offset + i * g.ldc + j)];
        out = static_cast<float>(g.alpha * sum + g.beta * static_cast<double>(out));
      }
  }
  return c;
}

// Element by element within abs + rel * |expected| (0 and 0: bitwise), the worst element printed.
void check_close(const std::vector<float>& actual, const std::vector<float>& expected, double abs, double rel) {
  REQUIRE(actual.size() == expected.size());
  size_t worst = 0;
  double worst_ratio = -1.0;
  bool within = true;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double error = std::abs(static_cast<double>(actual[i]) - expected[i]);
    const double allowed = abs + rel * std::abs(static_cast<double>(expected[i]));
    within = within && (allowed > 0.0 ? error <= allowed : actual[i] == expected[i]);
    const double ratio = allowed > 0.0 ? error / allowed : error;
    if (ratio > worst_ratio) worst_ratio = ratio, worst = i;
  }
  MESSAGE("worst [", worst, "]: ", actual[worst], ", expected ", expected[worst], " (tolerance ", abs, " + ", rel,
          " |expected|)");
  CHECK(within);
}

void check_equal(const std::vector<float>& actual, const std::vector<float>& expected) {
  check_close(actual, expected, 0.0, 0.0);
}

std::vector<float> rounded(std::vector<float> values) {
  for (float& value : values) value = round_trip(value);
  return values;
}

// The CPU's vectorized loops call glibc's vector tanhf (within 4 ulp), the tests its scalar one:
// up to about 4 ulp of 1 (2.4e-7) apart, scaled by 0.5 |z| in the forward and by up to about 13 in
// the derivative (test_cuda_kernels.cpp states the same bound for CUDA against the CPU).
constexpr double kGeluAbs = 5e-6, kGeluRel = 2e-6;

}  // namespace

TEST_CASE("gemm with leading dimensions wider than the matrices, batch strides and transposes, f32 and bf16") {
  const int64_t m = 3, n = 4, k = 5, batch = 3;
  for (bool transpose_a : {false, true})
    for (bool transpose_b : {false, true}) {
      CAPTURE(transpose_a);
      CAPTURE(transpose_b);
      // Stored A is [k, m] when transposed, else [m, k]; each row padded by 2, each matrix by 3.
      const int64_t lda = (transpose_a ? m : k) + 2, ldb = (transpose_b ? k : n) + 1, ldc = n + 3;
      const int64_t stride_a = (transpose_a ? k : m) * lda + 3, stride_b = (transpose_b ? n : k) * ldb + 1;
      const int64_t stride_c = m * ldc + 2;
      const std::vector<float> a = pattern(static_cast<size_t>(batch * stride_a), 7, 61);
      const std::vector<float> b = pattern(static_cast<size_t>(batch * stride_b), 11, 53);
      // C's padding holds values that must survive.
      const std::vector<float> c_init = pattern(static_cast<size_t>(batch * stride_c), 5, 37);
      std::vector<float> c = c_init;
      Gemm g{.transpose_a = transpose_a, .transpose_b = transpose_b, .m = m, .n = n, .k = k, .alpha = 0.5f,
             .beta = 2.0f, .a = a.data(), .lda = lda, .stride_a = stride_a, .b = b.data(), .ldb = ldb,
             .stride_b = stride_b, .c = c.data(), .ldc = ldc, .stride_c = stride_c, .batch = batch};
      cpu().blas.gemm(kStream, g);
      const std::vector<float> expected = naive_gemm(g, a.data(), b.data(), c_init);
      check_equal(c, expected);

      // bf16 operands on the same layout: these values are exact in bf16, so it is the same GEMM,
      // into an f32 C and into a bf16 C (whose values, multiples of 1/16 up to 32, are exact too).
      const std::vector<Bf16> a_bf16 = to_bf16(a), b_bf16 = to_bf16(b);
      std::vector<float> c_f32 = c_init;
      g.a = a_bf16.data();
      g.b = b_bf16.data();
      g.c = c_f32.data();
      cpu().blas.gemm(kStream, g);
      check_equal(c_f32, expected);
      std::vector<Bf16> c_bf16 = to_bf16(c_init);
      g.c = c_bf16.data();
      cpu().blas.gemm(kStream, g);
      check_equal(to_floats(c_bf16), rounded(expected));
    }
}

TEST_CASE("a bf16 GEMM reads strided operands as stored, and a zero batch stride reuses one matrix") {
  // A is one 2x2 matrix (stride 0) in rows of 3: the padding holds values that must not leak in.
  // B is two 2x1 matrices.
  const std::vector<Bf16> a = to_bf16({1.0f, 0.0f, 99.0f, 0.0f, 1.0f, 99.0f});
  const std::vector<Bf16> b = to_bf16({1.0f, 2.0f, 3.0f, 4.0f});
  std::vector<float> c(4, -1.0f);
  cpu().blas.gemm(kStream, Gemm{.m = 2, .n = 1, .k = 2, .a = a.data(), .lda = 3, .stride_a = 0, .b = b.data(),
                                .ldb = 1, .stride_b = 2, .c = c.data(), .ldc = 1, .stride_c = 2, .batch = 2});
  CHECK(c == std::vector<float>{1.0f, 2.0f, 3.0f, 4.0f});
}

TEST_CASE("bf16 rounding is to nearest, ties to even") {
  const float ulp = std::ldexp(1.0f, -7);  // bf16's spacing in [1, 2)
  // 1 + ulp/2 lies halfway between 1 (even) and 1 + ulp (odd): down to 1.
  CHECK(round_trip(1.0f + ulp / 2) == 1.0f);
  // 1 + 3 ulp/2 lies halfway between 1 + ulp (odd) and 1 + 2 ulp (even): up.
  CHECK(round_trip(1.0f + 3 * ulp / 2) == 1.0f + 2 * ulp);
  // Off the halfway points it is plain rounding to nearest, both signs alike.
  CHECK(round_trip(1.0f + ulp / 2 + ulp / 8) == 1.0f + ulp);
  CHECK(round_trip(-(1.0f + ulp / 2 - ulp / 8)) == -1.0f);
}

TEST_CASE("bf16 rounding keeps NaN and infinities, and rounds FLT_MAX up to infinity") {
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(std::isnan(round_trip(std::numeric_limits<float>::quiet_NaN())));
  // A NaN whose payload sits only in the low 16 bits would round into infinity without care.
  CHECK(std::isnan(round_trip(std::bit_cast<float>(uint32_t{0x7F800001}))));
  CHECK(round_trip(inf) == inf);
  CHECK(round_trip(-inf) == -inf);
  CHECK(round_trip(std::numeric_limits<float>::max()) == inf);
}

TEST_CASE("a bf16 GEMM sums its products in fp32, and rounds a bf16 result once") {
  // 1000 products of 1 * 1: bf16 sums would stop at 256, where adding 1 rounds back to 256.
  const int64_t k = 1000;
  const std::vector<Bf16> ones = to_bf16(std::vector<float>(k, 1.0f));
  float c = 0.0f;
  cpu().blas.gemm(kStream, trainctl::dense_gemm(false, false, 1, 1, k, 1.0f, ones.data(), ones.data(), 0.0f, &c));
  CHECK(c == 1000.0f);
  // (1 + 2^-7)^2 = 1 + 2^-6 + 2^-14 is exact in fp32 but not in bf16, and so are 1000 times it
  // and every partial sum on the way: products are neither rounded to bf16 nor summed in it.
  const float near_one = 1.0f + std::ldexp(1.0f, -7);
  const std::vector<Bf16> near_ones = to_bf16(std::vector<float>(k, near_one));
  cpu().blas.gemm(kStream,
                  trainctl::dense_gemm(false, false, 1, 1, k, 1.0f, near_ones.data(), near_ones.data(), 0.0f, &c));
  const float exact = 1000.0f * (1.0f + std::ldexp(1.0f, -6) + std::ldexp(1.0f, -14));
  CHECK(c == exact);
  // Into bf16: the fp32 sum rounded once, not a bf16 running sum.
  Bf16 rounded{};
  cpu().blas.gemm(kStream,
                  trainctl::dense_gemm(false, false, 1, 1, k, 1.0f, near_ones.data(), near_ones.data(), 0.0f, &rounded));
  CHECK(trainctl::to_float(rounded) == round_trip(exact));
}

TEST_CASE("the GEMM epilogues: bias, GELU with its input kept, the GELU's gradient, and bias gradients") {
  using trainctl::activations::GeluTanh;
  const int64_t m = 3, n = 5, k = 4;  // m != n, so that a bias along the wrong dimension shows
  const std::vector<float> a = pattern(m * k, 7, 29), b = pattern(k * n, 5, 31), bias = pattern(n, 3, 17);
  const std::vector<float> product = naive_gemm(trainctl::dense_gemm(false, false, m, n, k, 1.0f, a.data(), b.data(),
                                                                     0.0f, static_cast<float*>(nullptr)),
                                                a.data(), b.data(), std::vector<float>(m * n, 0.0f));
  std::vector<float> biased(m * n);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) biased[i * n + j] = product[i * n + j] + bias[j];

  SUBCASE("bias") {
    std::vector<float> c(m * n);
    Gemm g = trainctl::dense_gemm(false, false, m, n, k, 1.0f, a.data(), b.data(), 0.0f, c.data());
    g.epilogue = Epilogue::kBias;
    g.bias = bias.data();
    cpu().blas.gemm(kStream, g);
    check_equal(c, biased);
  }
  SUBCASE("bias with GELU, its input kept in aux (row stride wider than n)") {
    std::vector<float> c(m * n), aux(m * 8, -7.0f), expected_aux(m * 8, -7.0f), expected(m * n);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        expected_aux[i * 8 + j] = biased[i * n + j];
        expected[i * n + j] = GeluTanh::forward(biased[i * n + j]);
      }
    Gemm g = trainctl::dense_gemm(false, false, m, n, k, 1.0f, a.data(), b.data(), 0.0f, c.data());
    g.epilogue = Epilogue::kGeluBias;
    g.bias = bias.data();
    g.aux = aux.data();
    g.ld_aux = 8;
    cpu().blas.gemm(kStream, g);
    check_close(c, expected, kGeluAbs, kGeluRel);
    check_equal(aux, expected_aux);
  }
  SUBCASE("the GELU's gradient at aux") {
    // aux's rows 8 apart (cuBLASLt's condition on its leading dimension).
    const std::vector<float> aux = pattern(m * 8, 13, 23);
    std::vector<float> c(m * n), expected(m * n);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        expected[i * n + j] = product[i * n + j] * GeluTanh::derivative(aux[i * 8 + j], 0.0f);
    Gemm g = trainctl::dense_gemm(false, false, m, n, k, 1.0f, a.data(), b.data(), 0.0f, c.data());
    g.epilogue = Epilogue::kGeluGrad;
    g.aux = const_cast<float*>(aux.data());
    g.ld_aux = 8;
    cpu().blas.gemm(kStream, g);
    check_close(c, expected, kGeluAbs, kGeluRel);
  }
  SUBCASE("bias gradients of op(A) and op(B) accumulate, whatever the transposes") {
    for (bool transpose : {false, true}) {
      CAPTURE(transpose);
      // op(A) = a as [m, k] (stored [k, m] when transposed); op(B) = b as [k, n].
      std::vector<float> stored_a(m * k), stored_b(k * n);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t p = 0; p < k; ++p) stored_a[transpose ? p * m + i : i * k + p] = a[i * k + p];
      for (int64_t p = 0; p < k; ++p)
        for (int64_t j = 0; j < n; ++j) stored_b[transpose ? j * k + p : p * n + j] = b[p * n + j];
      std::vector<float> grad_a(m, 1.0f), grad_b(n, 2.0f), expected_a(m, 1.0f), expected_b(n, 2.0f);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t p = 0; p < k; ++p) expected_a[i] += a[i * k + p];
      for (int64_t p = 0; p < k; ++p)
        for (int64_t j = 0; j < n; ++j) expected_b[j] += b[p * n + j];
      for (const Epilogue epilogue : {Epilogue::kBiasGradA, Epilogue::kBiasGradB}) {
        std::vector<float> c(m * n);
        Gemm g = trainctl::dense_gemm(transpose, transpose, m, n, k, 1.0f, stored_a.data(), stored_b.data(), 0.0f,
                                      c.data());
        g.epilogue = epilogue;
        g.bias_grad = epilogue == Epilogue::kBiasGradA ? grad_a.data() : grad_b.data();
        cpu().blas.gemm(kStream, g);
        check_equal(c, product);
      }
      check_equal(grad_a, expected_a);
      check_equal(grad_b, expected_b);
    }
  }
  SUBCASE("into bf16: the epilogue on the fp32 result, rounded once; the bias of C's type") {
    const std::vector<Bf16> a_bf16 = to_bf16(a), b_bf16 = to_bf16(b), bias_bf16 = to_bf16(bias);
    std::vector<Bf16> c(m * n), aux(m * 8);
    Gemm g = trainctl::dense_gemm(false, false, m, n, k, 1.0f, a_bf16.data(), b_bf16.data(), 0.0f, c.data());
    g.epilogue = Epilogue::kGeluBias;
    g.bias = bias_bf16.data();
    g.aux = aux.data();
    g.ld_aux = 8;
    cpu().blas.gemm(kStream, g);
    std::vector<float> expected(m * n), aux_values(m * n);
    for (int64_t i = 0; i < m * n; ++i) expected[i] = GeluTanh::forward(biased[i]);
    // bf16's half ulp at |c| < 8 is 2^-6 at most.
    check_close(to_floats(c), expected, std::ldexp(1.0, -6), 0.0);
    const std::vector<float> aux_rows = to_floats(aux);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) aux_values[i * n + j] = aux_rows[i * 8 + j];
    check_equal(aux_values, rounded(biased));
    g.bias = bias.data();
    CHECK_THROWS_AS(cpu().blas.gemm(kStream, g), std::logic_error);  // an f32 bias for a bf16 C
  }
}

TEST_CASE("the CPU device binds to nothing, counts nothing, pins nothing, copies, and estimates its peak") {
  CHECK(cpu().info.bind_local(0, 1) == "the host's CPU");
  cpu().info.bind_local(3, 8);
  CHECK_FALSE(cpu().info.activity().has_value());
  CHECK(cpu().info.peak_allocated_bytes() == 0);
  std::vector<float> host{1.0f, 2.0f, 3.0f};
  cpu().memory.pin_host(host.data(), host.size() * sizeof(float));
  cpu().memory.unpin_host(host.data());
  CHECK(host == std::vector<float>{1.0f, 2.0f, 3.0f});
  std::vector<float> copied(3);
  cpu().memory.copy(kStream, copied.data(), host.data(), host.size() * sizeof(float));
  CHECK(copied == host);
  cpu().memory.fill_zero(kStream, copied.data(), 2 * sizeof(float));
  CHECK(copied == std::vector<float>{0.0f, 0.0f, 3.0f});
  // No bf16 units on the CPU: the same estimate. Non-negative (0 where /proc/cpuinfo says nothing).
  MESSAGE("CPU peak estimate: ", cpu().info.peak_flops(false) / 1e9, " GFLOP/s");
  CHECK(cpu().info.peak_flops(false) >= 0.0);
  CHECK(cpu().info.peak_flops(true) == cpu().info.peak_flops(false));
}

TEST_CASE("the registry finds the CPU table, whole, by name") {
  CHECK(trainctl::find_device("cpu") == &cpu());
  CHECK(trainctl::find_device("tpu") == nullptr);
  CHECK_NOTHROW(trainctl::check_device_table(cpu()));
  using trainctl::OptionalFamily;
  CHECK(trainctl::missing_families(cpu(), {OptionalFamily::norm, OptionalFamily::embedding, OptionalFamily::attention})
            .empty());
  CHECK(trainctl::missing_families(cpu(), {OptionalFamily::collectives}) ==
        std::vector<OptionalFamily>{OptionalFamily::collectives});
}

TEST_CASE("a device table with any one op left empty is refused, naming device, family and op") {
  // Every op of the list (device_ops.def), one at a time, in a copy of the CPU table; an op of a
  // family the CPU lacks (the collectives) is not there to leave empty.
  int ops = 0;
  const auto check_hole = [&ops](auto clear, const char* family, const char* op) {
    trainctl::Device holed = cpu();
    holed.name = "holed";
    if (!clear(holed)) return;
    ++ops;
    CAPTURE(op);
    CHECK_THROWS_WITH_AS(trainctl::check_device_table(holed),
                         (std::string("holed.") + family + "." + op +
                          " is empty: a device table must fill every op of each family it has")
                             .c_str(),
                         std::logic_error);
  };
  const auto family_of = [](auto& family) -> auto* {
    if constexpr (requires { family.has_value(); })
      return family ? &*family : nullptr;
    else
      return &family;
  };
#define TRAINCTL_FAMILY(family, Type, presence)
#define TRAINCTL_OP(family, op, Return, parameters)  \
  check_hole(                                        \
      [&](trainctl::Device& holed) {                 \
        auto* ops_of_family = family_of(holed.family); \
        if (ops_of_family == nullptr) return false;  \
        ops_of_family->op = nullptr;                 \
        return true;                                 \
      },                                             \
      #family, #op);
#define TRAINCTL_END_FAMILY(family)
#include "device_ops.def"
  MESSAGE(ops, " ops of the CPU table each refused when left empty");
  CHECK(ops > 20);
  // An optional family may be absent as a whole.
  trainctl::Device without_attention = cpu();
  without_attention.attention.reset();
  CHECK_NOTHROW(trainctl::check_device_table(without_attention));
}

TEST_CASE("missing_families names the families a table lacks, in the order asked") {
  trainctl::Device mlp_only = cpu();
  mlp_only.norm.reset();
  mlp_only.attention.reset();
  using trainctl::OptionalFamily;
  const std::vector<OptionalFamily> missing = trainctl::missing_families(
      mlp_only, {OptionalFamily::attention, OptionalFamily::embedding, OptionalFamily::norm});
  CHECK(missing == std::vector<OptionalFamily>{OptionalFamily::attention, OptionalFamily::norm});
  CHECK(std::string(trainctl::optional_family_name(OptionalFamily::norm)) == "norm");
  CHECK(std::string(trainctl::optional_family_name(OptionalFamily::embedding)) == "embedding");
  CHECK(std::string(trainctl::optional_family_name(OptionalFamily::attention)) == "attention");
  CHECK(std::string(trainctl::optional_family_name(OptionalFamily::collectives)) == "collectives");
}
