// Tests for the CPU reference's gemm_bf16 (kernels/cpu/ops_cpu.cpp), which every device's bf16
// GEMM is compared against: operands exactly representable in bf16 give gemm's result bitwise,
// rounding is to nearest with ties to even (1 + 2^-8 down to 1, 1 + 3 * 2^-8 up to 1 + 2^-6),
// NaN stays NaN, infinities stay infinite and FLT_MAX rounds to infinity, and products are summed
// in fp32, unrounded. Also: the CPU's bind_local and pin_host/unpin_host do nothing, harmlessly.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "device.h"

namespace {

const trainctl::DeviceOps& cpu() { return trainctl::cpu_device(); }

// 1x1x1 gemm_bf16: round(a) * round(b).
float bf16_product(float a, float b) {
  float c = 0.0f;
  cpu().gemm_bf16(false, false, 1, 1, 1, 1.0f, &a, &b, 0.0f, &c);
  return c;
}

}  // namespace

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
      cpu().gemm(transpose_a, transpose_b, m, n, k, 0.5f, a.data(), b.data(), 2.0f, expected.data());
      cpu().gemm_bf16(transpose_a, transpose_b, m, n, k, 0.5f, a.data(), b.data(), 2.0f, actual.data());
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
  cpu().gemm_bf16(false, false, 1, 1, k, 1.0f, ones.data(), ones.data(), 0.0f, &c);
  CHECK(c == 1000.0f);
  // (1 + 2^-7)^2 = 1 + 2^-6 + 2^-14 is exact in fp32 but not in bf16, and so are 1000 times it
  // and every partial sum on the way: products are neither rounded to bf16 nor summed in it.
  std::vector<float> near_one(k, 1.0f + std::ldexp(1.0f, -7));
  cpu().gemm_bf16(false, false, 1, 1, k, 1.0f, near_one.data(), near_one.data(), 0.0f, &c);
  CHECK(c == 1000.0f * (1.0f + std::ldexp(1.0f, -6) + std::ldexp(1.0f, -14)));
}

TEST_CASE("the CPU device binds to nothing and pins nothing") {
  cpu().bind_local(0, 1);
  cpu().bind_local(3, 8);
  std::vector<float> host{1.0f, 2.0f, 3.0f};
  cpu().pin_host(host.data(), host.size() * sizeof(float));
  cpu().unpin_host(host.data());
  CHECK(host == std::vector<float>{1.0f, 2.0f, 3.0f});
}
