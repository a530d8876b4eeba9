// Tests for the CUDA device table (kernels/cuda/) against the CPU reference table
// (kernels/cpu/): every op on random inputs from fixed seeds, on shapes that are not multiples of
// 8, 16 or 32 (1x1, 3x5x7, 129x257x63, ...), every transpose, GEMMs on padded rows and strided
// batches, and operands at odd float offsets, compared element by element as
// |cuda - ref| <= abs + rel * |ref| with the tolerance stated per op below; the worst element of
// each comparison is printed. GEMMs, the activations, the loss, the optimizer steps,
// sum_squares, attention, LayerNorm and the embedding also run twice on the same inputs and must
// give bitwise the same output. The CUDA ops run on a stream of their own that does not
// synchronize with the legacy default stream, so an op that launched on another stream, or a copy
// back that did not wait for its stream, shows as a wrong result.
//
// The CUDA table is the backend library TRAINCTL_CUDA_BACKEND names (kernels/device.h): the
// GPU's, where the backend finding no usable GPU makes the program print why and exit 77 (meson's
// SKIP), or the CPU implementation of CUDA's (cuda_on_cpu/), where `--schedules FIRST,SECOND`
// runs each op's two runs under those two orders of its threads, so that a missing barrier shows
// as different bits. `--only GROUP` runs one group of ops. Any failure exits 1.
//
// `test_cuda_kernels --large` runs instead the shapes of the benchmark MLP (4 x 8192 hidden,
// batch 8192, scripts/bench_gpu_mlp.py): its GEMMs with every transpose in fp32 and bf16, and
// bias + activation forward and backward at 8192 x 8192; and GPT-2 124M's loss, attention,
// LayerNorm and embedding (8 x 1024 tokens, 768 wide, 12 heads, vocabulary 50257). The CPU
// reference takes a while there (about 20 TFLOP of OpenBLAS GEMMs), so meson's test leaves them
// out; scripts/gpu_check.sh runs them on the GPU machine.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "device.h"

namespace {

using trainctl::Activation;
using trainctl::Device;
using trainctl::Gemm;
using trainctl::Stream;

struct Tolerance {
  double abs, rel;
};

// Tolerances, per op and dtype. Operands are in [-1, 1] unless said otherwise.
// Same IEEE operations in the same order, uncontracted (nvcc --fmad=false): bitwise equal.
constexpr Tolerance kExact{0.0, 0.0};
// fp32 GEMM, k <= 1031: both sum in fp32, in different orders (OpenBLAS's blocking, cuBLASLt's).
constexpr Tolerance kGemmFp32{1e-4, 1e-4};
constexpr int64_t kGemmToleranceDepth = 1031;
// bf16 GEMM against the CPU gemm_bf16: the same rounded operands and exact products, summed in
// fp32 in different orders, on the GPU by tensor cores. Operands left unrounded on one side
// would differ by about 1e-2.
constexpr Tolerance kGemmBf16{5e-4, 5e-4};
// GELU, z in [-4, 4]: erff and expf are not correctly rounded on either side (CUDA's within 2
// ulp, glibc's vector versions within 4), so 1 + erf differs by up to about 6 ulp of 1.
constexpr Tolerance kGelu{2e-6, 2e-6};
// Tanh-approximate GELU, z in [-4, 4]: tanhf differs by up to about 4 ulp of 1 (2.4e-7) between
// the sides. The forward scales that by 0.5 |z| <= 2; the derivative by up to about 13 (0.5 +
// |z| tanh(u) u'(z) at |z| = 4), where 1 - tanh^2 cancels.
constexpr Tolerance kGeluTanh{5e-6, 2e-6};
// softmax cross-entropy gradient: exp in double on both sides, within an ulp of double, rounded
// to float once.
constexpr Tolerance kSoftmaxGrad{1e-12, 1e-6};
// Sums in double in different orders: the loss sum and sum_squares.
constexpr Tolerance kDoubleSum{1e-10, 1e-11};
// grad_bias, a float sum over rows: the CPU adds row by row, CUDA in blocks of rows, so the
// rounding differs by up to about an ulp of the running sum per row.
Tolerance grad_bias_tolerance(int64_t rows) { return {2e-7 * static_cast<double>(rows) + 1e-6, 1e-6}; }

// The GEMM tolerances above hold up to k = 1031. A sum of more terms rounds more often, and its
// error bound grows linearly in k, so beyond that the absolute part grows with k / 1031: 7.9e-4
// for fp32 at k = 8192, where OpenBLAS and an fp32 sum tile by tile (32 terms at a time, as
// tensor cores add) were measured 9.2e-5 apart at most (256 x 256 outputs, |ref| up to 151).
Tolerance gemm_tolerance(bool bf16, int64_t k) {
  const Tolerance depth_1031 = bf16 ? kGemmBf16 : kGemmFp32;
  const double growth = std::max(1.0, static_cast<double>(k) / static_cast<double>(kGemmToleranceDepth));
  return {depth_1031.abs * growth, depth_1031.rel};
}

Tolerance activation_tolerance(Activation act) {
  switch (act) {
    case Activation::kGelu:
      return kGelu;
    case Activation::kGeluTanh:
      return kGeluTanh;
    case Activation::kNone:
    case Activation::kRelu:
      return kExact;
  }
  return kExact;
}

constexpr Activation kActivations[] = {Activation::kNone, Activation::kRelu, Activation::kGelu, Activation::kGeluTanh};

// The CPU reference ignores streams.
const Device& cpu() { return trainctl::cpu_device(); }
constexpr Stream kCpuStream{};

// The table under test and the stream its ops run on.
struct Gpu {
  const Device& device;
  Stream stream;
};

std::vector<float> random_floats(size_t n, float low, float high, uint64_t seed) {
  std::mt19937_64 engine(seed);
  std::uniform_real_distribution<float> distribution(low, high);
  std::vector<float> values(n);
  for (float& value : values) value = distribution(engine);
  return values;
}

std::vector<int32_t> random_labels(size_t n, int64_t classes, uint64_t seed) {
  std::mt19937_64 engine(seed);
  std::uniform_int_distribution<int32_t> distribution(0, static_cast<int32_t>(classes - 1));
  std::vector<int32_t> labels(n);
  for (int32_t& label : labels) label = distribution(engine);
  return labels;
}

// Device memory of the CUDA table holding a copy of a host vector (plus `offset` leading
// elements, to place the data at an odd address); freed at scope exit.
template <typename T>
class DeviceCopy {
 public:
  DeviceCopy(const Gpu& gpu, const std::vector<T>& host, size_t offset = 0)
      : gpu_(gpu),
        size_(host.size()),
        base_(static_cast<T*>(gpu.device.memory.alloc((offset + host.size()) * sizeof(T)))),
        data_(base_ + offset) {
    write(host);
  }
  DeviceCopy(const DeviceCopy&) = delete;
  DeviceCopy& operator=(const DeviceCopy&) = delete;
  ~DeviceCopy() { gpu_.device.memory.release(base_); }

  T* get() const { return data_; }
  void write(const std::vector<T>& host) { gpu_.device.memory.upload(gpu_.stream, data_, host.data(), bytes()); }
  std::vector<T> read() const {
    std::vector<T> host(size_);
    gpu_.device.memory.download(gpu_.stream, host.data(), data_, bytes());
    return host;
  }
  size_t bytes() const { return size_ * sizeof(T); }

 private:
  const Gpu& gpu_;
  size_t size_;
  T* base_;
  T* data_;
};

// The schedules of the CPU implementation of CUDA (cuda_on_cpu/execution.cpp) that an op's first
// and second runs go under (--schedules FIRST,SECOND): a kernel that misses a barrier gives
// different bits under two fiber orders. Without the option, both runs go under the
// environment's TRAINCTL_CUDA_ON_CPU_SCHEDULE; a GPU has no such thing and runs twice alike.
struct Schedules {
  std::string first, second;
  std::string runs() const {
    return first.empty() ? "on a second run" : "under schedules " + first + " and " + second;
  }
} schedules;

// Runs `run` with TRAINCTL_CUDA_ON_CPU_SCHEDULE set to `schedule` (when one is given).
template <typename Run>
auto under_schedule(const std::string& schedule, const Run& run) {
  if (!schedule.empty()) setenv("TRAINCTL_CUDA_ON_CPU_SCHEDULE", schedule.c_str(), 1);
  return run();
}
template <typename Run>
auto first_run(const Run& run) {
  return under_schedule(schedules.first, run);
}
template <typename Run>
auto second_run(const Run& run) {
  return under_schedule(schedules.second, run);
}

// Counts and prints the comparisons.
class Checker {
 public:
  // Element by element; prints the worst element, the one furthest over (or nearest to) its
  // tolerance. NaN matches only NaN; infinities only themselves.
  template <typename T>
  void compare(const std::string& what, const std::vector<T>& cuda, const std::vector<T>& ref, Tolerance tolerance) {
    if (cuda.size() != ref.size()) {
      record(false, what + ": " + std::to_string(cuda.size()) + " values, expected " + std::to_string(ref.size()));
      return;
    }
    size_t worst = 0, over = 0;
    double worst_ratio = -1.0, worst_error = 0.0;
    for (size_t i = 0; i < ref.size(); ++i) {
      const auto c = static_cast<double>(cuda[i]), r = static_cast<double>(ref[i]);
      double error = 0.0;
      if (std::isnan(c) || std::isnan(r)) {
        error = std::isnan(c) && std::isnan(r) ? 0.0 : std::numeric_limits<double>::infinity();
      } else if (c != r) {
        error = std::isinf(c) || std::isinf(r) ? std::numeric_limits<double>::infinity() : std::fabs(c - r);
      }
      const double allowed = tolerance.abs + tolerance.rel * std::fabs(r);
      const double ratio = error == 0.0     ? 0.0
                           : allowed == 0.0 ? std::numeric_limits<double>::infinity()
                                            : error / allowed;
      if (error > allowed) ++over;
      if (ratio > worst_ratio) {
        worst_ratio = ratio;
        worst_error = error;
        worst = i;
      }
    }
    // fmt prints each value in the fewest digits that read back as the same float or double.
    const std::string line =
        fmt::format("{}: worst [{}] cuda={} ref={} |err|={:.3g} (tolerance {:.3g} + {:.3g}*|ref|), {} of {} over", what,
                    worst, cuda[worst], ref[worst], worst_error, tolerance.abs, tolerance.rel, over, ref.size());
    record(over == 0, line);
  }

  template <typename T>
  void compare(const std::string& what, T cuda, T ref, Tolerance tolerance) {
    compare(what, std::vector<T>{cuda}, std::vector<T>{ref}, tolerance);
  }

  // The second run of an op on the same inputs (second_run) gave the first run's bits.
  template <typename T>
  void check_deterministic(const std::string& what, const std::vector<T>& first, const std::vector<T>& second) {
    const bool same =
        first.size() == second.size() && std::memcmp(first.data(), second.data(), first.size() * sizeof(T)) == 0;
    record(same, what + ": " + (same ? "bitwise the same " : "differs ") + schedules.runs());
  }

  void record(bool passed, const std::string& line) {
    ++checks_;
    if (!passed) ++failures_;
    std::printf("[%s] %s\n", passed ? " OK " : "FAIL", line.c_str());
  }

  int checks() const { return checks_; }
  int failures() const { return failures_; }

 private:
  int checks_ = 0;
  int failures_ = 0;
};

std::string shape_name(int64_t a, int64_t b) { return fmt::format("{}x{}", a, b); }
std::string shape_name(int64_t a, int64_t b, int64_t c) { return fmt::format("{}x{}x{}", a, b, c); }

void test_memory(const Gpu& gpu, Checker& checker) {
  const trainctl::MemoryOps& memory = gpu.device.memory;
  const std::vector<float> values = random_floats(1000, -1.0f, 1.0f, 1);
  const auto n = static_cast<int64_t>(values.size());
  DeviceCopy<float> device(gpu, values, 3);
  checker.compare("upload/download 1000 floats", device.read(), values, kExact);

  // Downloads into page-locked memory, as checkpoints do.
  std::vector<float> pinned(values.size(), 0.0f);
  memory.pin_host(pinned.data(), device.bytes());
  memory.download(gpu.stream, pinned.data(), device.get(), device.bytes());
  memory.unpin_host(pinned.data());
  checker.compare("download into pinned memory", pinned, values, kExact);

  DeviceCopy<float> target(gpu, std::vector<float>(values.size(), 2.0f), 1);
  memory.copy(gpu.stream, target.get(), device.get(), device.bytes());
  checker.compare("copy device to device", target.read(), values, kExact);

  // Nothing waits between the three: each is ordered after the one before on the stream.
  memory.fill_zero(gpu.stream, device.get(), n);
  memory.copy(gpu.stream, target.get(), device.get(), device.bytes());
  checker.compare("fill_zero, then copy", target.read(), std::vector<float>(values.size(), 0.0f), kExact);

  // What the table knows of this GPU: printed, not checked (0 is a GPU the table does not list).
  std::printf("[INFO] peak_flops: bf16 %.4g, fp32 %.4g FLOP/s\n", memory.peak_flops(true), memory.peak_flops(false));
}

// A GEMM case: the shape and scalars, the offset of every operand from its allocation, and for
// padded rows and batches, how the matrices lie in memory.
struct GemmCase {
  int64_t m, n, k;
  float alpha = 1.0f, beta = 0.0f;
  size_t offset = 0;  // of a, b and c from their allocations, in floats
  int64_t batch = 1;
  int64_t row_padding = 0;  // ld = stored columns + row_padding, for a, b and c
  int64_t matrix_gap = 0;   // stride = stored rows * ld + matrix_gap
  bool shared_b = false;    // stride_b = 0: every GEMM of the batch multiplies by the same b
};

// The case's GEMM with its transposes, leading dimensions and strides; no operands yet.
Gemm gemm_of_case(const GemmCase& shape, bool transpose_a, bool transpose_b) {
  const int64_t lda = (transpose_a ? shape.m : shape.k) + shape.row_padding;
  const int64_t ldb = (transpose_b ? shape.k : shape.n) + shape.row_padding;
  const int64_t ldc = shape.n + shape.row_padding;
  return Gemm{
      .transpose_a = transpose_a,
      .transpose_b = transpose_b,
      .m = shape.m,
      .n = shape.n,
      .k = shape.k,
      .alpha = shape.alpha,
      .beta = shape.beta,
      .lda = lda,
      .stride_a = (transpose_a ? shape.k : shape.m) * lda + shape.matrix_gap,
      .ldb = ldb,
      .stride_b = shape.shared_b ? 0 : (transpose_b ? shape.n : shape.k) * ldb + shape.matrix_gap,
      .ldc = ldc,
      .stride_c = shape.m * ldc + shape.matrix_gap,
      .batch = shape.batch,
  };
}

// The floats an operand spans: `batch` matrices `stride` apart, of `rows` rows `ld` apart.
size_t span(int64_t rows, int64_t ld, int64_t stride, int64_t batch) {
  return static_cast<size_t>((batch - 1) * stride + rows * ld);
}
size_t span_a(const Gemm& g) { return span(g.transpose_a ? g.k : g.m, g.lda, g.stride_a, g.batch); }
size_t span_b(const Gemm& g) { return span(g.transpose_b ? g.n : g.k, g.ldb, g.stride_b, g.batch); }
size_t span_c(const Gemm& g) { return span(g.m, g.ldc, g.stride_c, g.batch); }

std::string gemm_name(bool bf16, const GemmCase& shape, const Gemm& gemm) {
  std::string name =
      fmt::format("{} {}{} {} alpha={} beta={}", bf16 ? "gemm_bf16" : "gemm", gemm.transpose_a ? 'T' : 'N',
                  gemm.transpose_b ? 'T' : 'N', shape_name(shape.m, shape.n, shape.k), shape.alpha, shape.beta);
  if (shape.row_padding != 0) name += fmt::format(" lda={} ldb={} ldc={}", gemm.lda, gemm.ldb, gemm.ldc);
  if (shape.batch != 1)
    name += fmt::format(" batch={} strides={},{},{}", shape.batch, gemm.stride_a, gemm.stride_b, gemm.stride_c);
  if (shape.offset != 0) name += " (operands at odd offsets)";
  return name;
}

// Runs `gemm` on a, b and c_init on both tables; c's padding and gaps must come back as they were.
void test_gemm(const Gpu& gpu, Checker& checker, bool bf16, const GemmCase& shape, const Gemm& gemm,
               const std::vector<float>& a, const std::vector<float>& b, const std::vector<float>& c_init) {
  const auto gemm_of = [bf16](const Device& device) { return bf16 ? device.blas.gemm_bf16 : device.blas.gemm; };
  const auto with_operands = [&gemm](const float* a_data, const float* b_data, float* c_data) {
    Gemm operands = gemm;
    operands.a = a_data;
    operands.b = b_data;
    operands.c = c_data;
    return operands;
  };
  std::vector<float> ref = c_init;
  gemm_of(cpu())(kCpuStream, with_operands(a.data(), b.data(), ref.data()));
  DeviceCopy<float> device_a(gpu, a, shape.offset), device_b(gpu, b, shape.offset), device_c(gpu, c_init, shape.offset);
  const auto run = [&] {
    device_c.write(c_init);
    gemm_of(gpu.device)(gpu.stream, with_operands(device_a.get(), device_b.get(), device_c.get()));
    return device_c.read();
  };
  const std::vector<float> first = first_run(run);
  const std::string name = gemm_name(bf16, shape, gemm);
  checker.compare(name, first, ref, gemm_tolerance(bf16, shape.k));
  checker.check_deterministic(name, first, second_run(run));
}

// Every case in fp32 and bf16, with every transpose, on random operands from `seed` on.
void test_gemm_cases(const Gpu& gpu, Checker& checker, std::span<const GemmCase> cases, uint64_t seed) {
  for (bool bf16 : {false, true})
    for (const GemmCase& shape : cases)
      for (bool transpose_a : {false, true})
        for (bool transpose_b : {false, true}) {
          const Gemm gemm = gemm_of_case(shape, transpose_a, transpose_b);
          const auto a = random_floats(span_a(gemm), -1.0f, 1.0f, ++seed);
          const auto b = random_floats(span_b(gemm), -1.0f, 1.0f, ++seed);
          const auto c = random_floats(span_c(gemm), -1.0f, 1.0f, ++seed);
          test_gemm(gpu, checker, bf16, shape, gemm, a, b, c);
        }
}

void test_gemms(const Gpu& gpu, Checker& checker) {
  const GemmCase cases[] = {
      {.m = 1, .n = 1, .k = 1},
      {.m = 3, .n = 5, .k = 7},
      {.m = 3, .n = 5, .k = 7, .alpha = 0.75f, .beta = -0.5f},
      {.m = 129, .n = 257, .k = 63},
      {.m = 129, .n = 257, .k = 63, .alpha = 0.75f, .beta = -0.5f},
      {.m = 129, .n = 257, .k = 63, .alpha = 1.0f, .beta = 1.0f, .offset = 1},
      {.m = 64, .n = 128, .k = 256},
      {.m = 257, .n = 129, .k = 1031, .alpha = 1.0f, .beta = 1.0f},
      {.m = 1000, .n = 10, .k = 33, .offset = 3},
      // Padded rows, as in a slice of a wider matrix (one head of a [rows, 3 * channels] qkv).
      {.m = 129, .n = 65, .k = 63, .beta = 1.0f, .row_padding = 5},
      // Strided batches, as attention multiplies head by head.
      {.m = 3, .n = 5, .k = 7, .batch = 4, .row_padding = 3, .matrix_gap = 5},
      {.m = 64, .n = 64, .k = 32, .alpha = 0.125f, .batch = 12},
      {.m = 129,
       .n = 65,
       .k = 63,
       .alpha = 0.75f,
       .beta = -0.5f,
       .offset = 1,
       .batch = 3,
       .row_padding = 1,
       .matrix_gap = 7},
      {.m = 17, .n = 33, .k = 9, .beta = 1.0f, .offset = 3, .batch = 5, .row_padding = 2, .shared_b = true},
  };
  test_gemm_cases(gpu, checker, cases, 100);

  // Operands halfway between two bf16 values (1 + odd multiples of 2^-8): rounding them toward
  // even, as the CPU does, or any other way shows as about 4e-3 relative.
  const GemmCase ties{.m = 5, .n = 6, .k = 7};
  std::mt19937_64 engine(7);
  auto halfway = [&engine](size_t n) {
    std::vector<float> values(n);
    for (float& value : values) {
      const float sign = engine() % 2 != 0 ? -1.0f : 1.0f;
      value = sign * (1.0f + static_cast<float>(2 * (engine() % 64) + 1) / 256.0f);
    }
    return values;
  };
  const Gemm gemm = gemm_of_case(ties, false, false);
  test_gemm(gpu, checker, true, ties, gemm, halfway(span_a(gemm)), halfway(span_b(gemm)),
            std::vector<float>(span_c(gemm), 0.0f));
}

// The benchmark MLP's GEMMs, batch 8192: the hidden layers' 8192 x 8192 x 8192, overwriting and
// accumulating (beta = 1, as weight gradients do), the first layer's forward from 1024 inputs,
// and the classifier's weight gradient (1024 classes); the transposes make the other passes.
void test_benchmark_gemms(const Gpu& gpu, Checker& checker) {
  const GemmCase cases[] = {
      {.m = 8192, .n = 8192, .k = 8192},
      {.m = 8192, .n = 8192, .k = 8192, .beta = 1.0f},
      {.m = 8192, .n = 8192, .k = 1024},
      {.m = 1024, .n = 8192, .k = 8192, .beta = 1.0f},
  };
  test_gemm_cases(gpu, checker, cases, 800);
}

// z in [-4, 4] with every 7th element exactly 0 (GELU's derivative takes its own branch there).
std::vector<float> pre_activations(size_t n, uint64_t seed) {
  std::vector<float> z = random_floats(n, -4.0f, 4.0f, seed);
  for (size_t i = 0; i < n; i += 7) z[i] = 0.0f;
  return z;
}

struct ActivationShape {
  int64_t rows, cols;
  size_t offset = 0;  // of every operand from its allocation, in floats
};
// 64 and 2308 columns at offset 0 are rows of whole aligned float4s, which the forward moves four
// floats at a time; the other widths, and offset 1, one float at a time. A narrow matrix's rows
// share a warp (1, 7, 10, 64 columns); a wide one's spread over column tiles (257, 2308).
constexpr ActivationShape kActivationShapes[] = {{1, 1},      {3, 7},      {129, 257},    {4099, 70},
                                                 {20000, 10}, {129, 64},   {129, 64, 1},  {33, 2308}};
// The benchmark MLP's hidden activations: batch 8192, 8192 wide.
constexpr ActivationShape kBenchmarkActivationShapes[] = {{8192, 8192}};

void test_bias_act_forward(const Gpu& gpu, Checker& checker, std::span<const ActivationShape> shapes, uint64_t seed) {
  for (const auto [rows, cols, offset] : shapes)
    for (Activation act : kActivations)
      for (bool in_place : {false, true}) {
        const auto n = static_cast<size_t>(rows * cols);
        const std::vector<float> z_init = pre_activations(n, ++seed);
        const std::vector<float> bias = random_floats(static_cast<size_t>(cols), -1.0f, 1.0f, ++seed);
        std::vector<float> ref_z = z_init, ref_out(n);
        cpu().elementwise.bias_act_forward(kCpuStream, ref_z.data(), bias.data(), ref_out.data(), rows, cols, act);

        DeviceCopy<float> z(gpu, z_init, offset), device_bias(gpu, bias, offset),
            separate_out(gpu, std::vector<float>(n), offset);
        // In place: out is z, which then holds act(z).
        DeviceCopy<float>& out = in_place ? z : separate_out;
        const auto run = [&] {
          z.write(z_init);
          gpu.device.elementwise.bias_act_forward(gpu.stream, z.get(), device_bias.get(), out.get(), rows, cols, act);
          return out.read();
        };
        const std::vector<float> first = first_run(run);
        const std::string name = fmt::format("bias_act_forward {} {}{}{}", activation_name(act), shape_name(rows, cols),
                                             offset != 0 ? " (unaligned)" : "", in_place ? " in place" : "");
        if (!in_place) checker.compare(name + " z", z.read(), ref_z, kExact);
        checker.compare(name + " out", first, ref_out, activation_tolerance(act));
        checker.check_deterministic(name, first, second_run(run));
      }
}

void test_bias_act_backward(const Gpu& gpu, Checker& checker, std::span<const ActivationShape> shapes, uint64_t seed) {
  for (const auto [rows, cols, offset] : shapes)
    for (Activation act : kActivations)
      for (bool in_place : {false, true}) {
        const auto n = static_cast<size_t>(rows * cols);
        const std::vector<float> grad_out = random_floats(n, -1.0f, 1.0f, ++seed);
        std::vector<float> z = pre_activations(n, ++seed), out(n);
        cpu().elementwise.bias_act_forward(kCpuStream, z.data(),
                                           std::vector<float>(static_cast<size_t>(cols), 0.0f).data(), out.data(), rows,
                                           cols, act);
        const std::vector<float> grad_bias_init = random_floats(static_cast<size_t>(cols), -1.0f, 1.0f, ++seed);
        std::vector<float> ref_grad_z(n), ref_grad_bias = grad_bias_init;
        // Without an activation, z and out are not read, and the model passes null for them.
        const bool no_inputs = act == Activation::kNone;
        cpu().elementwise.bias_act_backward(kCpuStream, grad_out.data(), no_inputs ? nullptr : z.data(),
                                            no_inputs ? nullptr : out.data(), ref_grad_z.data(), ref_grad_bias.data(),
                                            rows, cols, act);

        DeviceCopy<float> device_grad_out(gpu, grad_out, offset), device_z(gpu, z, offset),
            device_out(gpu, out, offset), separate_grad_z(gpu, std::vector<float>(n), offset),
            grad_bias(gpu, grad_bias_init, offset);
        // In place, as the model calls it: grad_z is grad_out.
        DeviceCopy<float>& grad_z = in_place ? device_grad_out : separate_grad_z;
        struct Result {
          std::vector<float> grad_z, grad_bias;
        };
        const auto run = [&] {
          device_grad_out.write(grad_out);
          grad_bias.write(grad_bias_init);
          gpu.device.elementwise.bias_act_backward(gpu.stream, device_grad_out.get(),
                                                   no_inputs ? nullptr : device_z.get(),
                                                   no_inputs ? nullptr : device_out.get(), grad_z.get(),
                                                   grad_bias.get(), rows, cols, act);
          return Result{grad_z.read(), grad_bias.read()};
        };
        const Result first = first_run(run), second = second_run(run);
        const std::string name =
            fmt::format("bias_act_backward {} {}{}{}", activation_name(act), shape_name(rows, cols),
                        offset != 0 ? " (unaligned)" : "", in_place ? " in place" : "");
        checker.compare(name + " grad_z", first.grad_z, ref_grad_z, activation_tolerance(act));
        checker.compare(name + " grad_bias", first.grad_bias, ref_grad_bias, grad_bias_tolerance(rows));
        checker.check_deterministic(name + " grad_z", first.grad_z, second.grad_z);
        checker.check_deterministic(name + " grad_bias", first.grad_bias, second.grad_bias);
      }
}

void test_add(const Gpu& gpu, Checker& checker) {
  enum class Output { kSeparate, kIsA, kIsB };
  uint64_t seed = 450;
  for (int64_t n : {int64_t{1}, int64_t{3}, int64_t{1000}, int64_t{100003}})
    // Offset 1: no operand 16-byte aligned, so not four floats at a time.
    for (size_t offset : {size_t{0}, size_t{1}})
      for (Output output : {Output::kSeparate, Output::kIsA, Output::kIsB}) {
        const auto size = static_cast<size_t>(n);
        const std::vector<float> a = random_floats(size, -1.0f, 1.0f, ++seed);
        const std::vector<float> b = random_floats(size, -1.0f, 1.0f, ++seed);
        std::vector<float> ref(size);
        cpu().elementwise.add(kCpuStream, ref.data(), a.data(), b.data(), n);
        DeviceCopy<float> device_a(gpu, a, offset), device_b(gpu, b, offset),
            separate_out(gpu, std::vector<float>(size), offset);
        DeviceCopy<float>& out = output == Output::kIsA ? device_a : output == Output::kIsB ? device_b : separate_out;
        gpu.device.elementwise.add(gpu.stream, out.get(), device_a.get(), device_b.get(), n);
        const char* output_name = output == Output::kIsA ? " out = a" : output == Output::kIsB ? " out = b" : "";
        checker.compare(fmt::format("add n={}{}{}", n, offset != 0 ? " (unaligned)" : "", output_name), out.read(), ref,
                        kExact);
      }
}

struct LossCase {
  int64_t rows, classes;
  bool integer_logits;     // many ties for the argmax, which goes to the first
  size_t offset = 0;       // of logits and the gradient from their allocations, in floats
  int64_t row_stride = 0;  // a padded vocabulary's; 0: classes
  int64_t stride() const { return row_stride != 0 ? row_stride : classes; }
};
// Strides a multiple of 4 (12, 1000, 8, 40) at offset 0: every row starts 16-byte aligned, so the
// kernel reads float4s; at offset 1, and the other strides, one float at a time. Over 8192 rows
// (9000) a warp takes more than one row. Padded rows (37 of 40, 10 of 13) must be skipped by the
// float4 reads and by the single ones.
constexpr LossCase kLossCases[] = {{1, 1, false},        {3, 5, false},           {129, 10, false},
                                   {129, 10, true},      {129, 12, true},         {257, 1000, false},
                                   {257, 1000, false, 1}, {4099, 37, false},      {9000, 3, false},
                                   {9000, 8, false},     {257, 37, false, 0, 40}, {129, 10, true, 0, 13}};
// GPT-2 124M's: 8 sequences of 1024 tokens over its vocabulary of 50257, padded to 50304.
constexpr LossCase kGpt2LossCases[] = {{8192, 50257, false, 0, 50304}};

void test_softmax_cross_entropy(const Gpu& gpu, Checker& checker, std::span<const LossCase> cases, uint64_t seed) {
  for (const LossCase& shape : cases)
    for (bool with_gradient : {true, false}) {
      const auto n = static_cast<size_t>(shape.rows * shape.stride());
      std::vector<float> logits = random_floats(n, -8.0f, 8.0f, ++seed);
      if (shape.integer_logits)
        for (float& logit : logits) logit = std::round(logit / 4.0f);
      const std::vector<int32_t> labels = random_labels(static_cast<size_t>(shape.rows), shape.classes, ++seed);
      const float grad_scale = 1.0f / static_cast<float>(shape.rows);
      // The padding's gradient must be written as 0: it starts as something else.
      std::vector<float> ref_grad(n, 1.0f);
      double ref_loss = 0.0;
      int64_t ref_correct = 0;
      cpu().loss.softmax_cross_entropy(kCpuStream, logits.data(), labels.data(),
                                       with_gradient ? ref_grad.data() : nullptr, shape.rows, shape.classes,
                                       shape.stride(), grad_scale, &ref_loss, &ref_correct);

      DeviceCopy<float> device_logits(gpu, logits, shape.offset),
          grad(gpu, std::vector<float>(n, 1.0f), shape.offset);
      DeviceCopy<int32_t> device_labels(gpu, labels);
      struct Result {
        double loss;
        int64_t correct;
        std::vector<float> grad;
      };
      const auto run = [&] {
        Result result{0.0, 0, {}};
        gpu.device.loss.softmax_cross_entropy(gpu.stream, device_logits.get(), device_labels.get(),
                                              with_gradient ? grad.get() : nullptr, shape.rows, shape.classes,
                                              shape.stride(), grad_scale, &result.loss, &result.correct);
        result.grad = grad.read();
        return result;
      };
      const Result first = first_run(run), second = second_run(run);
      const std::string name = "softmax_cross_entropy " + shape_name(shape.rows, shape.classes) +
                               (shape.row_stride != 0 ? fmt::format(" padded to {}", shape.row_stride) : "") +
                               (shape.integer_logits ? " tied logits" : "") +
                               (shape.offset != 0 ? " (unaligned)" : "") + (with_gradient ? "" : " no gradient");
      checker.compare(name + " loss_sum", first.loss, ref_loss, kDoubleSum);
      checker.compare(name + " correct", first.correct, ref_correct, kExact);
      if (with_gradient) {
        checker.compare(name + " grad_logits", first.grad, ref_grad, kSoftmaxGrad);
      } else {
        // Null grad_logits: nothing written.
        checker.compare(name + " grad_logits untouched", first.grad, std::vector<float>(n, 1.0f), kExact);
      }
      checker.check_deterministic(name + " loss_sum", std::vector<double>{first.loss},
                                  std::vector<double>{second.loss});
      checker.check_deterministic(name + " correct", std::vector<int64_t>{first.correct},
                                  std::vector<int64_t>{second.correct});
      checker.check_deterministic(name + " grad_logits", first.grad, second.grad);
    }
}

const int64_t kVectorSizes[] = {1, 1000, 100003};

// One optimizer step of `device` on `stream`: state[0] is the parameter vector, `step` counts from 1.
using OptimizerStep = std::function<void(const Device& device, Stream stream, const std::vector<float*>& state,
                                         const float* grad, int64_t n, int step)>;

// Where an optimizer's vectors lie on CUDA, in floats from their allocations. A parameter group
// starts at any float offset of the flat buffers: all at 0, the kernels move float4s; all at an
// odd offset, or the gradient alone, one float at a time.
struct OptimizerPlacement {
  size_t state_offset, grad_offset;
  const char* name;
};
constexpr OptimizerPlacement kOptimizerPlacements[] = {
    {0, 0, ""}, {1, 1, " (odd offsets)"}, {0, 3, " (gradient alone at an odd offset)"}};

// Runs `steps` optimizer steps on the CPU and on CUDA from the same state; the gradients of step s
// are the same on both.
void test_optimizer(const Gpu& gpu, Checker& checker, const std::string& name, int state_vectors, int steps,
                    const OptimizerStep& step) {
  uint64_t seed = 600;
  for (int64_t n : kVectorSizes)
    for (const OptimizerPlacement& placement : kOptimizerPlacements) {
      const auto size = static_cast<size_t>(n);
      // Parameters random, optimizer state zero, as at the start of training.
      std::vector<std::vector<float>> initial(static_cast<size_t>(state_vectors), std::vector<float>(size, 0.0f));
      initial[0] = random_floats(size, -1.0f, 1.0f, ++seed);
      std::vector<std::vector<float>> gradients;
      for (int s = 0; s < steps; ++s) gradients.push_back(random_floats(size, -1.0f, 1.0f, ++seed));

      std::vector<std::vector<float>> ref = initial;
      std::vector<float*> ref_pointers;
      for (auto& vector : ref) ref_pointers.push_back(vector.data());
      for (int s = 0; s < steps; ++s)
        step(cpu(), kCpuStream, ref_pointers, gradients[static_cast<size_t>(s)].data(), n, s + 1);

      std::vector<std::unique_ptr<DeviceCopy<float>>> state;
      std::vector<float*> state_pointers;
      for (const auto& vector : initial) {
        state.push_back(std::make_unique<DeviceCopy<float>>(gpu, vector, placement.state_offset));
        state_pointers.push_back(state.back()->get());
      }
      DeviceCopy<float> gradient(gpu, gradients[0], placement.grad_offset);
      const auto run = [&] {
        for (size_t v = 0; v < state.size(); ++v) state[v]->write(initial[v]);
        for (int s = 0; s < steps; ++s) {
          gradient.write(gradients[static_cast<size_t>(s)]);
          step(gpu.device, gpu.stream, state_pointers, gradient.get(), n, s + 1);
        }
        std::vector<std::vector<float>> result;
        for (const auto& vector : state) result.push_back(vector->read());
        return result;
      };
      const auto first = first_run(run), second = second_run(run);
      for (size_t v = 0; v < state.size(); ++v) {
        const std::string what = fmt::format("{} n={}{} state {} after {} steps", name, n, placement.name, v, steps);
        checker.compare(what, first[v], ref[v], kExact);
        checker.check_deterministic(what, first[v], second[v]);
      }
    }
}

void test_optimizers(const Gpu& gpu, Checker& checker) {
  test_optimizer(gpu, checker, "sgd_step (state: param, momentum_buffer)", 2, 3,
                 [](const Device& device, Stream stream, const std::vector<float*>& state, const float* grad, int64_t n,
                    int) { device.optimizer.sgd_step(stream, state[0], grad, state[1], n, 0.1, 0.9, 1e-4); });
  test_optimizer(gpu, checker, "sgd_step without momentum or decay", 2, 2,
                 [](const Device& device, Stream stream, const std::vector<float*>& state, const float* grad, int64_t n,
                    int) { device.optimizer.sgd_step(stream, state[0], grad, state[1], n, 0.05, 0.0, 0.0); });
  test_optimizer(gpu, checker, "adamw_step (state: param, exp_avg, exp_avg_sq)", 3, 3,
                 [](const Device& device, Stream stream, const std::vector<float*>& state, const float* grad, int64_t n,
                    int step) {
                   device.optimizer.adamw_step(stream, state[0], grad, state[1], state[2], n, 1e-3, 0.9, 0.999, 1e-8,
                                               0.01, step);
                 });
}

void test_sum_squares_and_scale(const Gpu& gpu, Checker& checker) {
  const trainctl::OptimizerOps& ops = gpu.device.optimizer;
  uint64_t seed = 700;
  for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{1000}, int64_t{100003}, int64_t{3000017}})
    // Offset 1: not 16-byte aligned, so one float at a time.
    for (size_t offset : {size_t{0}, size_t{1}}) {
      const std::vector<float> x = random_floats(static_cast<size_t>(n), -1.0f, 1.0f, ++seed);
      DeviceCopy<float> device_x(gpu, x, offset);
      const auto run = [&] { return ops.sum_squares(gpu.stream, device_x.get(), n); };
      const double first = first_run(run), second = second_run(run);
      const std::string name = fmt::format("sum_squares n={}{}", n, offset != 0 ? " (unaligned)" : "");
      checker.compare(name, first, cpu().optimizer.sum_squares(kCpuStream, x.data(), n), kDoubleSum);
      checker.check_deterministic(name, std::vector<double>{first}, std::vector<double>{second});
    }
  for (int64_t n : kVectorSizes)
    for (size_t offset : {size_t{0}, size_t{1}}) {
      const std::vector<float> x = random_floats(static_cast<size_t>(n), -1.0f, 1.0f, ++seed);
      std::vector<float> ref = x;
      cpu().optimizer.scale(kCpuStream, ref.data(), n, 0.37f);
      DeviceCopy<float> device_x(gpu, x, offset);
      ops.scale(gpu.stream, device_x.get(), n, 0.37f);
      checker.compare(fmt::format("scale n={}{}", n, offset != 0 ? " (unaligned)" : ""), device_x.read(), ref,
                      kExact);
    }
}

// Attention, q, k, v and grad_out in [-1, 1]. Both sides compute in fp32 with the same formulas
// but in different orders (CPU: dense scores, softmax with the row's max, OpenBLAS GEMMs; CUDA:
// tiles of 32 keys with an online softmax, dot products in four strided shares), and expf
// differs by an ulp or two between them. out is a convex combination of v rows (|out| <= 1) and
// lse at most about |s| + log(seq) < 20, so a few ulp of each: 1e-5. The gradients sum up to
// seq products, and dS = P * (dP - D) cancels, so an fp32 GEMM's tolerance (kGemmFp32, seq and
// head size far below its depth 1031). On an H200 the worst were 1.8e-7 (out) and 3.5e-6
// (grad_qkv) at GPT-2 124M's shape; a masking or indexing error shows as 1e-2 or more.
constexpr Tolerance kAttentionForward{1e-5, 1e-5};
constexpr Tolerance kAttentionBackward = kGemmFp32;

struct AttentionCase {
  int64_t batch, seq, channels, heads;
};
// Head sizes 8, 16, 10 (not a multiple of 4), 64 (GPT-2's), 96 and 128; seq across tile edges.
constexpr AttentionCase kAttentionCases[] = {{1, 1, 8, 1},     {2, 37, 48, 3},   {1, 45, 30, 3},
                                             {1, 129, 128, 2}, {1, 70, 192, 2}, {1, 64, 256, 2}};
// GPT-2 124M's: 4 sequences of 1024 tokens, 12 heads of 64.
constexpr AttentionCase kGpt2AttentionCases[] = {{4, 1024, 768, 12}};

void test_attention(const Gpu& gpu, Checker& checker, std::span<const AttentionCase> cases, uint64_t seed) {
  const trainctl::AttentionOps& ops = *gpu.device.attention;
  const trainctl::AttentionOps& ref_ops = *cpu().attention;
  for (const auto [batch, seq, channels, heads] : cases) {
    const auto qkv_size = static_cast<size_t>(batch * seq * 3 * channels);
    const auto out_size = static_cast<size_t>(batch * seq * channels);
    const auto lse_size = static_cast<size_t>(batch * heads * seq);
    const std::vector<float> qkv = random_floats(qkv_size, -1.0f, 1.0f, ++seed);
    const std::vector<float> grad_out = random_floats(out_size, -1.0f, 1.0f, ++seed);
    // What grad_qkv holds before backward, which overwrites it.
    const std::vector<float> grad_qkv_init = random_floats(qkv_size, -1.0f, 1.0f, ++seed);
    std::vector<float> ref_out(out_size), ref_lse(lse_size), ref_grad_qkv(qkv_size);
    ref_ops.attention_forward(kCpuStream, ref_out.data(), ref_lse.data(), qkv.data(), batch, seq, channels, heads);
    // Backward on both sides from the CPU's out and lse, so that it is compared on its own.
    ref_ops.attention_backward(kCpuStream, ref_grad_qkv.data(), grad_out.data(), qkv.data(), ref_out.data(),
                               ref_lse.data(), batch, seq, channels, heads);

    DeviceCopy<float> device_qkv(gpu, qkv), device_grad_out(gpu, grad_out), out(gpu, std::vector<float>(out_size)),
        lse(gpu, std::vector<float>(lse_size)), ref_out_copy(gpu, ref_out), ref_lse_copy(gpu, ref_lse),
        grad_qkv(gpu, grad_qkv_init);
    struct Result {
      std::vector<float> out, lse, grad_qkv;
    };
    const auto run = [&] {
      ops.attention_forward(gpu.stream, out.get(), lse.get(), device_qkv.get(), batch, seq, channels, heads);
      grad_qkv.write(grad_qkv_init);
      ops.attention_backward(gpu.stream, grad_qkv.get(), device_grad_out.get(), device_qkv.get(), ref_out_copy.get(),
                             ref_lse_copy.get(), batch, seq, channels, heads);
      return Result{out.read(), lse.read(), grad_qkv.read()};
    };
    const Result first = first_run(run), second = second_run(run);
    const std::string name =
        fmt::format("attention B={} T={} C={} H={} (d={})", batch, seq, channels, heads, channels / heads);
    checker.compare(name + " out", first.out, ref_out, kAttentionForward);
    checker.compare(name + " lse", first.lse, ref_lse, kAttentionForward);
    checker.compare(name + " grad_qkv", first.grad_qkv, ref_grad_qkv, kAttentionBackward);
    checker.check_deterministic(name + " out", first.out, second.out);
    checker.check_deterministic(name + " lse", first.lse, second.lse);
    checker.check_deterministic(name + " grad_qkv", first.grad_qkv, second.grad_qkv);
  }
}

// LayerNorm, x in [-1, 3] (rows off centre, so that the variance's two passes matter), weight,
// bias and grad_out in [-1, 1], eps 1e-5. Both sides sum the row statistics (mean, variance, the
// backward's two row means) in double, in different orders (CPU: 8 interleaved lanes; CUDA: each
// of 32 lanes its share of the columns, then a butterfly), and round them to float once. A double
// sum of at most 768 of these terms is exact or within about 768 * 2^-53 of it, far below
// float's 2^-24, so both round to the same float unless the double lands that close to a rounding
// boundary, where they differ by one ulp; all else is the same float operations in the same
// order. So mean, rstd, out and grad_x are expected bitwise equal in nearly every element, and
// the tolerances allow one ulp of a row statistic: of mean or rstd, 2^-23 relative at most (2.4e-7
// with a factor 2 to spare); it moves out by at most |weight| * (rstd * ulp(mean) + |x - mean| *
// ulp(rstd)), under 1e-6 here (|mean| < 3, rstd about 0.9, |x - mean| < 4), and grad_x, through
// one ulp of either row mean (|mean| < 1) times rstd and |norm| < 2, by less.
constexpr Tolerance kLayerNormStatistic{0.0, 2.4e-7};
constexpr Tolerance kLayerNormOut{1e-6, 1e-6};
constexpr Tolerance kLayerNormGradX{1e-6, 1e-6};
// grad_weight and grad_bias are float sums over the rows in different orders (CPU row by row,
// CUDA in row blocks: bias_act_backward's column sums), so grad_bias_tolerance(rows): the terms
// of grad_weight, grad_out * norm, are as large as grad_bias's grad_out, since norm has RMS 1
// over a row.
Tolerance layernorm_column_sum_tolerance(int64_t rows) { return grad_bias_tolerance(rows); }

struct LayernormCase {
  int64_t rows, cols;
};
// One row block of the column sums (rows 1, 3), three (129) and 65 (4099), in tiles of 32
// columns; 64 and 768 columns are whole float4s, 1, 7 and 70 not.
constexpr LayernormCase kLayernormCases[] = {{1, 1}, {3, 7}, {129, 64}, {129, 70}, {1, 768}, {4099, 768}};
// GPT-2 124M's: 8 sequences of 1024 tokens, 768 wide.
constexpr LayernormCase kGpt2LayernormCases[] = {{8192, 768}};

void test_layernorm(const Gpu& gpu, Checker& checker, std::span<const LayernormCase> cases, uint64_t seed) {
  constexpr float kEps = 1e-5f;
  const trainctl::NormOps& ops = *gpu.device.norm;
  const trainctl::NormOps& ref_ops = *cpu().norm;
  for (const auto [rows, cols] : cases)
    // Offset 1: no row 16-byte aligned, so the kernels read one float at a time.
    for (size_t offset : {size_t{0}, size_t{1}}) {
      const auto n = static_cast<size_t>(rows * cols);
      const auto row_count = static_cast<size_t>(rows), col_count = static_cast<size_t>(cols);
      const std::vector<float> x = random_floats(n, -1.0f, 3.0f, ++seed);
      const std::vector<float> weight = random_floats(col_count, -1.0f, 1.0f, ++seed);
      const std::vector<float> bias = random_floats(col_count, -1.0f, 1.0f, ++seed);
      const std::vector<float> grad_out = random_floats(n, -1.0f, 1.0f, ++seed);
      // What the gradients hold before backward, which accumulates into them.
      const std::vector<float> grad_x_init = random_floats(n, -1.0f, 1.0f, ++seed);
      const std::vector<float> grad_weight_init = random_floats(col_count, -1.0f, 1.0f, ++seed);
      const std::vector<float> grad_bias_init = random_floats(col_count, -1.0f, 1.0f, ++seed);
      std::vector<float> ref_out(n), ref_mean(row_count), ref_rstd(row_count);
      ref_ops.layernorm_forward(kCpuStream, ref_out.data(), ref_mean.data(), ref_rstd.data(), x.data(), weight.data(),
                                bias.data(), rows, cols, kEps);
      // Backward on both sides from the CPU's mean and rstd, so that it is compared on its own.
      std::vector<float> ref_grad_x = grad_x_init, ref_grad_weight = grad_weight_init,
                         ref_grad_bias = grad_bias_init;
      ref_ops.layernorm_backward(kCpuStream, ref_grad_x.data(), ref_grad_weight.data(), ref_grad_bias.data(),
                                 grad_out.data(), x.data(), weight.data(), ref_mean.data(), ref_rstd.data(), rows,
                                 cols);

      DeviceCopy<float> device_x(gpu, x, offset), device_weight(gpu, weight, offset),
          device_bias(gpu, bias, offset), device_grad_out(gpu, grad_out, offset),
          out(gpu, std::vector<float>(n), offset), mean(gpu, std::vector<float>(row_count), offset),
          rstd(gpu, std::vector<float>(row_count), offset), ref_mean_copy(gpu, ref_mean, offset),
          ref_rstd_copy(gpu, ref_rstd, offset), grad_x(gpu, grad_x_init, offset),
          grad_weight(gpu, grad_weight_init, offset), grad_bias(gpu, grad_bias_init, offset);
      struct Result {
        std::vector<float> out, mean, rstd, grad_x, grad_weight, grad_bias;
      };
      const auto run = [&] {
        ops.layernorm_forward(gpu.stream, out.get(), mean.get(), rstd.get(), device_x.get(), device_weight.get(),
                              device_bias.get(), rows, cols, kEps);
        grad_x.write(grad_x_init);
        grad_weight.write(grad_weight_init);
        grad_bias.write(grad_bias_init);
        ops.layernorm_backward(gpu.stream, grad_x.get(), grad_weight.get(), grad_bias.get(), device_grad_out.get(),
                               device_x.get(), device_weight.get(), ref_mean_copy.get(), ref_rstd_copy.get(), rows,
                               cols);
        return Result{out.read(), mean.read(), rstd.read(), grad_x.read(), grad_weight.read(), grad_bias.read()};
      };
      const Result first = first_run(run), second = second_run(run);
      const std::string name =
          fmt::format("layernorm {}{}", shape_name(rows, cols), offset != 0 ? " (unaligned)" : "");
      checker.compare(name + " out", first.out, ref_out, kLayerNormOut);
      checker.compare(name + " mean", first.mean, ref_mean, kLayerNormStatistic);
      checker.compare(name + " rstd", first.rstd, ref_rstd, kLayerNormStatistic);
      checker.compare(name + " grad_x", first.grad_x, ref_grad_x, kLayerNormGradX);
      checker.compare(name + " grad_weight", first.grad_weight, ref_grad_weight, layernorm_column_sum_tolerance(rows));
      checker.compare(name + " grad_bias", first.grad_bias, ref_grad_bias, layernorm_column_sum_tolerance(rows));
      checker.check_deterministic(name + " out", first.out, second.out);
      checker.check_deterministic(name + " mean", first.mean, second.mean);
      checker.check_deterministic(name + " rstd", first.rstd, second.rstd);
      checker.check_deterministic(name + " grad_x", first.grad_x, second.grad_x);
      checker.check_deterministic(name + " grad_weight", first.grad_weight, second.grad_weight);
      checker.check_deterministic(name + " grad_bias", first.grad_bias, second.grad_bias);
    }
}

// Embedding, weights and grad_out in [-1, 1]. The forward adds two floats per element, and the
// backward adds each row of grad_out onto its token's row of grad_wte one at a time in increasing
// position, and onto its position's row of grad_wpe in increasing batch, as the CPU does: the
// same float additions in the same order, so bitwise equal (kExact), repeated tokens included.
struct EmbeddingCase {
  int64_t batch, seq, channels, vocab;
};
// Vocabularies of 1 and 5 (every token repeated many times), 17, and GPT-2's 50257 (tokens
// mostly distinct); all but the first over 64 positions, one tile of the kernel that finds
// equal tokens; 7 and 70 channels are not whole float4s, 1028 is two blocks of 256 float4s.
constexpr EmbeddingCase kEmbeddingCases[] = {{1, 1, 1, 1},    {3, 43, 7, 5},     {1, 129, 64, 5},
                                             {4, 129, 70, 5}, {2, 65, 1028, 17}, {2, 300, 96, 50257}};
// GPT-2 124M's: 8 sequences of 1024 tokens, 768 wide.
constexpr EmbeddingCase kGpt2EmbeddingCases[] = {{8, 1024, 768, 50257}};

void test_embedding(const Gpu& gpu, Checker& checker, std::span<const EmbeddingCase> cases, uint64_t seed) {
  // wpe has rows past seq, which backward must leave as they are.
  constexpr int64_t kExtraPositions = 3;
  const trainctl::EmbeddingOps& ops = *gpu.device.embedding;
  const trainctl::EmbeddingOps& ref_ops = *cpu().embedding;
  for (const auto [batch, seq, channels, vocab] : cases)
    // Offset 1: no row 16-byte aligned, so the kernels move one float at a time.
    for (size_t offset : {size_t{0}, size_t{1}}) {
      const auto positions = static_cast<size_t>(batch * seq);
      const auto out_size = static_cast<size_t>(batch * seq * channels);
      const auto wte_size = static_cast<size_t>(vocab * channels);
      const auto wpe_size = static_cast<size_t>((seq + kExtraPositions) * channels);
      const std::vector<int32_t> tokens = random_labels(positions, vocab, ++seed);
      const std::vector<float> wte = random_floats(wte_size, -1.0f, 1.0f, ++seed);
      const std::vector<float> wpe = random_floats(wpe_size, -1.0f, 1.0f, ++seed);
      const std::vector<float> grad_out = random_floats(out_size, -1.0f, 1.0f, ++seed);
      // What the gradients hold before backward, which accumulates into them.
      const std::vector<float> grad_wte_init = random_floats(wte_size, -1.0f, 1.0f, ++seed);
      const std::vector<float> grad_wpe_init = random_floats(wpe_size, -1.0f, 1.0f, ++seed);
      std::vector<float> ref_out(out_size), ref_grad_wte = grad_wte_init, ref_grad_wpe = grad_wpe_init;
      ref_ops.embedding_forward(kCpuStream, ref_out.data(), tokens.data(), wte.data(), wpe.data(), batch, seq,
                                channels);
      ref_ops.embedding_backward(kCpuStream, ref_grad_wte.data(), ref_grad_wpe.data(), grad_out.data(),
                                 tokens.data(), batch, seq, channels);

      DeviceCopy<int32_t> device_tokens(gpu, tokens, offset);
      DeviceCopy<float> device_wte(gpu, wte, offset), device_wpe(gpu, wpe, offset),
          device_grad_out(gpu, grad_out, offset), out(gpu, std::vector<float>(out_size), offset),
          grad_wte(gpu, grad_wte_init, offset), grad_wpe(gpu, grad_wpe_init, offset);
      struct Result {
        std::vector<float> out, grad_wte, grad_wpe;
      };
      const auto run = [&] {
        ops.embedding_forward(gpu.stream, out.get(), device_tokens.get(), device_wte.get(), device_wpe.get(), batch,
                              seq, channels);
        grad_wte.write(grad_wte_init);
        grad_wpe.write(grad_wpe_init);
        ops.embedding_backward(gpu.stream, grad_wte.get(), grad_wpe.get(), device_grad_out.get(), device_tokens.get(),
                               batch, seq, channels);
        return Result{out.read(), grad_wte.read(), grad_wpe.read()};
      };
      const Result first = first_run(run), second = second_run(run);
      const std::string name = fmt::format("embedding B={} T={} C={} vocab={}{}", batch, seq, channels, vocab,
                                           offset != 0 ? " (unaligned)" : "");
      checker.compare(name + " out", first.out, ref_out, kExact);
      checker.compare(name + " grad_wte", first.grad_wte, ref_grad_wte, kExact);
      checker.compare(name + " grad_wpe", first.grad_wpe, ref_grad_wpe, kExact);
      checker.check_deterministic(name + " out", first.out, second.out);
      checker.check_deterministic(name + " grad_wte", first.grad_wte, second.grad_wte);
      checker.check_deterministic(name + " grad_wpe", first.grad_wpe, second.grad_wpe);
    }
}

struct TestGroup {
  const char* name;
  std::function<void(const Gpu&, Checker&)> run;
};

// The groups of the default run, and of --large.
// A group that runs `test` over `cases`, its random inputs from `seed` on.
template <typename Case>
std::function<void(const Gpu&, Checker&)> over(void (*test)(const Gpu&, Checker&, std::span<const Case>, uint64_t),
                                               std::span<const Case> cases, uint64_t seed) {
  return [=](const Gpu& gpu, Checker& checker) { test(gpu, checker, cases, seed); };
}

// The groups of the default run, and of --large: the benchmark MLP's shapes and GPT-2 124M's.
std::vector<TestGroup> test_groups(bool large) {
  if (large)
    return {{"gemm", test_benchmark_gemms},
            {"bias_act_forward", over<ActivationShape>(test_bias_act_forward, kBenchmarkActivationShapes, 850)},
            {"bias_act_backward", over<ActivationShape>(test_bias_act_backward, kBenchmarkActivationShapes, 900)},
            {"softmax_cross_entropy", over<LossCase>(test_softmax_cross_entropy, kGpt2LossCases, 950)},
            {"attention", over<AttentionCase>(test_attention, kGpt2AttentionCases, 1050)},
            {"layernorm", over<LayernormCase>(test_layernorm, kGpt2LayernormCases, 1150)},
            {"embedding", over<EmbeddingCase>(test_embedding, kGpt2EmbeddingCases, 1250)}};
  return {{"memory", test_memory},
          {"gemm", test_gemms},
          {"bias_act_forward", over<ActivationShape>(test_bias_act_forward, kActivationShapes, 300)},
          {"bias_act_backward", over<ActivationShape>(test_bias_act_backward, kActivationShapes, 400)},
          {"add", test_add},
          {"softmax_cross_entropy", over<LossCase>(test_softmax_cross_entropy, kLossCases, 500)},
          {"optimizers", test_optimizers},
          {"sum_squares_and_scale", test_sum_squares_and_scale},
          {"attention", over<AttentionCase>(test_attention, kAttentionCases, 1000)},
          {"layernorm", over<LayernormCase>(test_layernorm, kLayernormCases, 1100)},
          {"embedding", over<EmbeddingCase>(test_embedding, kEmbeddingCases, 1200)}};
}

struct Options {
  bool large = false;
  std::string only;  // one group's name; all when empty
};

// Parses [--large] [--only GROUP] [--schedules FIRST,SECOND]; false on anything else.
bool parse_options(int argc, char** argv, Options& options) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--large") {
      options.large = true;
    } else if (arg == "--only" && i + 1 < argc) {
      options.only = argv[++i];
    } else if (arg == "--schedules" && i + 1 < argc) {
      const std::string both = argv[++i];
      const size_t comma = both.find(',');
      if (comma == std::string::npos || comma == 0 || comma + 1 == both.size()) return false;
      schedules = {both.substr(0, comma), both.substr(comma + 1)};
    } else {
      return false;
    }
  }
  return true;
}

}  // namespace

// The CUDA table is the backend library TRAINCTL_CUDA_BACKEND names (kernels/device.h): the GPU's,
// or the CPU implementation of CUDA's.
int main(int argc, char** argv) {
  Options options;
  if (!parse_options(argc, argv, options)) {
    std::fprintf(stderr, "usage: %s [--large] [--only GROUP] [--schedules FIRST,SECOND]\n", argv[0]);
    return 2;
  }
  const Device* cuda = nullptr;
  try {
    cuda = trainctl::find_device("cuda");
  } catch (const trainctl::DeviceUnavailable& error) {
    std::printf("FAIL: %s\n", error.what());
    return 1;
  }
  try {
    std::printf("[INFO] device: %s\n", cuda->memory.bind_local(0, 1).c_str());
  } catch (const trainctl::DeviceUnavailable& error) {
    std::printf("SKIP: %s\n", error.what());
    return 77;
  } catch (const std::exception& error) {
    std::printf("FAIL: binding to GPU 0: %s\n", error.what());
    return 1;
  }
  const Gpu gpu{*cuda, cuda->streams.create()};

  Checker checker;
  bool found = options.only.empty();
  for (const TestGroup& group : test_groups(options.large)) {
    if (!options.only.empty() && options.only != group.name) continue;
    found = true;
    try {
      group.run(gpu, checker);
    } catch (const std::exception& error) {
      checker.record(false, std::string(group.name) + ": exception: " + error.what());
    }
  }
  if (!found) checker.record(false, "--only " + options.only + ": no such group");
  cuda->streams.destroy(gpu.stream);
  cuda->memory.unbind();
  std::printf("%d checks, %d failed\n", checker.checks(), checker.failures());
  return checker.failures() == 0 && checker.checks() > 0 ? 0 : 1;
}
