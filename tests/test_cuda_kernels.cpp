// Tests for the CUDA device table (kernels/cuda/) against the CPU reference table
// (kernels/cpu/): every op on random inputs from fixed seeds, on shapes that are not multiples of
// 8, 16 or 32 (1x1, 3x5x7, 129x257x63, ...), every transpose, GEMMs on padded rows and strided
// batches, and operands at odd float offsets, compared element by element as
// |cuda - ref| <= abs + rel * |ref| with the tolerance stated per op below; the worst element of
// each comparison is printed. GEMMs, the activations, the loss, the optimizer steps and
// sum_squares also run twice on the same inputs and must give bitwise the same output. The CUDA
// ops run on a stream of their own that does not synchronize with the legacy default stream, so
// an op that launched on another stream, or a copy back that did not wait for its stream, shows
// as a wrong result. Without a usable GPU the program prints why and exits 77 (meson's SKIP);
// any failure exits 1.
//
// `test_cuda_kernels --large` runs instead the shapes of the benchmark MLP (4 x 8192 hidden,
// batch 8192, scripts/bench_gpu_mlp.py): its GEMMs with every transpose in fp32 and bf16, and
// bias + activation forward and backward at 8192 x 8192. The CPU reference takes a while there
// (about 20 TFLOP of OpenBLAS GEMMs), so meson's test leaves them out; scripts/gpu_check.sh
// runs them on the GPU machine.
#include <cuda_runtime.h>
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

  // The second run of an op on the same inputs gave the first run's bits.
  template <typename T>
  void check_deterministic(const std::string& what, const std::vector<T>& first, const std::vector<T>& second) {
    const bool same =
        first.size() == second.size() && std::memcmp(first.data(), second.data(), first.size() * sizeof(T)) == 0;
    record(same, what + ": " + (same ? "bitwise the same on a second run" : "differs on a second run"));
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
  const std::vector<float> first = run();
  const std::string name = gemm_name(bf16, shape, gemm);
  checker.compare(name, first, ref, gemm_tolerance(bf16, shape.k));
  checker.check_deterministic(name, first, run());
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
};
constexpr ActivationShape kActivationShapes[] = {{1, 1}, {3, 7}, {129, 257}, {4099, 70}, {20000, 10}};
// The benchmark MLP's hidden activations: batch 8192, 8192 wide.
constexpr ActivationShape kBenchmarkActivationShapes[] = {{8192, 8192}};

void test_bias_act_forward(const Gpu& gpu, Checker& checker, std::span<const ActivationShape> shapes, uint64_t seed) {
  for (const auto [rows, cols] : shapes)
    for (Activation act : kActivations)
      for (bool in_place : {false, true}) {
        const auto n = static_cast<size_t>(rows * cols);
        const std::vector<float> z_init = pre_activations(n, ++seed);
        const std::vector<float> bias = random_floats(static_cast<size_t>(cols), -1.0f, 1.0f, ++seed);
        std::vector<float> ref_z = z_init, ref_out(n);
        cpu().elementwise.bias_act_forward(kCpuStream, ref_z.data(), bias.data(), ref_out.data(), rows, cols, act);

        DeviceCopy<float> z(gpu, z_init), device_bias(gpu, bias), separate_out(gpu, std::vector<float>(n));
        // In place: out is z, which then holds act(z).
        DeviceCopy<float>& out = in_place ? z : separate_out;
        const auto run = [&] {
          z.write(z_init);
          gpu.device.elementwise.bias_act_forward(gpu.stream, z.get(), device_bias.get(), out.get(), rows, cols, act);
          return out.read();
        };
        const std::vector<float> first = run();
        const std::string name = fmt::format("bias_act_forward {} {}{}", activation_name(act), shape_name(rows, cols),
                                             in_place ? " in place" : "");
        if (!in_place) checker.compare(name + " z", z.read(), ref_z, kExact);
        checker.compare(name + " out", first, ref_out, activation_tolerance(act));
        checker.check_deterministic(name, first, run());
      }
}

void test_bias_act_backward(const Gpu& gpu, Checker& checker, std::span<const ActivationShape> shapes, uint64_t seed) {
  for (const auto [rows, cols] : shapes)
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
        cpu().elementwise.bias_act_backward(kCpuStream, grad_out.data(), z.data(), out.data(), ref_grad_z.data(),
                                            ref_grad_bias.data(), rows, cols, act);

        DeviceCopy<float> device_grad_out(gpu, grad_out), device_z(gpu, z), device_out(gpu, out),
            separate_grad_z(gpu, std::vector<float>(n)), grad_bias(gpu, grad_bias_init);
        // In place, as the model calls it: grad_z is grad_out.
        DeviceCopy<float>& grad_z = in_place ? device_grad_out : separate_grad_z;
        struct Result {
          std::vector<float> grad_z, grad_bias;
        };
        const auto run = [&] {
          device_grad_out.write(grad_out);
          grad_bias.write(grad_bias_init);
          gpu.device.elementwise.bias_act_backward(gpu.stream, device_grad_out.get(), device_z.get(), device_out.get(),
                                                   grad_z.get(), grad_bias.get(), rows, cols, act);
          return Result{grad_z.read(), grad_bias.read()};
        };
        const Result first = run(), second = run();
        const std::string name = fmt::format("bias_act_backward {} {}{}", activation_name(act), shape_name(rows, cols),
                                             in_place ? " in place" : "");
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

void test_softmax_cross_entropy(const Gpu& gpu, Checker& checker) {
  struct Case {
    int64_t rows, classes;
    bool integer_logits;  // many ties for the argmax, which goes to the first
  };
  const Case cases[] = {{1, 1, false},      {3, 5, false},     {129, 10, false}, {129, 10, true},
                        {257, 1000, false}, {4099, 37, false}, {9000, 3, false}};
  uint64_t seed = 500;
  for (const Case& shape : cases)
    for (bool with_gradient : {true, false}) {
      const auto n = static_cast<size_t>(shape.rows * shape.classes);
      std::vector<float> logits = random_floats(n, -8.0f, 8.0f, ++seed);
      if (shape.integer_logits)
        for (float& logit : logits) logit = std::round(logit / 4.0f);
      const std::vector<int32_t> labels = random_labels(static_cast<size_t>(shape.rows), shape.classes, ++seed);
      const float grad_scale = 1.0f / static_cast<float>(shape.rows);
      std::vector<float> ref_grad(n);
      double ref_loss = 0.0;
      int64_t ref_correct = 0;
      cpu().loss.softmax_cross_entropy(kCpuStream, logits.data(), labels.data(),
                                       with_gradient ? ref_grad.data() : nullptr, shape.rows, shape.classes, grad_scale,
                                       &ref_loss, &ref_correct);

      DeviceCopy<float> device_logits(gpu, logits), grad(gpu, std::vector<float>(n, 0.0f));
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
                                              grad_scale, &result.loss, &result.correct);
        result.grad = grad.read();
        return result;
      };
      const Result first = run(), second = run();
      const std::string name = "softmax_cross_entropy " + shape_name(shape.rows, shape.classes) +
                               (shape.integer_logits ? " tied logits" : "") + (with_gradient ? "" : " no gradient");
      checker.compare(name + " loss_sum", first.loss, ref_loss, kDoubleSum);
      checker.compare(name + " correct", first.correct, ref_correct, kExact);
      if (with_gradient) {
        checker.compare(name + " grad_logits", first.grad, ref_grad, kSoftmaxGrad);
      } else {
        // Null grad_logits: nothing written.
        checker.compare(name + " grad_logits untouched", first.grad, std::vector<float>(n, 0.0f), kExact);
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

// Runs `steps` optimizer steps on the CPU and on CUDA from the same state; the gradients of step s
// are the same on both.
void test_optimizer(const Gpu& gpu, Checker& checker, const std::string& name, int state_vectors, int steps,
                    const OptimizerStep& step) {
  uint64_t seed = 600;
  for (int64_t n : kVectorSizes) {
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
      state.push_back(std::make_unique<DeviceCopy<float>>(gpu, vector));
      state_pointers.push_back(state.back()->get());
    }
    DeviceCopy<float> gradient(gpu, gradients[0]);
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
    const auto first = run(), second = run();
    for (size_t v = 0; v < state.size(); ++v) {
      const std::string what = fmt::format("{} n={} state {} after {} steps", name, n, v, steps);
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
  for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{1000}, int64_t{100003}, int64_t{3000017}}) {
    const std::vector<float> x = random_floats(static_cast<size_t>(n), -1.0f, 1.0f, ++seed);
    DeviceCopy<float> device_x(gpu, x);
    const double first = ops.sum_squares(gpu.stream, device_x.get(), n);
    const double second = ops.sum_squares(gpu.stream, device_x.get(), n);
    const std::string name = fmt::format("sum_squares n={}", n);
    checker.compare(name, first, cpu().optimizer.sum_squares(kCpuStream, x.data(), n), kDoubleSum);
    checker.check_deterministic(name, std::vector<double>{first}, std::vector<double>{second});
  }
  for (int64_t n : kVectorSizes) {
    const std::vector<float> x = random_floats(static_cast<size_t>(n), -1.0f, 1.0f, ++seed);
    std::vector<float> ref = x;
    cpu().optimizer.scale(kCpuStream, ref.data(), n, 0.37f);
    DeviceCopy<float> device_x(gpu, x);
    ops.scale(gpu.stream, device_x.get(), n, 0.37f);
    checker.compare(fmt::format("scale n={}", n), device_x.read(), ref, kExact);
  }
}

}  // namespace

using TestGroup = std::function<void(const Gpu&, Checker&)>;

int main(int argc, char** argv) {
  const bool large = argc == 2 && std::strcmp(argv[1], "--large") == 0;
  if (argc > 2 || (argc == 2 && !large)) {
    std::fprintf(stderr, "usage: %s [--large]\n", argv[0]);
    return 2;
  }
  const Device* cuda = trainctl::find_device("cuda");
  if (cuda == nullptr) {
    std::puts("FAIL: this build has no CUDA device table, though this test is built only with it");
    return 1;
  }
  try {
    cuda->memory.bind_local(0, 1);
  } catch (const trainctl::DeviceUnavailable& error) {
    std::printf("SKIP: %s\n", error.what());
    return 77;
  } catch (const std::exception& error) {
    std::printf("FAIL: binding to GPU 0: %s\n", error.what());
    return 1;
  }
  cudaStream_t stream = nullptr;
  if (const cudaError_t status = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking); status != cudaSuccess) {
    std::printf("FAIL: cudaStreamCreateWithFlags: %s\n", cudaGetErrorString(status));
    return 1;
  }
  const Gpu gpu{*cuda, Stream{stream}};

  Checker checker;
  const std::vector<TestGroup> groups =
      large ? std::vector<TestGroup>{test_benchmark_gemms,
                                     [](const Gpu& gpu, Checker& checker) {
                                       test_bias_act_forward(gpu, checker, kBenchmarkActivationShapes, 850);
                                     },
                                     [](const Gpu& gpu, Checker& checker) {
                                       test_bias_act_backward(gpu, checker, kBenchmarkActivationShapes, 900);
                                     }}
            : std::vector<TestGroup>{test_memory,
                                     test_gemms,
                                     [](const Gpu& gpu, Checker& checker) {
                                       test_bias_act_forward(gpu, checker, kActivationShapes, 300);
                                     },
                                     [](const Gpu& gpu, Checker& checker) {
                                       test_bias_act_backward(gpu, checker, kActivationShapes, 400);
                                     },
                                     test_add,
                                     test_softmax_cross_entropy,
                                     test_optimizers,
                                     test_sum_squares_and_scale};
  for (const auto& group : groups) {
    try {
      group(gpu, checker);
    } catch (const std::exception& error) {
      checker.record(false, std::string("exception: ") + error.what());
    }
  }
  std::printf("%d checks, %d failed\n", checker.checks(), checker.failures());
  return checker.failures() == 0 && checker.checks() > 0 ? 0 : 1;
}
