// Tests for the device seam's CPU side (kernels/cpu/, kernels/device.cpp). gemm with leading
// dimensions, batch strides and transposes against a naive triple loop. gemm_bf16, which every
// device's bf16 GEMM is compared against: operands exactly representable in bf16 give gemm's
// result bitwise, rounding is to nearest with ties to even (1 + 2^-8 down to 1, 1 + 3 * 2^-8 up
// to 1 + 2^-6), NaN stays NaN, infinities stay infinite and FLT_MAX rounds to infinity,
// products are summed in fp32, unrounded, and strided operands are rounded as stored. The
// registry: the CPU table is whole and found by name; a table with an empty op is refused with
// the op's name; missing_families names the families a table lacks. Also: the CPU's
// bind_local and pin_host/unpin_host do nothing, harmlessly, and copy and peak_flops work.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "device.h"

namespace {

using trainctl::Gemm;

const trainctl::Device& cpu() { return trainctl::cpu_device(); }

constexpr trainctl::Stream kStream{};

// 1x1x1 gemm_bf16: round(a) * round(b).
float bf16_product(float a, float b) {
  float c = 0.0f;
  cpu().blas.gemm_bf16(kStream, trainctl::dense_gemm(false, false, 1, 1, 1, 1.0f, &a, &b, 0.0f, &c));
  return c;
}

std::vector<float> pattern(size_t size, int multiplier, int modulus) {
  std::vector<float> values(size);
  for (size_t i = 0; i < size; ++i)
    values[i] = static_cast<float>(static_cast<int>(i * multiplier % modulus) - modulus / 2) / 8.0f;
  return values;
}

// The GEMM by its definition, in double, touching only the elements the layout names.
std::vector<float> naive_gemm(const Gemm& g, std::vector<float> c) {
  for (int64_t batch = 0; batch < g.batch; ++batch) {
    const float* a = g.a + batch * g.stride_a;
    const float* b = g.b + batch * g.stride_b;
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

}  // namespace

TEST_CASE("gemm with leading dimensions wider than the matrices, batch strides and transposes") {
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
      const Gemm g{.transpose_a = transpose_a, .transpose_b = transpose_b, .m = m, .n = n, .k = k,
                   .alpha = 0.5f, .beta = 2.0f, .a = a.data(), .lda = lda, .stride_a = stride_a,
                   .b = b.data(), .ldb = ldb, .stride_b = stride_b, .c = c.data(), .ldc = ldc,
                   .stride_c = stride_c, .batch = batch};
      cpu().blas.gemm(kStream, g);
      const std::vector<float> expected = naive_gemm(g, c_init);
      // Multiples of 1/8 up to +-4: every product and sum is exact in fp32, in any order.
      size_t worst = 0;
      for (size_t i = 0; i < c.size(); ++i)
        if (std::abs(c[i] - expected[i]) > std::abs(c[worst] - expected[worst])) worst = i;
      MESSAGE("worst [", worst, "]: gemm ", c[worst], ", naive ", expected[worst]);
      CHECK(c == expected);

      // gemm_bf16 on the same layout: these values are exact in bf16, so it is gemm.
      std::vector<float> c_bf16 = c_init;
      Gemm g_bf16 = g;
      g_bf16.c = c_bf16.data();
      cpu().blas.gemm_bf16(kStream, g_bf16);
      CHECK(c_bf16 == expected);
    }
}

TEST_CASE("gemm_bf16 rounds strided operands as stored, and a zero batch stride reuses one matrix") {
  // A is one 2x2 matrix (stride 0) in rows of 3: the padding holds values that round
  // differently, which must not leak in. B is two 2x1 matrices.
  const float tie_down = 1.0f + std::ldexp(1.0f, -8);  // -> 1 in bf16
  const std::vector<float> a{tie_down, 0.0f, 99.0f, 0.0f, tie_down, 99.0f};
  const std::vector<float> b{1.0f, 2.0f, 3.0f, 4.0f};
  std::vector<float> c(4, -1.0f);
  cpu().blas.gemm_bf16(kStream, Gemm{.m = 2, .n = 1, .k = 2, .a = a.data(), .lda = 3, .stride_a = 0, .b = b.data(),
                                     .ldb = 1, .stride_b = 2, .c = c.data(), .ldc = 1, .stride_c = 2, .batch = 2});
  CHECK(c == std::vector<float>{1.0f, 2.0f, 3.0f, 4.0f});
}

TEST_CASE("gemm_bf16 equals gemm on operands exactly representable in bf16, with every transpose") {
  const int64_t m = 3, n = 5, k = 7;
  // Multiples of 1/8 up to +-4 have at most 6 significant bits: exact in bf16 (8 bits), and so
  // are their products and sums in fp32, whatever the order of summation.
  std::vector<float> a(m * k), b(k * n), c_init(m * n);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(static_cast<int>(i * 7 % 61) - 30) / 8.0f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(static_cast<int>(i * 11 % 53) - 26) / 8.0f;
  for (size_t i = 0; i < c_init.size(); ++i) c_init[i] = static_cast<float>(i) / 4.0f;
  for (bool transpose_a : {false, true})
    for (bool transpose_b : {false, true}) {
      CAPTURE(transpose_a);
      CAPTURE(transpose_b);
      std::vector<float> expected = c_init, actual = c_init;
      cpu().blas.gemm(kStream,
                      trainctl::dense_gemm(transpose_a, transpose_b, m, n, k, 0.5f, a.data(), b.data(), 2.0f,
                                           expected.data()));
      cpu().blas.gemm_bf16(kStream, trainctl::dense_gemm(transpose_a, transpose_b, m, n, k, 0.5f, a.data(), b.data(),
                                                         2.0f, actual.data()));
      CHECK(actual == expected);
    }
}

TEST_CASE("gemm_bf16 rounds its operands to nearest, ties to even") {
  const float ulp = std::ldexp(1.0f, -7);  // bf16's spacing in [1, 2)
  // 1 + ulp/2 lies halfway between 1 (even) and 1 + ulp (odd): down to 1.
  CHECK(bf16_product(1.0f + ulp / 2, 1.0f) == 1.0f);
  // 1 + 3 ulp/2 lies halfway between 1 + ulp (odd) and 1 + 2 ulp (even): up.
  CHECK(bf16_product(1.0f + 3 * ulp / 2, 1.0f) == 1.0f + 2 * ulp);
  // Off the halfway points it is plain rounding to nearest, both signs alike.
  CHECK(bf16_product(1.0f + ulp / 2 + ulp / 8, 1.0f) == 1.0f + ulp);
  CHECK(bf16_product(-(1.0f + ulp / 2 - ulp / 8), 1.0f) == -1.0f);
}

TEST_CASE("gemm_bf16 keeps NaN and infinities, and rounds FLT_MAX up to infinity") {
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(std::isnan(bf16_product(std::numeric_limits<float>::quiet_NaN(), 1.0f)));
  // A NaN whose payload sits only in the low 16 bits would round into infinity without care.
  CHECK(std::isnan(bf16_product(std::bit_cast<float>(uint32_t{0x7F800001}), 1.0f)));
  CHECK(bf16_product(inf, 2.0f) == inf);
  CHECK(bf16_product(-inf, 2.0f) == -inf);
  CHECK(bf16_product(std::numeric_limits<float>::max(), 1.0f) == inf);
}

TEST_CASE("gemm_bf16 sums its products in fp32") {
  // 1000 products of 1 * 1: bf16 sums would stop at 256, where adding 1 rounds back to 256.
  const int64_t k = 1000;
  std::vector<float> ones(k, 1.0f);
  float c = 0.0f;
  cpu().blas.gemm_bf16(kStream, trainctl::dense_gemm(false, false, 1, 1, k, 1.0f, ones.data(), ones.data(), 0.0f, &c));
  CHECK(c == 1000.0f);
  // (1 + 2^-7)^2 = 1 + 2^-6 + 2^-14 is exact in fp32 but not in bf16, and so are 1000 times it
  // and every partial sum on the way: products are neither rounded to bf16 nor summed in it.
  std::vector<float> near_one(k, 1.0f + std::ldexp(1.0f, -7));
  cpu().blas.gemm_bf16(kStream, trainctl::dense_gemm(false, false, 1, 1, k, 1.0f, near_one.data(), near_one.data(),
                                                     0.0f, &c));
  CHECK(c == 1000.0f * (1.0f + std::ldexp(1.0f, -6) + std::ldexp(1.0f, -14)));
}

TEST_CASE("the CPU device binds to nothing and pins nothing, copies, and estimates its peak") {
  CHECK(cpu().memory.bind_local(0, 1) == "the host's CPU");
  cpu().memory.bind_local(3, 8);
  std::vector<float> host{1.0f, 2.0f, 3.0f};
  cpu().memory.pin_host(host.data(), host.size() * sizeof(float));
  cpu().memory.unpin_host(host.data());
  CHECK(host == std::vector<float>{1.0f, 2.0f, 3.0f});
  std::vector<float> copied(3);
  cpu().memory.copy(kStream, copied.data(), host.data(), host.size() * sizeof(float));
  CHECK(copied == host);
  // No bf16 units on the CPU: the same estimate. Non-negative (0 where /proc/cpuinfo says nothing).
  MESSAGE("CPU peak estimate: ", cpu().memory.peak_flops(false) / 1e9, " GFLOP/s");
  CHECK(cpu().memory.peak_flops(false) >= 0.0);
  CHECK(cpu().memory.peak_flops(true) == cpu().memory.peak_flops(false));
}

TEST_CASE("the registry finds the CPU table, whole, by name") {
  CHECK(trainctl::find_device("cpu") == &cpu());
  CHECK(trainctl::find_device("tpu") == nullptr);
  CHECK_NOTHROW(trainctl::check_device_table(cpu()));
  CHECK(trainctl::missing_families(cpu(), {trainctl::OpFamily::kNorm, trainctl::OpFamily::kEmbedding,
                                           trainctl::OpFamily::kAttention})
            .empty());
}

TEST_CASE("a device table with an empty op is refused, naming device, family and op") {
  trainctl::Device holed = cpu();
  holed.name = "holed";
  holed.elementwise.add = nullptr;
  CHECK_THROWS_WITH_AS(trainctl::check_device_table(holed),
                       "holed.elementwise.add is empty: a device table must fill every op of each family it has",
                       std::logic_error);
  // In an optional family, once the family is there.
  trainctl::Device holed_attention = cpu();
  holed_attention.name = "holed";
  holed_attention.attention->attention_backward = nullptr;
  CHECK_THROWS_WITH_AS(
      trainctl::check_device_table(holed_attention),
      "holed.attention.attention_backward is empty: a device table must fill every op of each family it has",
      std::logic_error);
  holed_attention.attention.reset();
  CHECK_NOTHROW(trainctl::check_device_table(holed_attention));
}

TEST_CASE("missing_families names the families a table lacks, in the order asked") {
  trainctl::Device mlp_only = cpu();
  mlp_only.norm.reset();
  mlp_only.attention.reset();
  using trainctl::OpFamily;
  const std::vector<OpFamily> missing =
      trainctl::missing_families(mlp_only, {OpFamily::kAttention, OpFamily::kEmbedding, OpFamily::kNorm});
  CHECK(missing == std::vector<OpFamily>{OpFamily::kAttention, OpFamily::kNorm});
  CHECK(std::string(trainctl::op_family_name(OpFamily::kNorm)) == "norm");
  CHECK(std::string(trainctl::op_family_name(OpFamily::kEmbedding)) == "embedding");
  CHECK(std::string(trainctl::op_family_name(OpFamily::kAttention)) == "attention");
}
