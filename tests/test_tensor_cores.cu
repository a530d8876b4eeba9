// Tests of kernels/cuda/tensor_cores.cuh (mma, ldmatrix, cp.async, dynamic shared memory), from one
// source built twice: by nvcc for a GPU (meson's test tensor_cores, suite gpu, which exits 77
// without a GPU of compute capability 8.0 or newer) and by the host compiler on cuda_on_cpu/ under
// AddressSanitizer and UBSan (tensor_cores_on_cpu). The test kernels build or read their fragments
// through the PTX ISA's layouts as written here, apart from cuda_on_cpu's code, on values exact in
// bf16 (small integers, quarters, powers of two) whose products and sums are exact in fp32 in any
// order, so that results compare bitwise with plain products and plain copies computed here. Run on a GPU first, they verify the
// layouts that cuda_on_cpu implements: a mistake shared by a kernel and the CPU implementation
// cannot hide behind the other.
//   mma: D = A B + C for three sets of values, and mmas chained over k = 32 and 48.
//   ldmatrix: x1, x2 and x4, plain and .trans, of rows scattered in shared memory at a padded
//   stride, the unused lanes' addresses misaligned; and ldmatrix feeding mma as the header says
//   (A by x4, B by x2 .trans from a k-major tile and by x2 from an n-major one).
//   cp.async: 16-byte .cg, .ca of 4, 8 and 16 bytes, a zero fill of 0 to 16 source bytes, in three
//   committed groups and an uncommitted copy, each read right after the wait that covers it.
//   Dynamic shared memory: 48 KiB without the attribute; 100 KiB refused without it
//   (cudaErrorInvalidValue), used with it, and refused above it; the attribute up to the device's
//   sharedMemPerBlockOptin, refused above.
//   Planted mistakes, each caught as a wrong result: B's fragment built from B transposed; two
//   lanes' A fragments swapped.
// Under cuda_on_cpu alone, what a GPU leaves undefined or would not show: every part of a
// cp.async read one wait too early reads the shared-memory poison (a planted mistake, caught);
// dynamic shared memory reads 0xFF bytes in each block before it is written, and a store past
// its end is AddressSanitizer's heap-buffer-overflow; the opt-in limit is an H100's 227 KiB; a
// lane that skips an mma is a deadlock report naming the kernel, the block and the line, and an
// mma in a block of 16 threads is refused; an ldmatrix or cp.async address misaligned, or outside
// shared or device memory, faults (cudaErrorMisalignedAddress, cudaErrorIllegalAddress, sticky).
// A plain program (cuda_test_support.h): `--only GROUP` runs one group (kGroups).
#include <cuda_runtime.h>

#include <bit>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "cuda/tensor_cores.cuh"
#include "cuda_test_support.h"

namespace {

using namespace cuda_tests;
using namespace trainctl::cuda_kernels;

constexpr int kWarp = 32;

// --- the host side: exact bf16 values, plain products, bitwise comparisons ---------------------

// The bf16 bits of x, which the tests' values are exact in.
uint16_t bf16_bits(float x) {
  const auto bits = std::bit_cast<uint32_t>(x);
  if ((bits & 0xFFFFu) != 0) {
    std::fprintf(stderr, "%.9g is not exact in bf16\n", static_cast<double>(x));
    std::abort();
  }
  return static_cast<uint16_t>(bits >> 16);
}

std::vector<uint16_t> to_bf16(const std::vector<float>& values) {
  std::vector<uint16_t> bits(values.size());
  for (size_t i = 0; i < values.size(); ++i) bits[i] = bf16_bits(values[i]);
  return bits;
}

// n values drawn from `choices` by a fixed generator.
std::vector<float> drawn_from(const std::vector<float>& choices, size_t n, uint32_t seed) {
  std::vector<float> values(n);
  for (float& value : values) {
    seed = seed * 1103515245u + 12345u;
    value = choices[(seed >> 16) % choices.size()];
  }
  return values;
}

// D = A B + C for row-major A (m x k), B (k x n), C (m x n): exact for the tests' values.
std::vector<float> plain_product(const std::vector<float>& a, const std::vector<float>& b, const std::vector<float>& c,
                                 int m, int n, int k) {
  std::vector<float> d(static_cast<size_t>(m) * n);
  for (int row = 0; row < m; ++row)
    for (int column = 0; column < n; ++column) {
      double sum = c.empty() ? 0.0 : c[static_cast<size_t>(row * n + column)];
      for (int l = 0; l < k; ++l)
        sum += static_cast<double>(a[static_cast<size_t>(row * k + l)]) * b[static_cast<size_t>(l * n + column)];
      d[static_cast<size_t>(row * n + column)] = static_cast<float>(sum);
    }
  return d;
}

// Empty when `got` equals `expected` bit for bit; else where they first differ.
template <typename T>
std::string difference(const std::vector<T>& got, const std::vector<T>& expected) {
  static_assert(sizeof(T) == sizeof(uint32_t));
  if (got.size() != expected.size()) return " (the sizes differ)";
  for (size_t i = 0; i < got.size(); ++i) {
    const auto got_bits = std::bit_cast<uint32_t>(got[i]), expected_bits = std::bit_cast<uint32_t>(expected[i]);
    if (got_bits == expected_bits) continue;
    char text[160];
    if constexpr (std::is_same_v<T, float>)
      std::snprintf(text, sizeof(text), " (first difference: element %zu, %.9g for %.9g)", i,
                    static_cast<double>(got[i]), static_cast<double>(expected[i]));
    else
      std::snprintf(text, sizeof(text), " (first difference: element %zu, 0x%08x for 0x%08x)", i, got_bits,
                    expected_bits);
    return text;
  }
  return "";
}

// Whether a launch was accepted and ran without an error.
bool ran(cudaError_t launched) { return launched == cudaSuccess && cudaDeviceSynchronize() == cudaSuccess; }

// --- fragments through the PTX ISA's layouts (9.7.14.5.8), lane's share of a tile -------------
// g = lane / 4, t = lane % 4; a b32 holds two bf16, the lower-indexed element in its low half.

__device__ uint32_t pack(uint16_t low, uint16_t high) { return uint32_t{low} | uint32_t{high} << 16; }

// A, 16 x 16 at `a`, row-major with leading dimension ld: a0, a1 (register 0) row g, columns 2t and
// 2t + 1; a2, a3 row g + 8; a4, a5 row g, columns 2t + 8 and 2t + 9; a6, a7 row g + 8, those.
__device__ void a_fragment_of(const uint16_t* a, int ld, int lane, uint32_t (&fragment)[4]) {
  const int g = lane / 4, t = lane % 4;
  for (int reg = 0; reg < 4; ++reg) {
    const int row = g + 8 * (reg % 2), column = 2 * t + 8 * (reg / 2);
    fragment[reg] = pack(a[row * ld + column], a[row * ld + column + 1]);
  }
}

// B, 16 x 8 (k x n) at `b`, row-major with leading dimension ld: b0, b1 (register 0) rows 2t and
// 2t + 1, column g; b2, b3 rows 2t + 8 and 2t + 9.
__device__ void b_fragment_of(const uint16_t* b, int ld, int lane, uint32_t (&fragment)[2]) {
  const int g = lane / 4, t = lane % 4;
  for (int reg = 0; reg < 2; ++reg) {
    const int k = 2 * t + 8 * reg;
    fragment[reg] = pack(b[k * ld + g], b[(k + 1) * ld + g]);
  }
}

// C or D, 16 x 8 floats at `c`, row-major with leading dimension 8: c0, c1 row g, columns 2t and
// 2t + 1; c2, c3 row g + 8.
__device__ int accumulator_index(int lane, int i) { return (lane / 4 + 8 * (i / 2)) * 8 + 2 * (lane % 4) + i % 2; }

__device__ void load_accumulators(const float* c, int lane, float (&fragment)[4]) {
  for (int i = 0; i < 4; ++i) fragment[i] = c[accumulator_index(lane, i)];
}

__device__ void store_accumulators(float* d, int lane, const float (&fragment)[4]) {
  for (int i = 0; i < 4; ++i) d[accumulator_index(lane, i)] = fragment[i];
}

// --- kernels (one warp each unless said) -------------------------------------------------------

enum class Mistake { kNone, kBTransposed, kLanesSwapped };

// D = A B + C for A (16 x k), B (k x 8) in bf16 and C, D (16 x 8) in floats, all row-major, k a
// multiple of 16: an mma for each 16 of k, accumulating in D's fragment. kMistake plants one:
// B's fragment read as if B were stored transposed (B[k][n] at n * 16 + k), or lanes 5 and 9
// taking each other's A fragment.
template <Mistake kMistake>
__global__ void multiply_through_layouts(const uint16_t* a, const uint16_t* b, const float* c, float* d, int k) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int a_lane = kMistake == Mistake::kLanesSwapped && (lane == 5 || lane == 9) ? lane ^ (5 ^ 9) : lane;
  float accumulators[4];
  load_accumulators(c, lane, accumulators);
  for (int first = 0; first < k; first += 16) {
    uint32_t a_fragment[4], b_fragment[2];
    a_fragment_of(a + first, k, a_lane, a_fragment);
    if constexpr (kMistake == Mistake::kBTransposed) {
      const int g = lane / 4, t = lane % 4;
      for (int reg = 0; reg < 2; ++reg)
        b_fragment[reg] = pack(b[g * 16 + 2 * t + 8 * reg], b[g * 16 + 2 * t + 8 * reg + 1]);
    } else {
      b_fragment_of(b + first * 8, 8, lane, b_fragment);
    }
    mma_m16n8k16_bf16(accumulators, a_fragment, b_fragment, accumulators);
  }
  store_accumulators(d, lane, accumulators);
}

// Rows of ldmatrix's matrices in shared memory: 8 elements, then 8 of padding, in slots scattered
// over 32 (rows need not be contiguous).
constexpr int kSlotElements = 16;
__host__ __device__ constexpr int slot_of(int matrix, int row) { return (7 * (8 * matrix + row) + 3) % 32; }

// ldmatrix of kMatrices of the four 8 x 8 matrices at `matrices` (row-major, one after the other):
// lane l stores row l % 8 of matrix l / 8 in its slot, and gives its address if ldmatrix uses it;
// the others give a misaligned one. out[lane][m]: what the lane received of matrix m.
template <int kMatrices, bool kTransposed>
__global__ void load_scattered_rows(const uint16_t* matrices, uint32_t* out) {
  __shared__ __align__(16) uint16_t slots[32][kSlotElements];
  const int lane = static_cast<int>(threadIdx.x);
  uint16_t* slot = slots[slot_of(lane / 8, lane % 8)];
  for (int column = 0; column < kSlotElements; ++column)
    slot[column] = column < 8 ? matrices[lane * 8 + column] : static_cast<uint16_t>(0xDEAD);
  __syncthreads();
  const void* row = lane < 8 * kMatrices ? static_cast<const void*>(slot) : static_cast<const void*>(&slots[0][1]);
  uint32_t fragments[kMatrices];
  if constexpr (kTransposed)
    ldmatrix_transposed<kMatrices>(fragments, row);
  else
    ldmatrix<kMatrices>(fragments, row);
  for (int matrix = 0; matrix < kMatrices; ++matrix) out[lane * kMatrices + matrix] = fragments[matrix];
}

// Padded leading dimensions (elements) of the shared tiles below: rows 16-byte aligned, not
// contiguous.
constexpr int kALd = 24, kBLd = 16, kKeysLd = 24;

// A (16 x 16) and B (16 x 8), row-major bf16, staged in shared memory as the header's recipes
// take them: A row-major, B k-major (row k), and B again n-major (row n, as keys are). d: A B from
// ldmatrix<4> of A and ldmatrix_transposed<2> of B, then A B from ldmatrix<4> of A and
// ldmatrix<2> of the n-major copy, each 16 x 8 row-major.
__global__ void multiply_from_shared(const uint16_t* a, const uint16_t* b, float* d) {
  __shared__ __align__(16) uint16_t a_tile[16 * kALd], b_tile[16 * kBLd], keys_tile[8 * kKeysLd];
  const int lane = static_cast<int>(threadIdx.x);
  for (int i = lane; i < 16 * 16; i += kWarp) a_tile[i / 16 * kALd + i % 16] = a[i];
  for (int i = lane; i < 16 * 8; i += kWarp) {
    b_tile[i / 8 * kBLd + i % 8] = b[i];
    keys_tile[i % 8 * kKeysLd + i / 8] = b[i];
  }
  __syncthreads();
  uint32_t a_fragment[4], b_fragment[2], key_fragment[2];
  ldmatrix<4>(a_fragment, &a_tile[(lane % 8 + 8 * (lane / 8 % 2)) * kALd + 8 * (lane / 16)]);
  ldmatrix_transposed<2>(b_fragment, &b_tile[lane % 16 * kBLd]);
  ldmatrix<2>(key_fragment, &keys_tile[lane % 8 * kKeysLd + 8 * (lane / 8 % 2)]);
  const float zeros[4] = {};
  float from_b[4], from_keys[4];
  mma_m16n8k16_bf16(from_b, a_fragment, b_fragment, zeros);
  mma_m16n8k16_bf16(from_keys, a_fragment, key_fragment, zeros);
  store_accumulators(d, lane, from_b);
  store_accumulators(d + 16 * 8, lane, from_keys);
}

constexpr int kCopiedWords = 20;

__device__ void copy_words(uint32_t* to, const uint32_t* from, int first, int end) {
  for (int word = first; word < end; ++word) to[word] = from[word];
}

// Each thread copies its 20 words of `source` into shared memory: words 0-3 by a 16-byte .cg copy
// (group 0); 4 and 5 by .ca copies of 4 bytes, 6-7 of 8, 8-11 of 16 (group 1); 12-15 by a zero
// fill of lane % 17 source bytes (group 2); 16-19 uncommitted, for wait_all. It reads each part
// into out right after the wait that covers it, or with kOneWaitEarly (a planted mistake) after
// the wait before.
template <bool kOneWaitEarly>
__global__ void copy_in_groups(const uint32_t* source, uint32_t* out) {
  __shared__ __align__(16) uint32_t landed[kWarp * kCopiedWords];
  const int lane = static_cast<int>(threadIdx.x);
  uint32_t* mine = &landed[lane * kCopiedWords];
  const uint32_t* from = source + lane * kCopiedWords;
  uint32_t* to = out + lane * kCopiedWords;
  cp_async_16(mine, from);
  cp_async_commit_group();
  cp_async_ca<4>(mine + 4, from + 4);
  cp_async_ca<4>(mine + 5, from + 5);
  cp_async_ca<8>(mine + 6, from + 6);
  cp_async_ca<16>(mine + 8, from + 8);
  cp_async_commit_group();
  cp_async_16_zero_fill(mine + 12, from + 12, lane % 17);
  cp_async_commit_group();
  cp_async_16(mine + 16, from + 16);
  // The parts: group 0's words, group 1's, group 2's, the uncommitted copy's. Part p is covered by
  // the wait after p others.
  const int parts[] = {0, 4, 12, 16, 20};
  const auto read_part = [&](int part) { copy_words(to, mine, parts[part], parts[part + 1]); };
  if (kOneWaitEarly) read_part(0);
  cp_async_wait_group<2>();
  read_part(kOneWaitEarly ? 1 : 0);
  cp_async_wait_group<1>();
  read_part(kOneWaitEarly ? 2 : 1);
  cp_async_wait_group<0>();
  read_part(kOneWaitEarly ? 3 : 2);
  cp_async_wait_all();
  if (!kOneWaitEarly) read_part(3);
}

// Each thread writes words thread, thread + blockDim.x, ... of `words` of dynamic shared memory;
// after the barrier it sums those of the next thread, which another thread wrote.
__global__ void sum_neighbours_words(unsigned int words, unsigned int* sums) {
  unsigned int* shared = dynamic_shared_memory<unsigned int>();
  for (unsigned int i = threadIdx.x; i < words; i += blockDim.x) shared[i] = i * 2654435761u;
  __syncthreads();
  unsigned int sum = 0;
  for (unsigned int i = (threadIdx.x + 1) % blockDim.x; i < words; i += blockDim.x) sum += shared[i];
  sums[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}

// --- the checks, on a GPU and on cuda_on_cpu ----------------------------------------------------

// multiply_through_layouts's D for the values drawn from `choices`; expected: the plain product.
template <Mistake kMistake>
std::vector<float> multiplied_through_layouts(const std::vector<float>& choices, int k, std::vector<float>& expected) {
  const std::vector<float> a = drawn_from(choices, static_cast<size_t>(16 * k), 1),
                           b = drawn_from(choices, static_cast<size_t>(k * 8), 2),
                           c = drawn_from({-8.0f, -3.0f, 0.0f, 0.5f, 2.0f, 7.0f}, 16 * 8, 3);
  expected = plain_product(a, b, c, 16, 8, k);
  DeviceArray<uint16_t> device_a(to_bf16(a)), device_b(to_bf16(b));
  DeviceArray<float> device_c(c), device_d(16 * 8);
  if (!ran(launch(1, kWarp, nullptr, multiply_through_layouts<kMistake>, device_a.get(), device_b.get(), device_c.get(),
                  device_d.get(), k)))
    return {};
  return device_d.read();
}

const std::vector<float> kSmallIntegers = {-3.0f, -2.0f, -1.0f, 0.0f, 1.0f, 2.0f, 3.0f};

void test_mma() {
  const struct {
    const char* name;
    std::vector<float> choices;
  } value_sets[] = {
      {"small integers", kSmallIntegers},
      {"halves and quarters", {-1.5f, -0.75f, -0.25f, 0.25f, 0.5f, 1.25f}},
      {"powers of two up to 2^7", {-128.0f, -8.0f, -1.0f, 0.125f, 2.0f, 16.0f, 64.0f}},
  };
  for (const auto& values : value_sets) {
    std::vector<float> expected;
    const std::vector<float> d = multiplied_through_layouts<Mistake::kNone>(values.choices, 16, expected);
    check(difference(d, expected).empty(), std::string("mma.sync m16n8k16 bf16, ") + values.name +
                                               ": D = A B + C, every element bitwise" + difference(d, expected));
  }
  for (const int k : {32, 48}) {
    std::vector<float> expected;
    const std::vector<float> d = multiplied_through_layouts<Mistake::kNone>(kSmallIntegers, k, expected);
    check(difference(d, expected).empty(),
          "mma.sync chained over k = " + std::to_string(k) + " (D the next C): D = A B + C" + difference(d, expected));
  }
}

// What load_scattered_rows<kMatrices, kTransposed> received, against the PTX ISA's layout.
template <int kMatrices, bool kTransposed>
void check_load_matrices(const std::vector<uint16_t>& matrices) {
  DeviceArray<uint16_t> device_matrices(matrices);
  DeviceArray<uint32_t> out(kWarp * kMatrices);
  const bool launched =
      ran(launch(1, kWarp, nullptr, load_scattered_rows<kMatrices, kTransposed>, device_matrices.get(), out.get()));
  std::vector<uint32_t> expected(kWarp * kMatrices);
  for (int lane = 0; lane < kWarp; ++lane)
    for (int matrix = 0; matrix < kMatrices; ++matrix) {
      const auto element = [&](int row, int column) {
        return uint32_t{matrices[static_cast<size_t>((8 * matrix + row) * 8 + column)]};
      };
      const int pair = 2 * (lane % 4);
      expected[static_cast<size_t>(lane * kMatrices + matrix)] =
          kTransposed ? element(pair, lane / 4) | element(pair + 1, lane / 4) << 16
                      : element(lane / 4, pair) | element(lane / 4, pair + 1) << 16;
    }
  const std::vector<uint32_t> got = out.read();
  check(launched && difference(got, expected).empty(),
        "ldmatrix.m8n8.x" + std::to_string(kMatrices) + (kTransposed ? ".trans" : "") +
            ": lane l gets, of each matrix, " +
            (kTransposed ? "column l/4's elements in rows 2(l%4), 2(l%4)+1" : "row l/4's elements 2(l%4), 2(l%4)+1") +
            "; rows scattered, the unused lanes' addresses misaligned" + difference(got, expected));
}

void test_ldmatrix() {
  std::vector<uint16_t> matrices(4 * 8 * 8);
  for (size_t i = 0; i < matrices.size(); ++i) matrices[i] = static_cast<uint16_t>(0x1000 + 37 * i);
  check_load_matrices<1, false>(matrices);
  check_load_matrices<2, false>(matrices);
  check_load_matrices<4, false>(matrices);
  check_load_matrices<1, true>(matrices);
  check_load_matrices<2, true>(matrices);
  check_load_matrices<4, true>(matrices);
}

void test_ldmatrix_feeding_mma() {
  const std::vector<float> a = drawn_from(kSmallIntegers, 16 * 16, 4), b = drawn_from(kSmallIntegers, 16 * 8, 5);
  const std::vector<float> product = plain_product(a, b, {}, 16, 8, 16);
  DeviceArray<uint16_t> device_a(to_bf16(a)), device_b(to_bf16(b));
  DeviceArray<float> d(2 * 16 * 8);
  const bool launched = ran(launch(1, kWarp, nullptr, multiply_from_shared, device_a.get(), device_b.get(), d.get()));
  const std::vector<float> got = d.read();
  const std::vector<float> from_b(got.begin(), got.begin() + 16 * 8), from_keys(got.begin() + 16 * 8, got.end());
  check(launched && difference(from_b, product).empty(),
        "A by ldmatrix x4 of a row-major tile, B by ldmatrix x2 .trans of a k-major one: mma gives A B" +
            difference(from_b, product));
  check(launched && difference(from_keys, product).empty(),
        "B by ldmatrix x2 of an n-major tile (as keys are stored): mma gives A B" + difference(from_keys, product));
}

// The words copy_in_groups<false> reads: the source's, but the zero fill's bytes past lane % 17.
std::vector<uint32_t> expected_copies(const std::vector<uint32_t>& source) {
  std::vector<uint32_t> expected = source;
  for (int lane = 0; lane < kWarp; ++lane) {
    auto* fill = reinterpret_cast<unsigned char*>(&expected[static_cast<size_t>(lane * kCopiedWords + 12)]);
    std::memset(fill + lane % 17, 0, static_cast<size_t>(16 - lane % 17));
  }
  return expected;
}

template <bool kOneWaitEarly>
std::vector<uint32_t> copied_in_groups(const std::vector<uint32_t>& source) {
  DeviceArray<uint32_t> device_source(source), out(source.size());
  if (!ran(launch(1, kWarp, nullptr, copy_in_groups<kOneWaitEarly>, device_source.get(), out.get()))) return {};
  return out.read();
}

std::vector<uint32_t> copy_source() {
  std::vector<uint32_t> source(kWarp * kCopiedWords);
  for (size_t i = 0; i < source.size(); ++i) source[i] = 0x01020304u * static_cast<uint32_t>(i + 1);
  return source;
}

void test_cp_async() {
  const std::vector<uint32_t> source = copy_source();
  const std::vector<uint32_t> expected = expected_copies(source), got = copied_in_groups<false>(source);
  check(difference(got, expected).empty(),
        "cp.async: .cg 16 bytes, .ca 4, 8 and 16, a zero fill of 0 to 16 source bytes, in three groups and an "
        "uncommitted copy; each read after wait_group 2, 1, 0 and wait_all lands whole" +
            difference(got, expected));
}

void test_dynamic_shared_memory() {
  cudaDeviceProp properties{};
  cudaGetDeviceProperties(&properties, 0);
  const auto opt_in = static_cast<unsigned int>(properties.sharedMemPerBlockOptin);
  constexpr unsigned int kBlocks = 2, kThreads = 128;
  // The sums of sum_neighbours_words over `bytes` of dynamic shared memory; empty if refused.
  const auto sums_over = [&](unsigned int bytes, cudaError_t& launched) {
    DeviceArray<unsigned int> sums(kBlocks * kThreads);
    launched =
        launch_with_shared_memory(kBlocks, kThreads, bytes, nullptr, sum_neighbours_words, bytes / 4, sums.get());
    if (launched != cudaSuccess) {
      cudaGetLastError();
      return std::vector<unsigned int>();
    }
    cudaDeviceSynchronize();
    return sums.read();
  };
  const auto expected_over = [&](unsigned int bytes) {
    std::vector<unsigned int> sums(kBlocks * kThreads);
    for (unsigned int block = 0; block < kBlocks; ++block)
      for (unsigned int thread = 0; thread < kThreads; ++thread)
        for (unsigned int i = (thread + 1) % kThreads; i < bytes / 4; i += kThreads)
          sums[block * kThreads + thread] += i * 2654435761u;
    return sums;
  };
  cudaError_t launched = cudaSuccess;
  const std::vector<unsigned int> default_sums = sums_over(48 << 10, launched);
  check(launched == cudaSuccess && difference(default_sums, expected_over(48 << 10)).empty(),
        "48 KiB of dynamic shared memory without the attribute: every thread reads what another wrote" +
            difference(default_sums, expected_over(48 << 10)));
  constexpr unsigned int kMore = 100 << 10;
  sums_over(kMore, launched);
  check(launched == cudaErrorInvalidValue,
        "100 KiB without cudaFuncAttributeMaxDynamicSharedMemorySize: cudaErrorInvalidValue (" +
            std::string(cudaGetErrorName(launched)) + ")");
  const cudaError_t allowed =
      cudaFuncSetAttribute(sum_neighbours_words, cudaFuncAttributeMaxDynamicSharedMemorySize, kMore);
  const std::vector<unsigned int> more_sums = sums_over(kMore, launched);
  check(allowed == cudaSuccess && launched == cudaSuccess && difference(more_sums, expected_over(kMore)).empty(),
        "with the attribute at 100 KiB: 100 KiB, every thread reads what another wrote" +
            difference(more_sums, expected_over(kMore)));
  sums_over(kMore + 16, launched);
  check(launched == cudaErrorInvalidValue, "16 bytes more than the attribute allows: cudaErrorInvalidValue (" +
                                               std::string(cudaGetErrorName(launched)) + ")");
  const cudaError_t at_opt_in =
      cudaFuncSetAttribute(sum_neighbours_words, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(opt_in));
  const std::vector<unsigned int> opt_in_sums = sums_over(opt_in, launched);
  check(at_opt_in == cudaSuccess && launched == cudaSuccess && difference(opt_in_sums, expected_over(opt_in)).empty(),
        "the attribute at the device's sharedMemPerBlockOptin (" + std::to_string(opt_in) +
            " bytes), and a launch of that much" + difference(opt_in_sums, expected_over(opt_in)));
  const cudaError_t above = cudaFuncSetAttribute(sum_neighbours_words, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                 static_cast<int>(opt_in) + 1);
  cudaGetLastError();
  check(above == cudaErrorInvalidValue, "the attribute one byte above sharedMemPerBlockOptin: cudaErrorInvalidValue (" +
                                            std::string(cudaGetErrorName(above)) + ")");
}

// Each planted mistake must give a result that differs from the reference.
void test_planted_mistakes() {
  std::vector<float> expected;
  const std::vector<float> transposed = multiplied_through_layouts<Mistake::kBTransposed>(kSmallIntegers, 16, expected);
  check(!transposed.empty() && !difference(transposed, expected).empty(),
        "planted: B's fragment built from B transposed: caught, D is not A B + C" + difference(transposed, expected));
  const std::vector<float> swapped = multiplied_through_layouts<Mistake::kLanesSwapped>(kSmallIntegers, 16, expected);
  check(
      !swapped.empty() && !difference(swapped, expected).empty(),
      "planted: lanes 5 and 9 with each other's A fragment: caught, D is not A B + C" + difference(swapped, expected));
#ifndef __CUDACC__
  // On a GPU a destination read before its wait holds whatever it held, or the copy: undefined.
  const std::vector<uint32_t> source = copy_source();
  const std::vector<uint32_t> early = copied_in_groups<true>(source);
  check(
      !difference(early, expected_copies(source)).empty() && early == std::vector<uint32_t>(source.size(), 0xFFFFFFFFu),
      "planted: each cp.async part read one wait too early: caught, every word the shared-memory poison (0xFFFFFFFF)" +
          difference(early, expected_copies(source)));
#endif
}

#ifndef __CUDACC__
// --- under cuda_on_cpu alone ---------------------------------------------------------------------

// Thread 0 of each block reads the first and last word of the dynamic shared memory, then writes
// them.
__global__ void read_dynamic_shared_first(unsigned int words, unsigned int* read) {
  unsigned int* shared = dynamic_shared_memory<unsigned int>();
  if (threadIdx.x != 0) return;
  read[2 * blockIdx.x] = shared[0];
  read[2 * blockIdx.x + 1] = shared[words - 1];
  shared[0] = shared[words - 1] = blockIdx.x;
}

__global__ void store_past_dynamic_shared(unsigned int words) {
  if (threadIdx.x == 0) dynamic_shared_memory<unsigned int>()[words] = 1;
}

void test_undefined_on_gpu() {
  cudaDeviceProp properties{};
  cudaGetDeviceProperties(&properties, 0);
  check(properties.sharedMemPerBlockOptin == 232448 && properties.sharedMemPerBlock == 48 << 10,
        "the device's shared memory per block: 48 KiB, 227 KiB opted in (an H100's, an H200's)");
  constexpr unsigned int kWords = 1000;
  DeviceArray<unsigned int> read(4);
  launch_with_shared_memory(2, 32, kWords * 4, nullptr, read_dynamic_shared_first, kWords, read.get());
  check(read.read() == std::vector<unsigned int>(4, 0xFFFFFFFFu),
        "dynamic shared memory reads 0xFF bytes before it is written, in each block (block 1 does not see block 0's)");
  const ChildEnd overflow = in_child([] {
    launch_with_shared_memory(1, 32, kWords * 4, nullptr, store_past_dynamic_shared, kWords);
    cudaDeviceSynchronize();
  });
  check(contains(overflow.error_output, "ERROR: AddressSanitizer: heap-buffer-overflow") &&
            contains(overflow.error_output, "WRITE of size 4") &&
            contains(overflow.error_output, "store_past_dynamic_shared"),
        "a store one word past the dynamic shared memory: AddressSanitizer's heap-buffer-overflow, in the kernel");
}

__global__ void mma_without_lane_31(float* d) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  if (lane == 31) return;
  const uint32_t a[4] = {}, b[2] = {};
  const float c[4] = {};
  float result[4];
  mma_m16n8k16_bf16(result, a, b, c);
  d[lane] = result[0];
}

void test_deadlocks() {
  const ChildEnd skipped = in_child([] {
    DeviceArray<float> d(kWarp);
    launch(1, kWarp, nullptr, mma_without_lane_31, d.get());
    cudaDeviceSynchronize();
  });
  check(skipped.signal == SIGABRT && contains(skipped.error_output, "deadlock in ") &&
            contains(skipped.error_output, "mma_without_lane_31") &&
            contains(skipped.error_output, "block (0,0,0) of grid (1,1,1)") &&
            contains(skipped.error_output,
                     "threads 0-30 (first (0,0,0), warp 0 lane 0): waits at "
                     "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 in mma_without_lane_31 (") &&
            contains(skipped.error_output, "test_tensor_cores.cu:") &&
            contains(skipped.error_output, "thread 31 (first (31,0,0), warp 0 lane 31): returned from the kernel"),
        "an mma that lane 31 skips: a deadlock report naming the kernel, the block and the line, then abort:\n" +
            skipped.error_output);
  const ChildEnd half_warp = in_child([] {
    DeviceArray<float> d(kWarp);
    launch(1, 16, nullptr, mma_without_lane_31, d.get());
    cudaDeviceSynchronize();
  });
  check(half_warp.signal == SIGABRT &&
            contains(half_warp.error_output,
                     "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 needs lanes 0xffffffff "
                     "of warp 0, which in a block of 16 threads has lanes 0x0000ffff"),
        "an mma in a block of 16 threads: refused, it takes a whole warp:\n" + half_warp.error_output);
}

// Lane 3 gives a row address 2 bytes off.
__global__ void ldmatrix_misaligned_row(uint32_t* out) {
  __shared__ __align__(16) uint16_t rows[8][8];
  const int lane = static_cast<int>(threadIdx.x);
  uint32_t fragment[1];
  ldmatrix<1>(fragment, &rows[lane % 8][lane == 3 ? 1 : 0]);
  out[lane] = fragment[0];
}

__global__ void ldmatrix_of_device_memory(uint32_t* memory) {
  const int lane = static_cast<int>(threadIdx.x);
  uint32_t fragment[1];
  ldmatrix<1>(fragment, memory + 4 * (lane % 8));
  memory[lane] = fragment[0];
}

// Thread 5's destination is device memory.
__global__ void cp_async_to_device_memory(uint32_t* memory) {
  __shared__ __align__(16) uint32_t staged[kWarp * 4];
  cp_async_16(threadIdx.x == 5 ? memory : &staged[4 * threadIdx.x], memory + 4 * threadIdx.x);
  cp_async_wait_all();
  memory[threadIdx.x] = staged[4 * threadIdx.x];
}

// Thread 7's source is 4 bytes off.
__global__ void cp_async_misaligned_source(uint32_t* memory) {
  __shared__ __align__(16) uint32_t staged[kWarp * 4];
  cp_async_16(&staged[4 * threadIdx.x], memory + 4 * threadIdx.x + (threadIdx.x == 7 ? 1 : 0));
  cp_async_wait_all();
  memory[threadIdx.x] = staged[4 * threadIdx.x];
}

void test_faults() {
  const struct {
    void (*kernel)(uint32_t*);
    cudaError_t error;
    const char* report;
    const char* what;
  } cases[] = {
      {ldmatrix_misaligned_row, cudaErrorMisalignedAddress,
       "ldmatrix.sync.aligned.m8n8.x1.shared.b16 in ldmatrix_misaligned_row (", "which is not 16-byte aligned"},
      {ldmatrix_of_device_memory, cudaErrorIllegalAddress,
       "ldmatrix.sync.aligned.m8n8.x1.shared.b16 in ldmatrix_of_device_memory (",
       "which is not in the block's shared memory"},
      {cp_async_to_device_memory, cudaErrorIllegalAddress, "thread 5 (warp 0 lane 5) in cp_async_to_device_memory (",
       "which is not in the block's shared memory"},
      {cp_async_misaligned_source, cudaErrorMisalignedAddress,
       "thread 7 (warp 0 lane 7) in cp_async_misaligned_source (", "which are not both 16-byte aligned"},
  };
  for (const auto& faulting : cases) {
    const ChildEnd end = in_child([&] {
      DeviceArray<uint32_t> memory(8 * kWarp);
      const bool launched = launch(1, kWarp, nullptr, faulting.kernel, memory.get()) == cudaSuccess;
      const bool faulted = cudaDeviceSynchronize() == faulting.error;
      void* later = nullptr;
      const bool sticky = cudaMalloc(&later, 4) == faulting.error;
      _exit(launched && faulted && sticky ? 0 : 1);
    });
    check(end.exit_code == 0 &&
              contains(end.error_output, std::string("cuda_on_cpu: ") + cudaGetErrorName(faulting.error) + ": in ") &&
              contains(end.error_output, faulting.report) && contains(end.error_output, "test_tensor_cores.cu:") &&
              contains(end.error_output, faulting.what),
          std::string("a fault, sticky: ") + cudaGetErrorName(faulting.error) + ":\n" + end.error_output);
  }
}
#endif

constexpr Group kGroups[] = {
    {"mma", test_mma},
    {"ldmatrix", test_ldmatrix},
    {"ldmatrix_mma", test_ldmatrix_feeding_mma},
    {"cp_async", test_cp_async},
    {"dynamic_shared", test_dynamic_shared_memory},
    {"planted", test_planted_mistakes},
#ifndef __CUDACC__
    {"undefined_on_gpu", test_undefined_on_gpu},
    {"deadlocks", test_deadlocks},
    {"faults", test_faults},
#endif
};

}  // namespace

// A GPU run needs compute capability 8.0 or newer (bf16 mma.sync, cp.async); without one the
// program is skipped (77). cuda_on_cpu's devices are of 9.0.
int main(int argc, char** argv) {
  int devices = 0;
  cudaDeviceProp properties{};
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0 ||
      cudaGetDeviceProperties(&properties, 0) != cudaSuccess || properties.major < 8) {
    std::printf("SKIP: no CUDA device of compute capability 8.0 or newer\n");
    return 77;
  }
  std::printf("on %s, compute capability %d.%d\n", properties.name, properties.major, properties.minor);
  return run_groups(argc, argv, kGroups);
}
