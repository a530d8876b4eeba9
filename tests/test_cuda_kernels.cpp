// Tests for the CUDA device table (kernels/cuda/) against the CPU reference table
// (kernels/cpu/): every op on random inputs from fixed seeds, in each element type it takes (f32
// and bf16: the inputs rounded to bf16 on the host, so that both sides compute from the same
// values), on shapes that are not multiples of 8, 16 or 32 (1x1, 3x5x7, 129x257x63, ...), every
// transpose and every epilogue, GEMMs on padded rows and strided batches, and operands at odd
// element offsets, compared element by element as |cuda - ref| <= abs + rel * |ref| (bf16 values
// widened to float) with the tolerance stated per op below; the worst element of each comparison
// is printed. Every op also runs twice on the same inputs and must give bitwise the same output.
// The CUDA ops run on a stream of their own that does not synchronize with the legacy default
// stream, so an op that launched on another stream, or a copy back that did not wait for its
// stream, shows as a wrong result. Where the device counts what it does (info.activity: the CPU
// implementation of CUDA does, a GPU does not), each op must queue the launches and cuBLASLt calls
// it is expected to and never make the host wait.
//
// The CUDA table is the backend library TRAINCTL_CUDA_BACKEND names (kernels/device.h): the
// GPU's, where the backend finding no usable GPU makes the program print why and exit 77 (meson's
// SKIP), or the CPU implementation of CUDA's (cuda_on_cpu/), where `--schedules FIRST,SECOND`
// runs each op's two runs under those two orders of its threads, so that a missing barrier shows
// as different bits. `--only GROUP` runs one group of ops. Any failure exits 1.
//
// `test_cuda_kernels --large` runs instead the shapes of the benchmark MLP (4 x 8192 hidden,
// batch 8192, scripts/bench_gpu_mlp.py): its GEMMs with every transpose, and as the model runs
// them with their epilogues, and the activations over 8192 x 8192; and GPT-2 124M's (8 x 1024
// tokens, 768 wide, 12 heads, vocabulary 50257): its GEMMs with their epilogues, the loss,
// attention, LayerNorm, the embedding and an optimizer step over 124M parameters; in f32 and
// bf16; and Llama 3.2 1B's attention (4 x 2048 tokens, 32 query heads of 64 in 8 groups). The CPU
// reference takes a while there (about 30 TFLOP of OpenBLAS GEMMs), so meson's test
// leaves them out; scripts/gpu_check.sh runs them on the GPU machine. `--llama` runs Llama 3.2
// 1B's shapes likewise (4 x 2048 tokens, 2048 wide, q, k and v 3072, an MLP of 8192, a vocabulary
// of 128256): its GEMMs forward and backward in bf16 (about 15 TFLOP on the CPU), the loss,
// grouped-query attention, RMSNorm, SwiGLU, RoPE and the embedding without positions
// (gpu_check.sh's llama step).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "device.h"

namespace {

using trainctl::Activation;
using trainctl::Bf16;
using trainctl::ConstTypedPtr;
using trainctl::Device;
using trainctl::DeviceActivity;
using trainctl::ElementType;
using trainctl::Epilogue;
using trainctl::Gemm;
using trainctl::ParameterUpdate;
using trainctl::Stream;
using trainctl::TypedPtr;

constexpr ElementType kF32 = ElementType::kF32;
constexpr ElementType kBf16 = ElementType::kBf16;
constexpr ElementType kElementTypes[] = {kF32, kBf16};

struct Tolerance {
  double abs, rel;
};

// Tolerances, per op, for fp32 results. Operands are in [-1, 1] unless said otherwise.
// Same IEEE operations in the same order, uncontracted (nvcc --fmad=false): bitwise equal.
constexpr Tolerance kExact{0.0, 0.0};
// fp32 GEMM, k <= 1031: both sum in fp32, in different orders (OpenBLAS's blocking, cuBLASLt's).
constexpr Tolerance kGemmFp32{1e-4, 1e-4};
constexpr int64_t kGemmToleranceDepth = 1031;
// bf16 operands: both sides widen the same bf16 values exactly and sum the exact products in fp32,
// in different orders, on the GPU by tensor cores (whose fp32 accumulation aligns the products
// to the largest before adding, losing low bits that an IEEE sum keeps).
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
// A float sum over rows (a bias gradient, LayerNorm's weight and bias gradients): the CPU adds
// row by row, CUDA in blocks of rows (cuBLASLt: as its kernel tiles k), so the rounding differs
// by up to about an ulp of the running sum per row.
Tolerance grad_bias_tolerance(int64_t rows) { return {2e-7 * static_cast<double>(rows) + 1e-6, 1e-6}; }

// A result stored in bf16 is rounded once from fp32 values that agree within the op's fp32
// tolerance, so the two sides may land on neighbouring bf16 values: one bf16 ulp apart, at most
// 2^-7 of either. Where the fp32 values are bitwise equal, so are the bf16 ones.
constexpr double kBf16Ulp = 1.0 / 128.0;
Tolerance stored_in(ElementType type, Tolerance fp32) {
  if (type == kF32 || (fp32.abs == 0.0 && fp32.rel == 0.0)) return fp32;
  return {fp32.abs, fp32.rel + kBf16Ulp};
}

// The GEMM tolerances above hold up to k = 1031. A sum of more terms rounds more often, and its
// error bound grows linearly in k, so beyond that the absolute part grows with k / 1031: 7.9e-4
// for fp32 at k = 8192, where OpenBLAS and an fp32 sum tile by tile (32 terms at a time, as
// tensor cores add) were measured 9.2e-5 apart at most (256 x 256 outputs, |ref| up to 151).
Tolerance gemm_tolerance(ElementType operands, int64_t k) {
  const Tolerance depth_1031 = operands == kBf16 ? kGemmBf16 : kGemmFp32;
  const double growth = std::max(1.0, static_cast<double>(k) / static_cast<double>(kGemmToleranceDepth));
  return {depth_1031.abs * growth, depth_1031.rel};
}

// C after the epilogue, from a product P within `product` of the CPU's. The tanh GELU's slope is
// at most 1.13, so gelu(P + bias) moves by 1.2 times P's error, plus kGeluTanh's own; its
// derivative differs by kGeluTanh's (z in [-4, 4]) and multiplies P, at most about 10 here
// (|P| <= 10 for k <= 1031 products of [-1, 1]), so P * gelu'(z) by 10 times that more.
Tolerance epilogue_tolerance(Epilogue epilogue, Tolerance product) {
  switch (epilogue) {
    case Epilogue::kGeluBias:
      return {1.2 * product.abs + kGeluTanh.abs, 1.2 * product.rel + kGeluTanh.rel};
    case Epilogue::kGeluGrad:
      return {1.2 * product.abs + 10.0 * (kGeluTanh.abs + 1.2 * kGeluTanh.rel), 1.2 * product.rel};
    case Epilogue::kNone:
    case Epilogue::kBias:
    case Epilogue::kBiasGradA:
    case Epilogue::kBiasGradB:
      break;
  }
  return product;
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

const char* epilogue_name(Epilogue epilogue) {
  switch (epilogue) {
    case Epilogue::kNone: return "none";
    case Epilogue::kBias: return "bias";
    case Epilogue::kGeluBias: return "gelu_bias";
    case Epilogue::kGeluGrad: return "gelu_grad";
    case Epilogue::kBiasGradA: return "bias_grad_a";
    case Epilogue::kBiasGradB: return "bias_grad_b";
  }
  return "unknown";
}

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

// z in [-4, 4] with every 7th element exactly 0 (GELU's derivative takes its own branch there).
std::vector<float> pre_activations(size_t n, uint64_t seed) {
  std::vector<float> z = random_floats(n, -4.0f, 4.0f, seed);
  for (size_t i = 0; i < n; i += 7) z[i] = 0.0f;
  return z;
}

// Values on the host in an element type: the floats themselves, or the bf16s they round to.
class HostTensor {
 public:
  HostTensor(ElementType type, const std::vector<float>& values) : type_(type) {
    if (type == kBf16) {
      bf16_.resize(values.size());
      std::transform(values.begin(), values.end(), bf16_.begin(), trainctl::to_bf16);
    } else {
      f32_ = values;
    }
  }

  ElementType type() const { return type_; }
  size_t size() const { return type_ == kBf16 ? bf16_.size() : f32_.size(); }
  size_t bytes() const { return size() * trainctl::element_bytes(type_); }
  TypedPtr data() { return type_ == kBf16 ? TypedPtr(bf16_.data()) : TypedPtr(f32_.data()); }
  ConstTypedPtr data() const { return type_ == kBf16 ? ConstTypedPtr(bf16_.data()) : ConstTypedPtr(f32_.data()); }
  // The values as floats (bf16 widened, exactly).
  std::vector<float> floats() const {
    if (type_ == kF32) return f32_;
    std::vector<float> widened(bf16_.size());
    std::transform(bf16_.begin(), bf16_.end(), widened.begin(), [](Bf16 x) { return trainctl::to_float(x); });
    return widened;
  }

 private:
  ElementType type_;
  std::vector<float> f32_;
  std::vector<Bf16> bf16_;
};

HostTensor random_tensor(ElementType type, size_t n, float low, float high, uint64_t seed) {
  return {type, random_floats(n, low, high, seed)};
}

// Device memory of the CUDA table holding `count` elements of `bytes_each` bytes, `offset`
// elements into its allocation (to place the data at an odd address); freed at scope exit.
class DeviceAllocation {
 public:
  DeviceAllocation(const Gpu& gpu, size_t count, size_t bytes_each, size_t offset)
      : gpu_(gpu),
        base_(static_cast<std::byte*>(gpu.device.memory.alloc((offset + count) * bytes_each))),
        data_(base_ + offset * bytes_each) {}
  DeviceAllocation(const DeviceAllocation&) = delete;
  DeviceAllocation& operator=(const DeviceAllocation&) = delete;
  ~DeviceAllocation() { gpu_.device.memory.release(base_); }

  void* data() const { return data_; }
  void upload(const void* host, size_t bytes) const { gpu_.device.memory.upload(gpu_.stream, data_, host, bytes); }
  void download(void* host, size_t bytes) const { gpu_.device.memory.download(gpu_.stream, host, data_, bytes); }

 private:
  const Gpu& gpu_;
  std::byte* base_;
  std::byte* data_;
};

// A copy of a host vector in the CUDA table's memory.
template <typename T>
class DeviceCopy {
 public:
  DeviceCopy(const Gpu& gpu, const std::vector<T>& host, size_t offset = 0)
      : size_(host.size()), memory_(gpu, host.size(), sizeof(T), offset) {
    write(host);
  }

  T* get() const { return static_cast<T*>(memory_.data()); }
  void write(const std::vector<T>& host) { memory_.upload(host.data(), bytes()); }
  std::vector<T> read() const {
    std::vector<T> host(size_);
    memory_.download(host.data(), bytes());
    return host;
  }
  size_t bytes() const { return size_ * sizeof(T); }

 private:
  size_t size_;
  DeviceAllocation memory_;
};

// A copy of a host tensor in the CUDA table's memory, read back as floats.
class DeviceTensor {
 public:
  DeviceTensor(const Gpu& gpu, const HostTensor& host, size_t offset = 0)
      : type_(host.type()),
        size_(host.size()),
        memory_(gpu, host.size(), trainctl::element_bytes(host.type()), offset) {
    write(host);
  }

  TypedPtr get() const { return {memory_.data(), type_}; }
  void write(const HostTensor& host) { memory_.upload(host.data().data, host.bytes()); }
  std::vector<float> read() const {
    HostTensor host(type_, std::vector<float>(size_));
    memory_.download(host.data().data, host.bytes());
    return host.floats();
  }

 private:
  ElementType type_;
  size_t size_;
  DeviceAllocation memory_;
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
  template <typename T>
  void check_deterministic(const std::string& what, T first, T second) {
    check_deterministic(what, std::vector<T>{first}, std::vector<T>{second});
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

// What one call of an op queues, where the device counts it (info.activity): kernel launches
// (memsets and device copies included) and cuBLASLt matmuls. No op but a download makes the host
// wait for the device.
struct Queued {
  int64_t launches = 0, blas_calls = 0;
};

// Runs `op` once more (its inputs as the runs before left them: scratch has grown, GEMM plans are
// made) and checks what it queued, where the device counts it.
void check_queued(const Gpu& gpu, Checker& checker, const std::string& what, Queued expected,
                  const std::function<void()>& op) {
  const std::optional<DeviceActivity> before = gpu.device.info.activity();
  op();
  const std::optional<DeviceActivity> after = gpu.device.info.activity();
  if (!before || !after) return;
  const int64_t launches = after->kernel_launches - before->kernel_launches;
  const int64_t blas_calls = after->blas_calls - before->blas_calls;
  const int64_t waits = after->host_syncs - before->host_syncs + after->upload_waits - before->upload_waits;
  checker.record(launches == expected.launches && blas_calls == expected.blas_calls && waits == 0,
                 fmt::format("{}: queues {} launches and {} cuBLASLt calls (expected {} and {}), host waits {}", what,
                             launches, blas_calls, expected.launches, expected.blas_calls, waits));
}

std::string shape_name(int64_t a, int64_t b) { return fmt::format("{}x{}", a, b); }
std::string shape_name(int64_t a, int64_t b, int64_t c) { return fmt::format("{}x{}x{}", a, b, c); }
const char* type_name(ElementType type) { return trainctl::element_type_name(type); }

// Floats of which every third lies halfway between two bf16 values (1 + odd multiples of 2^-8,
// either sign): rounding them to even, as the CPU does, or any other way shows.
std::vector<float> with_bf16_ties(std::vector<float> values, uint64_t seed) {
  std::mt19937_64 engine(seed);
  for (size_t i = 0; i < values.size(); i += 3) {
    const float sign = engine() % 2 != 0 ? -1.0f : 1.0f;
    values[i] = sign * (1.0f + static_cast<float>(2 * (engine() % 64) + 1) / 256.0f);
  }
  return values;
}

void test_memory(const Gpu& gpu, Checker& checker) {
  const trainctl::MemoryOps& memory = gpu.device.memory;
  const std::vector<float> values = random_floats(1000, -1.0f, 1.0f, 1);
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
  memory.fill_zero(gpu.stream, device.get(), device.bytes());
  memory.copy(gpu.stream, target.get(), device.get(), device.bytes());
  checker.compare("fill_zero, then copy", target.read(), std::vector<float>(values.size(), 0.0f), kExact);
  check_queued(gpu, checker, "fill_zero", {.launches = 1},
               [&] { memory.fill_zero(gpu.stream, device.get(), device.bytes()); });
  check_queued(gpu, checker, "copy", {.launches = 1},
               [&] { memory.copy(gpu.stream, target.get(), device.get(), device.bytes()); });

  // What the table knows of this GPU: printed, not checked (0 is a GPU the table does not list).
  std::printf("[INFO] peak_flops: bf16 %.4g, fp32 %.4g FLOP/s\n", gpu.device.info.peak_flops(true),
              gpu.device.info.peak_flops(false));
}

// memory.convert both ways, and to its own type (a copy), against the CPU's: exact (rounding to
// nearest, ties to even, on both sides). Four elements at a time where both sides are aligned
// for it: offset 1 is not, offset 2 is for bf16 only.
void test_convert(const Gpu& gpu, Checker& checker) {
  uint64_t seed = 50;
  for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{1000}, int64_t{100003}})
    for (size_t offset : {size_t{0}, size_t{1}, size_t{2}})
      for (ElementType from : kElementTypes)
        for (ElementType to : kElementTypes) {
          const auto size = static_cast<size_t>(n);
          ++seed;
          const HostTensor source(from, with_bf16_ties(random_floats(size, -2.0f, 2.0f, seed), seed));
          HostTensor ref(to, std::vector<float>(size, 3.0f));
          cpu().memory.convert(kCpuStream, ref.data(), source.data(), n);
          DeviceTensor device_source(gpu, source, offset),
              device_target(gpu, HostTensor(to, std::vector<float>(size, 3.0f)), offset);
          gpu.device.memory.convert(gpu.stream, device_target.get(), device_source.get(), n);
          const std::string name =
              fmt::format("convert {} -> {} n={}{}", type_name(from), type_name(to), n,
                          offset != 0 ? fmt::format(" (offset {})", offset) : "");
          checker.compare(name, device_target.read(), ref.floats(), kExact);
          if (n == 1000 && offset == 0)
            check_queued(gpu, checker, name, {.launches = 1}, [&] {
              gpu.device.memory.convert(gpu.stream, device_target.get(), device_source.get(), n);
            });
        }
}

// The element types of a GEMM: its operands', and C's (bf16 only with bf16 operands).
struct GemmTypes {
  ElementType operands, c;
};
constexpr GemmTypes kGemmTypes[] = {{kF32, kF32}, {kBf16, kF32}, {kBf16, kBf16}};

// A GEMM case: the shape and scalars, the offset of every operand from its allocation, and for
// padded rows and batches, how the matrices lie in memory.
struct GemmCase {
  int64_t m, n, k;
  float alpha = 1.0f, beta = 0.0f;
  size_t offset = 0;  // of a, b and c from their allocations, in elements
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

// The elements an operand spans: `batch` matrices `stride` apart, of `rows` rows `ld` apart.
size_t span(int64_t rows, int64_t ld, int64_t stride, int64_t batch) {
  return static_cast<size_t>((batch - 1) * stride + rows * ld);
}
size_t span_a(const Gemm& g) { return span(g.transpose_a ? g.k : g.m, g.lda, g.stride_a, g.batch); }
size_t span_b(const Gemm& g) { return span(g.transpose_b ? g.n : g.k, g.ldb, g.stride_b, g.batch); }
size_t span_c(const Gemm& g) { return span(g.m, g.ldc, g.stride_c, g.batch); }

std::string gemm_name(GemmTypes types, const GemmCase& shape, const Gemm& gemm) {
  std::string name = fmt::format("gemm {}{} {} {}->{} alpha={} beta={}", gemm.transpose_a ? 'T' : 'N',
                                 gemm.transpose_b ? 'T' : 'N', shape_name(shape.m, shape.n, shape.k),
                                 type_name(types.operands), type_name(types.c), shape.alpha, shape.beta);
  if (gemm.epilogue != Epilogue::kNone) name += fmt::format(" epilogue {}", epilogue_name(gemm.epilogue));
  if (shape.row_padding != 0) name += fmt::format(" lda={} ldb={} ldc={}", gemm.lda, gemm.ldb, gemm.ldc);
  if (shape.batch != 1)
    name += fmt::format(" batch={} strides={},{},{}", shape.batch, gemm.stride_a, gemm.stride_b, gemm.stride_c);
  if (shape.offset != 0) name += " (operands at odd offsets)";
  return name;
}

// A GEMM's tensors on the host: its operands and C, and its epilogue's bias (n values), GELU input
// ([m, ld_aux]) and bias gradient (m or n floats).
struct GemmTensors {
  HostTensor a, b, c, bias, aux;
  std::vector<float> bias_grad;
};

// The GEMM on `tensors`' host or device memory.
Gemm with_tensors(Gemm gemm, ConstTypedPtr a, ConstTypedPtr b, TypedPtr c, ConstTypedPtr bias, TypedPtr aux,
                  float* bias_grad) {
  gemm.a = a;
  gemm.b = b;
  gemm.c = c;
  if (gemm.epilogue == Epilogue::kBias || gemm.epilogue == Epilogue::kGeluBias) gemm.bias = bias;
  if (gemm.epilogue == Epilogue::kGeluBias || gemm.epilogue == Epilogue::kGeluGrad) gemm.aux = aux;
  if (gemm.epilogue == Epilogue::kBiasGradA || gemm.epilogue == Epilogue::kBiasGradB) gemm.bias_grad = bias_grad;
  return gemm;
}

// Runs `gemm` on the tensors on both tables and compares what it writes: C (whose padding and
// gaps must come back as they were), and the GELU input or the bias gradient its epilogue writes.
void test_gemm(const Gpu& gpu, Checker& checker, GemmTypes types, const GemmCase& shape, const Gemm& gemm,
               const GemmTensors& tensors) {
  GemmTensors ref = tensors;
  cpu().blas.gemm(kCpuStream, with_tensors(gemm, ref.a.data(), ref.b.data(), ref.c.data(), ref.bias.data(),
                                           ref.aux.data(), ref.bias_grad.data()));
  DeviceTensor a(gpu, tensors.a, shape.offset), b(gpu, tensors.b, shape.offset), c(gpu, tensors.c, shape.offset),
      bias(gpu, tensors.bias, shape.offset), aux(gpu, tensors.aux, shape.offset);
  DeviceCopy<float> bias_grad(gpu, tensors.bias_grad, shape.offset);
  const Gemm device_gemm = with_tensors(gemm, a.get(), b.get(), c.get(), bias.get(), aux.get(), bias_grad.get());
  struct Result {
    std::vector<float> c, aux, bias_grad;
  };
  const auto run = [&] {
    c.write(tensors.c);
    aux.write(tensors.aux);
    bias_grad.write(tensors.bias_grad);
    gpu.device.blas.gemm(gpu.stream, device_gemm);
    return Result{c.read(), aux.read(), bias_grad.read()};
  };
  const Result first = first_run(run), second = second_run(run);
  const std::string name = gemm_name(types, shape, gemm);
  const Tolerance product = gemm_tolerance(types.operands, shape.k);
  checker.compare(name + " c", first.c, ref.c.floats(), stored_in(types.c, epilogue_tolerance(gemm.epilogue, product)));
  checker.check_deterministic(name + " c", first.c, second.c);
  if (gemm.epilogue == Epilogue::kGeluBias) {
    checker.compare(name + " aux", first.aux, ref.aux.floats(), stored_in(types.c, product));
    checker.check_deterministic(name + " aux", first.aux, second.aux);
  }
  if (gemm.epilogue == Epilogue::kBiasGradA || gemm.epilogue == Epilogue::kBiasGradB) {
    checker.compare(name + " bias_grad", first.bias_grad, ref.bias_grad, grad_bias_tolerance(shape.k));
    checker.check_deterministic(name + " bias_grad", first.bias_grad, second.bias_grad);
  }
  // One cuBLASLt call, and a bias gradient's addition into the float gradient (once per case).
  const bool bias_gradient = gemm.epilogue == Epilogue::kBiasGradA || gemm.epilogue == Epilogue::kBiasGradB;
  if (!gemm.transpose_a && !gemm.transpose_b)
    check_queued(gpu, checker, name, {.launches = bias_gradient ? 1 : 0, .blas_calls = 1},
                 [&] { gpu.device.blas.gemm(gpu.stream, device_gemm); });
}

// The GEMM's tensors, random from `seed` on: operands in [-1, 1], the GELU input of kGeluGrad in
// [-4, 4], and for an epilogue that writes its GELU input, a buffer of its own values whose
// padding must stay.
GemmTensors random_gemm_tensors(GemmTypes types, const Gemm& gemm, uint64_t& seed) {
  const bool bias_grad_of_a = gemm.epilogue == Epilogue::kBiasGradA;
  const auto aux_size = static_cast<size_t>(gemm.m * std::max(gemm.ld_aux, int64_t{1}));
  return {random_tensor(types.operands, span_a(gemm), -1.0f, 1.0f, ++seed),
          random_tensor(types.operands, span_b(gemm), -1.0f, 1.0f, ++seed),
          random_tensor(types.c, span_c(gemm), -1.0f, 1.0f, ++seed),
          random_tensor(types.c, static_cast<size_t>(gemm.n), -1.0f, 1.0f, ++seed),
          HostTensor(types.c, pre_activations(aux_size, ++seed)),
          random_floats(static_cast<size_t>(bias_grad_of_a ? gemm.m : gemm.n), -1.0f, 1.0f, ++seed)};
}

// Every case in each of `types`, with every transpose, on random operands from `seed` on.
void test_gemm_cases(const Gpu& gpu, Checker& checker, std::span<const GemmCase> cases,
                     std::span<const GemmTypes> types, uint64_t seed) {
  for (const GemmTypes& gemm_types : types)
    for (const GemmCase& shape : cases)
      for (bool transpose_a : {false, true})
        for (bool transpose_b : {false, true}) {
          const Gemm gemm = gemm_of_case(shape, transpose_a, transpose_b);
          test_gemm(gpu, checker, gemm_types, shape, gemm, random_gemm_tensors(gemm_types, gemm, seed));
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
  test_gemm_cases(gpu, checker, cases, kGemmTypes, 100);
}

// An epilogue's case: the GEMM's, and the GELU input's row stride (a multiple of 8 of at least n).
struct EpilogueCase {
  GemmCase shape;
  int64_t ld_aux;
};

// Every epilogue with every transpose in each element type it takes (the bias gradients only into
// a float C), on the cases' shapes.
void test_epilogue_cases(const Gpu& gpu, Checker& checker, std::span<const EpilogueCase> cases, uint64_t seed) {
  for (const EpilogueCase& epilogue_case : cases)
    for (Epilogue epilogue :
         {Epilogue::kBias, Epilogue::kGeluBias, Epilogue::kGeluGrad, Epilogue::kBiasGradA, Epilogue::kBiasGradB})
      for (const GemmTypes& types : kGemmTypes) {
        const bool bias_gradient = epilogue == Epilogue::kBiasGradA || epilogue == Epilogue::kBiasGradB;
        if (bias_gradient && types.c != kF32) continue;
        for (bool transpose_a : {false, true})
          for (bool transpose_b : {false, true}) {
            Gemm gemm = gemm_of_case(epilogue_case.shape, transpose_a, transpose_b);
            gemm.epilogue = epilogue;
            gemm.ld_aux = epilogue_case.ld_aux;
            test_gemm(gpu, checker, types, epilogue_case.shape, gemm, random_gemm_tensors(types, gemm, seed));
          }
      }
}

void test_epilogues(const Gpu& gpu, Checker& checker) {
  const EpilogueCase cases[] = {
      {{.m = 1, .n = 1, .k = 1}, 8},
      {{.m = 129, .n = 37, .k = 63}, 40},
      // Accumulating into C (as weight gradients do), every tensor at an odd offset.
      {{.m = 33, .n = 72, .k = 257, .beta = 1.0f, .offset = 1}, 88},
  };
  test_epilogue_cases(gpu, checker, cases, 200);

  // cuBLASLt takes the GELU input's row stride only in multiples of 8: both tables refuse others.
  for (const Device* device : {&cpu(), &gpu.device}) {
    Gemm gemm = gemm_of_case({.m = 2, .n = 3, .k = 4}, false, false);
    gemm.epilogue = Epilogue::kGeluBias;
    gemm.ld_aux = 12;
    std::string error;
    try {
      device->blas.gemm(device == &cpu() ? kCpuStream : gpu.stream, gemm);
    } catch (const std::logic_error& refused) {
      error = refused.what();
    }
    checker.record(error.find("ld_aux") != std::string::npos,
                   fmt::format("{} gemm with ld_aux 12: refused ({})", device->name, error));
  }
}

// The activations' inputs: n elements, `offset` elements into their allocations. The vector path
// moves 16 bytes at a time: four floats or eight bf16s, where every vector starts 16-byte
// aligned; offset 1 is not, offset 4 is for floats only; n % 8 elements are left to the scalar
// tail. (The grid-stride loop they share, for_each_pack, takes a thread over more than one
// vector in sum_squares's test.)
struct ActivationCase {
  int64_t n;
  size_t offset = 0;
};
constexpr ActivationCase kActivationCases[] = {{1}, {7}, {64}, {1003, 1}, {10003}, {10003, 1}, {10003, 4}};
// The benchmark MLP's hidden activations: batch 8192, 8192 wide.
constexpr ActivationCase kBenchmarkActivationCases[] = {{8192 * 8192}};

std::string activation_case_name(const char* op, Activation act, ElementType type, const ActivationCase& shape,
                                 bool in_place) {
  return fmt::format("{} {} {} n={}{}{}", op, activation_name(act), type_name(type), shape.n,
                     shape.offset != 0 ? fmt::format(" (offset {})", shape.offset) : "", in_place ? " in place" : "");
}

void test_activation_forward(const Gpu& gpu, Checker& checker, std::span<const ActivationCase> cases, uint64_t seed) {
  for (const ActivationCase& shape : cases)
    for (ElementType type : kElementTypes)
      for (Activation act : kActivations)
        for (bool in_place : {false, true}) {
          const auto n = static_cast<size_t>(shape.n);
          const HostTensor z(type, pre_activations(n, ++seed));
          HostTensor ref(type, std::vector<float>(n));
          cpu().elementwise.activation_forward(kCpuStream, ref.data(), z.data(), shape.n, act);

          DeviceTensor device_z(gpu, z, shape.offset),
              separate_out(gpu, HostTensor(type, std::vector<float>(n)), shape.offset);
          // In place: out is z, which then holds act(z).
          const DeviceTensor& out = in_place ? device_z : separate_out;
          const auto op = [&] {
            gpu.device.elementwise.activation_forward(gpu.stream, out.get(), device_z.get(), shape.n, act);
          };
          const auto run = [&] {
            device_z.write(z);
            op();
            return out.read();
          };
          const std::vector<float> first = first_run(run);
          const std::string name = activation_case_name("activation_forward", act, type, shape, in_place);
          if (!in_place) checker.compare(name + " z untouched", device_z.read(), z.floats(), kExact);
          checker.compare(name, first, ref.floats(), stored_in(type, activation_tolerance(act)));
          checker.check_deterministic(name, first, second_run(run));
          if (shape.n == 1003) check_queued(gpu, checker, name, {.launches = 1}, op);
        }
}

void test_activation_backward(const Gpu& gpu, Checker& checker, std::span<const ActivationCase> cases, uint64_t seed) {
  for (const ActivationCase& shape : cases)
    for (ElementType type : kElementTypes)
      for (Activation act : kActivations)
        for (bool in_place : {false, true}) {
          const auto n = static_cast<size_t>(shape.n);
          const HostTensor grad_out = random_tensor(type, n, -1.0f, 1.0f, ++seed);
          HostTensor z(type, pre_activations(n, ++seed)), out(type, std::vector<float>(n));
          cpu().elementwise.activation_forward(kCpuStream, out.data(), z.data(), shape.n, act);
          HostTensor ref(type, std::vector<float>(n));
          // Without an activation, z and out are not read, and the model passes null for them.
          const bool no_inputs = act == Activation::kNone;
          cpu().elementwise.activation_backward(kCpuStream, ref.data(), grad_out.data(),
                                                no_inputs ? ConstTypedPtr{} : z.data(),
                                                no_inputs ? ConstTypedPtr{} : out.data(), shape.n, act);

          DeviceTensor device_grad_out(gpu, grad_out, shape.offset), device_z(gpu, z, shape.offset),
              device_out(gpu, out, shape.offset),
              separate_grad_z(gpu, HostTensor(type, std::vector<float>(n)), shape.offset);
          // In place, as the model calls it: grad_z is grad_out.
          const DeviceTensor& grad_z = in_place ? device_grad_out : separate_grad_z;
          const auto op = [&] {
            gpu.device.elementwise.activation_backward(gpu.stream, grad_z.get(), device_grad_out.get(),
                                                       no_inputs ? ConstTypedPtr{} : device_z.get(),
                                                       no_inputs ? ConstTypedPtr{} : device_out.get(), shape.n, act);
          };
          const auto run = [&] {
            device_grad_out.write(grad_out);
            op();
            return grad_z.read();
          };
          const std::vector<float> first = first_run(run);
          const std::string name = activation_case_name("activation_backward", act, type, shape, in_place);
          checker.compare(name, first, ref.floats(), stored_in(type, activation_tolerance(act)));
          checker.check_deterministic(name, first, second_run(run));
          if (shape.n == 1003) check_queued(gpu, checker, name, {.launches = 1}, op);
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
        const auto op = [&] { gpu.device.elementwise.add(gpu.stream, out.get(), device_a.get(), device_b.get(), n); };
        op();
        const char* output_name = output == Output::kIsA ? " out = a" : output == Output::kIsB ? " out = b" : "";
        const std::string name = fmt::format("add n={}{}{}", n, offset != 0 ? " (unaligned)" : "", output_name);
        checker.compare(name, out.read(), ref, kExact);
        if (n == 1000 && output == Output::kSeparate) check_queued(gpu, checker, name, {.launches = 1}, op);
      }
}

struct LossCase {
  int64_t rows, classes;
  bool integer_logits;     // many ties for the argmax, which goes to the first
  size_t offset = 0;       // of the logits from their allocation, in elements
  int64_t row_stride = 0;  // a padded vocabulary's; 0: classes
  int64_t stride() const { return row_stride != 0 ? row_stride : classes; }
};
// Strides a multiple of 8 (1000, 8, 40) at offset 0: every row starts 16-byte aligned in either
// type, so the kernel reads 16 bytes at a time; 12 only in f32; at offset 1, and the other
// strides, one element at a time. Over 8192 rows (9000) a warp takes more than one row. Padded
// rows (37 of 40, 10 of 13) must be skipped by the vector reads and by the single ones.
constexpr LossCase kLossCases[] = {{1, 1, false},         {3, 5, false},      {129, 10, false},
                                   {129, 10, true},       {129, 12, true},    {257, 1000, false},
                                   {257, 1000, false, 1}, {4099, 37, false},  {9000, 3, false},
                                   {9000, 8, false},      {257, 37, false, 0, 40}, {129, 10, true, 0, 13}};
// GPT-2 124M's: 8 sequences of 1024 tokens over its vocabulary of 50257, padded to 50304.
constexpr LossCase kGpt2LossCases[] = {{8192, 50257, false, 0, 50304}};
// Llama 3.2 1B's: 4 sequences of 2048 tokens over its vocabulary of 128256.
constexpr LossCase kLlamaLossCases[] = {{8192, 128256, false}};

// The loss works over its logits in place and accumulates into its device scalars: each run
// starts from the same logits and from accumulators that already hold something.
void test_softmax_cross_entropy(const Gpu& gpu, Checker& checker, std::span<const LossCase> cases, uint64_t seed) {
  constexpr double kLossSumBefore = 1.5;
  constexpr int64_t kCorrectBefore = 7;
  for (const LossCase& shape : cases)
    for (ElementType type : kElementTypes)
      // Without a gradient (evaluation), on the cases up to 257 rows.
      for (bool with_gradient : {true, false}) {
        if (!with_gradient && shape.rows > 257) continue;
        const auto n = static_cast<size_t>(shape.rows * shape.stride());
        std::vector<float> values = random_floats(n, -8.0f, 8.0f, ++seed);
        if (shape.integer_logits)
          for (float& logit : values) logit = std::round(logit / 4.0f);
        const HostTensor logits(type, values);
        const std::vector<int32_t> labels = random_labels(static_cast<size_t>(shape.rows), shape.classes, ++seed);
        const std::optional<float> grad_scale =
            with_gradient ? std::optional<float>(1.0f / static_cast<float>(shape.rows)) : std::nullopt;
        HostTensor ref = logits;
        double ref_loss = kLossSumBefore;
        int64_t ref_correct = kCorrectBefore;
        cpu().loss.softmax_cross_entropy(kCpuStream, ref.data(), labels.data(), shape.rows, shape.classes,
                                         shape.stride(), grad_scale, &ref_loss, &ref_correct);

        DeviceTensor device_logits(gpu, logits, shape.offset);
        DeviceCopy<int32_t> device_labels(gpu, labels);
        DeviceCopy<double> loss_sum(gpu, {kLossSumBefore});
        DeviceCopy<int64_t> correct(gpu, {kCorrectBefore});
        const auto op = [&] {
          gpu.device.loss.softmax_cross_entropy(gpu.stream, device_logits.get(), device_labels.get(), shape.rows,
                                                shape.classes, shape.stride(), grad_scale, loss_sum.get(),
                                                correct.get());
        };
        struct Result {
          double loss;
          int64_t correct;
          std::vector<float> logits;
        };
        const auto run = [&] {
          device_logits.write(logits);
          loss_sum.write({kLossSumBefore});
          correct.write({kCorrectBefore});
          op();
          return Result{loss_sum.read()[0], correct.read()[0], device_logits.read()};
        };
        const Result first = first_run(run), second = second_run(run);
        const std::string name =
            fmt::format("softmax_cross_entropy {} {}{}{}{}{}", type_name(type), shape_name(shape.rows, shape.classes),
                        shape.row_stride != 0 ? fmt::format(" padded to {}", shape.row_stride) : "",
                        shape.integer_logits ? " tied logits" : "", shape.offset != 0 ? " (unaligned)" : "",
                        with_gradient ? "" : " no gradient");
        checker.compare(name + " loss_sum", first.loss, ref_loss, kDoubleSum);
        checker.compare(name + " correct", first.correct, ref_correct, kExact);
        // With a gradient, the logits hold it (the padding's 0); without, they are untouched.
        checker.compare(name + (with_gradient ? " gradient" : " logits untouched"), first.logits, ref.floats(),
                        with_gradient ? stored_in(type, kSoftmaxGrad) : kExact);
        checker.check_deterministic(name + " loss_sum", first.loss, second.loss);
        checker.check_deterministic(name + " correct", first.correct, second.correct);
        checker.check_deterministic(name + " logits", first.logits, second.logits);
        if (&shape == &cases.front()) check_queued(gpu, checker, name, {.launches = 1}, op);
      }
}

// An optimizer step's update: n elements in parameter groups (the elements past the last group's
// end must be left alone), the gradient clipping (none; a max_norm above the gradient's norm, which
// changes nothing; or one below it), the compute copy's type (none, or bf16), and where the
// vectors lie: a shard starts at any element offset of the flat buffers. All at 0, the kernel
// moves four floats (and four bf16s) at a time; at an odd offset, or the gradient alone, or the
// copy alone at 2 (four bf16s not 8-byte aligned), one at a time. Packs straddle the groups' ends.
enum class Clip { kNone, kAboveNorm, kBelowNorm };
struct OptimizerCase {
  int64_t n;
  std::vector<int64_t> group_ends;
  std::vector<uint8_t> group_decays;
  Clip clip;
  std::optional<ElementType> compute_copy;
  size_t offset = 0, grad_offset = 0, copy_offset = 0;
};

std::vector<OptimizerCase> optimizer_cases() {
  const std::vector<int64_t> ends_1000{3, 250, 251, 997};
  const std::vector<uint8_t> decays_1000{1, 0, 1, 0};
  const std::vector<int64_t> ends_10003{4097, 5001, 10000};
  const std::vector<uint8_t> decays_10003{0, 1, 0};
  return {{1, {1}, {1}, Clip::kNone, std::nullopt},
          {1000, ends_1000, decays_1000, Clip::kBelowNorm, kBf16},
          {1000, ends_1000, decays_1000, Clip::kAboveNorm, kBf16, 1, 1, 1},
          {1000, ends_1000, decays_1000, Clip::kBelowNorm, kBf16, 0, 0, 2},
          {10003, ends_10003, decays_10003, Clip::kBelowNorm, std::nullopt},
          {10003, ends_10003, decays_10003, Clip::kNone, kBf16, 0, 3, 0},
          {10003, {10003}, {1}, Clip::kBelowNorm, kF32, 1, 1, 1}};
}

// GPT-2 124M's parameters (124,475,904 with the padded vocabulary) in groups as its layout makes
// them: weights that decay, between biases and LayerNorm parameters that do not; a shard's end
// past the last group.
std::vector<OptimizerCase> gpt2_optimizer_cases() {
  std::vector<int64_t> ends;
  std::vector<uint8_t> decays;
  int64_t end = 0;
  for (int tensor = 0; tensor < 50; ++tensor) {
    end += tensor % 2 == 0 ? 2'359'296 : 4'609;
    ends.push_back(end);
    decays.push_back(tensor % 2 == 0 ? 1 : 0);
  }
  ends.back() = 124'475'900;
  return {{124'475'904, ends, decays, Clip::kBelowNorm, kBf16}};
}

std::string optimizer_case_name(const OptimizerCase& update) {
  const char* clip = update.clip == Clip::kNone        ? "no clipping"
                     : update.clip == Clip::kAboveNorm ? "max_norm above the norm"
                                                       : "clipped";
  return fmt::format("n={} {} groups, {}, compute copy {}{}", update.n, update.group_ends.size(), clip,
                     update.compute_copy ? type_name(*update.compute_copy) : "none",
                     update.offset != 0 || update.grad_offset != 0 || update.copy_offset != 0
                         ? fmt::format(" (offsets {},{},{})", update.offset, update.grad_offset, update.copy_offset)
                         : "");
}

// An optimizer: its state vectors (besides the parameters), its weight decay, and its step on
// `device` with that state.
struct Optimizer {
  const char* name;
  int state_vectors;
  double weight_decay;
  std::function<void(const Device& device, Stream stream, const ParameterUpdate& update,
                     const std::vector<float*>& state, int step)>
      step;
};

const Optimizer kOptimizers[] = {
    {"sgd_step (state: param, momentum_buffer)", 1, 1e-4,
     [](const Device& device, Stream stream, const ParameterUpdate& update, const std::vector<float*>& state, int) {
       device.optimizer.sgd_step(stream, update, state[0], 0.1, 0.9);
     }},
    {"sgd_step without momentum or decay", 1, 0.0,
     [](const Device& device, Stream stream, const ParameterUpdate& update, const std::vector<float*>& state, int) {
       device.optimizer.sgd_step(stream, update, state[0], 0.05, 0.0);
     }},
    {"adamw_step (state: param, exp_avg, exp_avg_sq)", 2, 0.01,
     [](const Device& device, Stream stream, const ParameterUpdate& update, const std::vector<float*>& state,
        int step) { device.optimizer.adamw_step(stream, update, state[0], state[1], 1e-3, 0.9, 0.999, 1e-8, step); }},
};

// The sums of squares of a gradient's three shards (sum_squares's on the CPU), as the trainer
// gathers them, and the max_norm that makes `clip` of them.
std::vector<double> shard_squares(const std::vector<float>& gradient) {
  const auto n = static_cast<int64_t>(gradient.size());
  std::vector<double> squares(3);
  for (int64_t shard = 0; shard < 3; ++shard) {
    const int64_t begin = n * shard / 3, end = n * (shard + 1) / 3;
    cpu().optimizer.sum_squares(kCpuStream, gradient.data() + begin, end - begin, &squares[static_cast<size_t>(shard)]);
  }
  return squares;
}
double max_norm_for(Clip clip, const std::vector<double>& squares) {
  const double norm = std::sqrt(squares[0] + squares[1] + squares[2]);
  return clip == Clip::kNone ? 0.0 : clip == Clip::kAboveNorm ? 2.0 * norm : 0.25 * norm;
}

// Three steps on the CPU and on CUDA from the same state, each on its own gradient: the
// parameters, the optimizer state and the compute copy must match bitwise.
void test_optimizer_cases(const Gpu& gpu, Checker& checker, const std::vector<OptimizerCase>& cases, uint64_t seed) {
  constexpr int kSteps = 3;
  for (const Optimizer& optimizer : kOptimizers)
    for (const OptimizerCase& update : cases) {
      const auto size = static_cast<size_t>(update.n);
      // Parameters random, optimizer state zero, as at the start of training; the compute copy
      // holds something else, which must stay past the last group.
      const std::vector<float> initial_parameters = random_floats(size, -1.0f, 1.0f, ++seed);
      const std::vector<float> initial_copy(size, 3.0f);
      std::vector<std::vector<float>> gradients;
      std::vector<std::vector<double>> squares;
      for (int s = 0; s < kSteps; ++s) {
        gradients.push_back(random_floats(size, -1.0f, 1.0f, ++seed));
        squares.push_back(shard_squares(gradients.back()));
      }
      const double max_norm = max_norm_for(update.clip, squares[0]);
      const auto update_on = [&](float* parameters, const float* gradient, TypedPtr compute_copy,
                                 const int64_t* group_ends, const uint8_t* group_decays, const double* shard_sums) {
        return ParameterUpdate{.parameters = parameters,
                               .gradients = gradient,
                               .compute_copy = compute_copy,
                               .n = update.n,
                               .group_ends = group_ends,
                               .group_decays = group_decays,
                               .groups = static_cast<int64_t>(update.group_ends.size()),
                               .weight_decay = optimizer.weight_decay,
                               .shard_squares = shard_sums,
                               .shards = 3,
                               .max_norm = max_norm};
      };

      std::vector<float> ref_parameters = initial_parameters;
      std::vector<std::vector<float>> ref_state(static_cast<size_t>(optimizer.state_vectors),
                                                std::vector<float>(size, 0.0f));
      std::vector<float*> ref_state_pointers;
      for (auto& vector : ref_state) ref_state_pointers.push_back(vector.data());
      std::optional<HostTensor> ref_copy;
      if (update.compute_copy) ref_copy.emplace(*update.compute_copy, initial_copy);
      for (int s = 0; s < kSteps; ++s)
        optimizer.step(cpu(), kCpuStream,
                       update_on(ref_parameters.data(), gradients[static_cast<size_t>(s)].data(),
                                 ref_copy ? ref_copy->data() : TypedPtr{}, update.group_ends.data(),
                                 update.group_decays.data(), squares[static_cast<size_t>(s)].data()),
                       ref_state_pointers, s + 1);

      DeviceCopy<float> parameters(gpu, initial_parameters, update.offset),
          gradient(gpu, gradients[0], update.grad_offset);
      std::vector<std::unique_ptr<DeviceCopy<float>>> state;
      std::vector<float*> state_pointers;
      for (int v = 0; v < optimizer.state_vectors; ++v) {
        state.push_back(std::make_unique<DeviceCopy<float>>(gpu, std::vector<float>(size, 0.0f), update.offset));
        state_pointers.push_back(state.back()->get());
      }
      std::optional<DeviceTensor> compute_copy;
      if (update.compute_copy)
        compute_copy.emplace(gpu, HostTensor(*update.compute_copy, initial_copy), update.copy_offset);
      DeviceCopy<int64_t> group_ends(gpu, update.group_ends);
      DeviceCopy<uint8_t> group_decays(gpu, update.group_decays);
      DeviceCopy<double> shard_sums(gpu, squares[0]);
      const ParameterUpdate device_update =
          update_on(parameters.get(), gradient.get(), compute_copy ? compute_copy->get() : TypedPtr{},
                    group_ends.get(), group_decays.get(), shard_sums.get());
      struct Result {
        std::vector<std::vector<float>> vectors;  // the parameters, the state, the compute copy
      };
      const auto run = [&] {
        parameters.write(initial_parameters);
        for (auto& vector : state) vector->write(std::vector<float>(size, 0.0f));
        if (compute_copy) compute_copy->write(HostTensor(*update.compute_copy, initial_copy));
        for (int s = 0; s < kSteps; ++s) {
          gradient.write(gradients[static_cast<size_t>(s)]);
          shard_sums.write(squares[static_cast<size_t>(s)]);
          optimizer.step(gpu.device, gpu.stream, device_update, state_pointers, s + 1);
        }
        Result result{{parameters.read()}};
        for (const auto& vector : state) result.vectors.push_back(vector->read());
        if (compute_copy) result.vectors.push_back(compute_copy->read());
        return result;
      };
      const Result first = first_run(run), second = second_run(run);
      std::vector<std::vector<float>> ref_vectors{ref_parameters};
      for (const auto& vector : ref_state) ref_vectors.push_back(vector);
      if (ref_copy) ref_vectors.push_back(ref_copy->floats());
      for (size_t v = 0; v < ref_vectors.size(); ++v) {
        const std::string vector_name = v == 0                               ? "param"
                                        : v <= state.size() ? fmt::format("state {}", v)
                                                                             : std::string("compute copy");
        const std::string what = fmt::format("{} {} {} after {} steps", optimizer.name,
                                             optimizer_case_name(update), vector_name, kSteps);
        checker.compare(what, first.vectors[v], ref_vectors[v], kExact);
        checker.check_deterministic(what, first.vectors[v], second.vectors[v]);
      }
      check_queued(gpu, checker, fmt::format("{} {}", optimizer.name, optimizer_case_name(update)), {.launches = 1},
                   [&] { optimizer.step(gpu.device, gpu.stream, device_update, state_pointers, kSteps + 1); });
    }
}

void test_optimizers(const Gpu& gpu, Checker& checker) { test_optimizer_cases(gpu, checker, optimizer_cases(), 600); }
void test_gpt2_optimizer(const Gpu& gpu, Checker& checker) {
  test_optimizer_cases(gpu, checker, gpt2_optimizer_cases(), 1300);
}

// sum_squares's result stays on the device, where it overwrites what was there.
void test_sum_squares(const Gpu& gpu, Checker& checker) {
  uint64_t seed = 700;
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{1000}, int64_t{100003}, int64_t{3000017}})
    // Offset 1: not 16-byte aligned, so one float at a time.
    for (size_t offset : {size_t{0}, size_t{1}}) {
      const std::vector<float> x = random_floats(static_cast<size_t>(std::max(n, int64_t{1})), -1.0f, 1.0f, ++seed);
      double ref = 0.0;
      cpu().optimizer.sum_squares(kCpuStream, x.data(), n, &ref);
      DeviceCopy<float> device_x(gpu, x, offset);
      DeviceCopy<double> sum(gpu, {-1.0}, offset);
      const auto op = [&] { gpu.device.optimizer.sum_squares(gpu.stream, device_x.get(), n, sum.get()); };
      const auto run = [&] {
        sum.write({-1.0});
        op();
        return sum.read()[0];
      };
      const double first = first_run(run), second = second_run(run);
      const std::string name = fmt::format("sum_squares n={}{}", n, offset != 0 ? " (unaligned)" : "");
      checker.compare(name, first, ref, kDoubleSum);
      checker.check_deterministic(name, first, second);
      if (n == 100003) check_queued(gpu, checker, name, {.launches = 1}, op);
    }
}

// Attention, q, k, v and grad_out in [-1, 1]. In f32 (and bf16 where the tensor cores do not take
// the head: a head size other than 16, 32, 64 or 128) both sides compute in fp32 with the same
// formulas but in different orders (CPU: dense scores, softmax with the row's max, OpenBLAS GEMMs;
// CUDA: tiles of 32 keys with an online softmax, dot products in four strided shares), and expf
// differs by an ulp or two between them. out is a convex combination of v rows (|out| <= 1) and
// lse at most about |s| + log(seq) < 20, so a few ulp of each: 1e-5. The gradients sum up to seq
// products, and dS = P * (dP - D) cancels, so an fp32 GEMM's tolerance (kGemmFp32, seq and head
// size far below its depth 1031). On an H200 the worst were 1.8e-7 (out) and 3.5e-6 (grad_qkv) at
// GPT-2 124M's shape; a masking or indexing error shows as 1e-2 or more. In bf16, both sides read
// the same bf16 values and round out and grad_qkv once (stored_in); lse stays float.
constexpr Tolerance kAttentionForward{1e-5, 1e-5};
constexpr Tolerance kAttentionBackward = kGemmFp32;
// bf16 on tensor cores (kernels/cuda/flash_attention.cuh), as FlashAttention-2: the scores are
// exact products summed in fp32 (lse within kAttentionForward), but P is rounded to bf16 (2^-9 of
// itself) before P V, and P and dS before the gradients' products. out is a mean of v rows whose
// weights are each off by up to 2^-9 of themselves: at most 2^-9 of |v| <= 1 in all (2e-3); the
// gradients sum up to seq such terms of either sign, whose errors mostly cancel (4e-3 allowed).
// Then each side rounds to bf16 (stored_in). Measured on the CPU implementation of CUDA
// (2026-11-27), at every shape here up to T = 1024 with d = 128: the worst out and grad_qkv were
// one bf16 ulp of the result (0.0039 at |out| near 0.5, 0.0078 at |grad| near 1.1), rounding
// flips of values within a fraction of an ulp; a masking or indexing error shows as 1e-1 or more.
constexpr Tolerance kFlashForward{2e-3, 0.0};
constexpr Tolerance kFlashBackward{4e-3, 0.0};
// Grouped-query attention sums a key/value head's dK and dV over the query heads of its group, each
// head's part off by up to kFlashBackward, so the absolute part grows with the group size: measured
// (2026-11-29, the CPU implementation of CUDA) 4.4e-3 at |ref| 0.07 for 4 query heads sharing one
// key/value head, and one bf16 ulp of the result elsewhere. In fp32 a group adds at most 4 x 70
// products to a sum, far below kAttentionBackward's depth.
Tolerance flash_backward_tolerance(const trainctl::AttentionShape& shape) {
  return {kFlashBackward.abs * static_cast<double>(shape.group_size()), kFlashBackward.rel};
}

// Whether a case takes the tensor cores in bf16 (flash_attention.cu's flash_attention_usable,
// whose alignment the tests' tensors meet).
bool on_tensor_cores(ElementType type, int64_t head_size) {
  return type == kBf16 && (head_size == 16 || head_size == 32 || head_size == 64 || head_size == 128);
}

struct AttentionCase {
  trainctl::AttentionShape shape;
  bool bf16_only = false;  // the tensor cores' own edges, which f32 (on CUDA cores) need not repeat
};
// Multi-head ({batch, seq, heads, kv_heads = heads, head size}): head sizes 8, 16, 10 (not a
// multiple of 4), 64 (GPT-2's), 96 and 128; seq across tile edges (32 keys on CUDA cores, 64 on
// tensor cores). For the tensor cores, head sizes 64 and 128 at T 1, 63, 64, 65; and at 1024
// (kLongAttentionCases).
constexpr AttentionCase kAttentionCases[] = {
    {{1, 1, 1, 1, 8}},          {{2, 37, 3, 3, 16}},        {{1, 45, 3, 3, 10}},        {{1, 129, 2, 2, 64}},
    {{1, 70, 2, 2, 96}},        {{1, 64, 2, 2, 128}},       {{2, 1, 2, 2, 64}, true},   {{2, 63, 2, 2, 64}, true},
    {{2, 65, 2, 2, 64}, true},  {{2, 1, 2, 2, 128}, true},  {{2, 63, 2, 2, 128}, true}, {{2, 65, 2, 2, 128}, true}};
// The tensor cores over 1024 positions, at batch 1 and one head to keep the sanitized run short:
// still three quarters of attention's time, so a group of their own (attention_1024), which the
// mutations of the CUDA cores' attention (tests/cuda_mutations.py) do not wait for.
constexpr AttentionCase kLongAttentionCases[] = {{{1, 1024, 1, 1, 64}, true}, {{1, 1024, 1, 1, 128}, true}};
// Grouped-query: 6 query heads in 2 groups of 3, of 32; 4 query heads sharing one key/value head
// (multi-query), of 64; 4 in 2 groups, of 128 (Llama's head sizes); on tensor cores in bf16 and on
// CUDA cores in f32, seq across the tiles of both.
constexpr AttentionCase kGroupedQueryCases[] = {{{2, 70, 6, 2, 32}}, {{1, 65, 4, 1, 64}}, {{1, 65, 4, 2, 128}}};
// The large shapes: GPT-2 124M's, 4 sequences of 1024 tokens, 12 heads of 64; 4 of 2048, 16 heads
// of 128; and Llama 3.2 1B's attention, 4 of 2048, 32 query heads of 64 in 8 groups.
constexpr AttentionCase kLargeAttentionCases[] = {
    {{4, 1024, 12, 12, 64}}, {{4, 2048, 16, 16, 128}}, {{4, 2048, 32, 8, 64}}};

void test_attention(const Gpu& gpu, Checker& checker, std::span<const AttentionCase> cases, uint64_t seed) {
  const trainctl::AttentionOps& ops = *gpu.device.attention;
  const trainctl::AttentionOps& ref_ops = *cpu().attention;
  for (ElementType type : kElementTypes)
    for (const auto [shape, bf16_only] : cases) {
      if (bf16_only && type != kBf16) continue;
      const auto [batch, seq, heads, kv_heads, head_size] = shape;
      const auto qkv_size = static_cast<size_t>(batch * seq * shape.qkv_width());
      const auto out_size = static_cast<size_t>(batch * seq * shape.out_width());
      const auto lse_size = static_cast<size_t>(batch * heads * seq);
      const HostTensor qkv = random_tensor(type, qkv_size, -1.0f, 1.0f, ++seed);
      const HostTensor grad_out = random_tensor(type, out_size, -1.0f, 1.0f, ++seed);
      // What grad_qkv holds before backward, which overwrites it.
      const HostTensor grad_qkv_init = random_tensor(type, qkv_size, -1.0f, 1.0f, ++seed);
      HostTensor ref_out(type, std::vector<float>(out_size)), ref_grad_qkv(type, std::vector<float>(qkv_size));
      std::vector<float> ref_lse(lse_size);
      ref_ops.attention_forward(kCpuStream, ref_out.data(), ref_lse.data(), qkv.data(), shape);
      // Backward on both sides from the CPU's out and lse, so that it is compared on its own.
      ref_ops.attention_backward(kCpuStream, ref_grad_qkv.data(), grad_out.data(), qkv.data(), ref_out.data(),
                                 ref_lse.data(), shape);

      DeviceTensor device_qkv(gpu, qkv), device_grad_out(gpu, grad_out),
          out(gpu, HostTensor(type, std::vector<float>(out_size))), ref_out_copy(gpu, ref_out),
          grad_qkv(gpu, grad_qkv_init);
      DeviceCopy<float> lse(gpu, std::vector<float>(lse_size)), ref_lse_copy(gpu, ref_lse);
      const auto forward = [&] {
        ops.attention_forward(gpu.stream, out.get(), lse.get(), device_qkv.get(), shape);
      };
      const auto backward = [&] {
        ops.attention_backward(gpu.stream, grad_qkv.get(), device_grad_out.get(), device_qkv.get(),
                               ref_out_copy.get(), ref_lse_copy.get(), shape);
      };
      struct Result {
        std::vector<float> out, lse, grad_qkv;
      };
      const auto run = [&] {
        forward();
        grad_qkv.write(grad_qkv_init);
        backward();
        return Result{out.read(), lse.read(), grad_qkv.read()};
      };
      const Result first = first_run(run), second = second_run(run);
      const bool tensor_cores = on_tensor_cores(type, head_size);
      const std::string name = fmt::format("attention {} B={} T={} H={} KV={} (d={}{})", type_name(type), batch, seq,
                                           heads, kv_heads, head_size, tensor_cores ? ", tensor cores" : "");
      checker.compare(name + " out", first.out, ref_out.floats(),
                      stored_in(type, tensor_cores ? kFlashForward : kAttentionForward));
      checker.compare(name + " lse", first.lse, ref_lse, kAttentionForward);
      checker.compare(name + " grad_qkv", first.grad_qkv, ref_grad_qkv.floats(),
                      stored_in(type, tensor_cores ? flash_backward_tolerance(shape) : kAttentionBackward));
      checker.check_deterministic(name + " out", first.out, second.out);
      checker.check_deterministic(name + " lse", first.lse, second.lse);
      checker.check_deterministic(name + " grad_qkv", first.grad_qkv, second.grad_qkv);
      if (seq == 37) {
        check_queued(gpu, checker, name + " forward", {.launches = 1}, forward);
        // On tensor cores the rows' dO . O first, for both passes.
        check_queued(gpu, checker, name + " backward", {.launches = tensor_cores ? 3 : 2}, backward);
      }
    }
}

// LayerNorm and RMSNorm, x in [-1, 3] (rows off centre, so that the variance's two passes matter),
// the residual's addend, weight, bias and grad_out in [-1, 1], eps 1e-5. Both sides sum the row
// statistics (mean, variance or RMSNorm's mean square, the backward's row means) in double, in
// different orders (CPU: 8 interleaved lanes; CUDA: each of 32 lanes its share of the columns,
// then a butterfly), and round them to float once. A double sum of at most 768 of these terms is
// exact or within about 768 * 2^-53 of it, far below float's 2^-24, so both round to the same
// float unless the double lands that close to a rounding boundary, where they differ by one ulp;
// all else is the same float operations in the same order (the fused residual add's sum,
// bitwise). So mean, rstd, out and grad_x are expected bitwise equal in nearly every element, and
// the tolerances allow one ulp of a row statistic: of mean or rstd, 2^-23 relative at most (2.4e-7
// with a factor 2 to spare); it moves out by at most |weight| * (rstd * ulp(mean) + |x - mean| *
// ulp(rstd)), under 1e-6 here (|mean| < 3, rstd about 0.9, |x - mean| < 4; RMSNorm's rstd about
// 0.6 on |x| < 3), and grad_x, through one ulp of either row mean (|mean| < 1) times rstd and
// |norm| < 2, by less. out and grad_x's copy stored in bf16 round once more (stored_in).
constexpr Tolerance kLayerNormStatistic{0.0, 2.4e-7};
constexpr Tolerance kLayerNormOut{1e-6, 1e-6};
constexpr Tolerance kLayerNormGradX{1e-6, 1e-6};
// grad_weight and grad_bias are float sums over the rows in different orders (CPU row by row,
// CUDA in row blocks: kernel_common.cuh's column sums), so grad_bias_tolerance(rows): the terms
// of grad_weight, grad_out * norm, are as large as grad_bias's grad_out, since norm has RMS 1
// over a row.
Tolerance layernorm_column_sum_tolerance(int64_t rows) { return grad_bias_tolerance(rows); }

struct LayernormCase {
  int64_t rows, cols;
};
// One row block of the column sums (rows 1, 3), three (129) and 65 (4099), in tiles of 32
// columns; 64, 128 and 768 columns are whole packs of four, 1, 7 and 70 not. 4099 rows take 128
// columns, a pack for each lane of a row's warp: with 768, their four cases took a third of the
// sanitized run, and the row blocks are as many up to 4096 / 65 column tiles.
constexpr LayernormCase kLayernormCases[] = {{1, 1}, {3, 7}, {129, 64}, {129, 70}, {1, 768}, {4099, 128}};
// GPT-2 124M's: 8 sequences of 1024 tokens, 768 wide.
constexpr LayernormCase kGpt2LayernormCases[] = {{8192, 768}};
// RMSNorm runs LayerNorm's kernels without the centring: fewer cases, one of 18 row blocks.
constexpr LayernormCase kRmsnormCases[] = {{1, 1}, {3, 7}, {129, 70}, {1100, 64}};
// Llama 3.2 1B's: 4 sequences of 2048 tokens, 2048 wide.
constexpr LayernormCase kLlamaRmsnormCases[] = {{8192, 2048}};

// LayerNorm (mean and bias) or RMSNorm (neither), each call as the norm family's op of its kind.
enum class NormKind { kLayerNorm, kRmsNorm };

void test_norm(const Gpu& gpu, Checker& checker, NormKind kind, std::span<const LayernormCase> cases,
               uint64_t seed) {
  constexpr float kEps = 1e-5f;
  const bool layernorm = kind == NormKind::kLayerNorm;
  const trainctl::NormOps& ops = *gpu.device.norm;
  const trainctl::NormOps& ref_ops = *cpu().norm;
  // The forward and backward of `table`'s norm of this kind (RMSNorm takes no mean and no bias).
  const auto forward_of = [&](const trainctl::NormOps& table, Stream stream, TypedPtr out, float* mean, float* rstd,
                              const float* x, ConstTypedPtr add, float* sum, const float* weight, const float* bias,
                              int64_t rows, int64_t cols) {
    if (layernorm)
      table.layernorm_forward(stream, out, mean, rstd, x, add, sum, weight, bias, rows, cols, kEps);
    else
      table.rmsnorm_forward(stream, out, rstd, x, add, sum, weight, rows, cols, kEps);
  };
  const auto backward_of = [&](const trainctl::NormOps& table, Stream stream, float* grad_x, TypedPtr grad_x_copy,
                               float* grad_weight, float* grad_bias, ConstTypedPtr grad_out, const float* x,
                               const float* weight, const float* mean, const float* rstd, int64_t rows,
                               int64_t cols) {
    if (layernorm)
      table.layernorm_backward(stream, grad_x, grad_x_copy, grad_weight, grad_bias, grad_out, x, weight, mean, rstd,
                               rows, cols);
    else
      table.rmsnorm_backward(stream, grad_x, grad_x_copy, grad_weight, grad_out, x, weight, rstd, rows, cols);
  };
  for (ElementType type : kElementTypes)
    for (const auto [rows, cols] : cases)
      // Offset 1: no row aligned for four elements at a time (on the smaller cases). With the
      // fused residual add, and grad_x's copy in the tensors' type, as the models call them;
      // without, as their first block.
      for (size_t offset : {size_t{0}, size_t{1}})
        for (bool fused : {false, true}) {
          if (offset != 0 && rows * cols > 100'000) continue;
          const auto n = static_cast<size_t>(rows * cols);
          const auto row_count = static_cast<size_t>(rows), col_count = static_cast<size_t>(cols);
          const std::vector<float> x = random_floats(n, -1.0f, 3.0f, ++seed);
          const HostTensor add = random_tensor(type, n, -1.0f, 1.0f, ++seed);
          const std::vector<float> weight = random_floats(col_count, -1.0f, 1.0f, ++seed);
          const std::vector<float> bias = random_floats(col_count, -1.0f, 1.0f, ++seed);
          const HostTensor grad_out = random_tensor(type, n, -1.0f, 1.0f, ++seed);
          // What the gradients hold before backward, which accumulates into them.
          const std::vector<float> grad_x_init = random_floats(n, -1.0f, 1.0f, ++seed);
          const std::vector<float> grad_weight_init = random_floats(col_count, -1.0f, 1.0f, ++seed);
          const std::vector<float> grad_bias_init = random_floats(col_count, -1.0f, 1.0f, ++seed);
          const HostTensor grad_x_copy_init(type, std::vector<float>(n, 5.0f));
          HostTensor ref_out(type, std::vector<float>(n)), ref_grad_x_copy = grad_x_copy_init;
          std::vector<float> ref_mean(row_count), ref_rstd(row_count), ref_sum(n);
          forward_of(ref_ops, kCpuStream, ref_out.data(), ref_mean.data(), ref_rstd.data(), x.data(),
                     fused ? add.data() : ConstTypedPtr{}, fused ? ref_sum.data() : nullptr, weight.data(),
                     bias.data(), rows, cols);
          // Backward on both sides from the CPU's normalized input, mean and rstd, so that it is
          // compared on its own.
          const std::vector<float>& normalized = fused ? ref_sum : x;
          std::vector<float> ref_grad_x = grad_x_init, ref_grad_weight = grad_weight_init,
                             ref_grad_bias = grad_bias_init;
          backward_of(ref_ops, kCpuStream, ref_grad_x.data(), fused ? ref_grad_x_copy.data() : TypedPtr{},
                      ref_grad_weight.data(), ref_grad_bias.data(), grad_out.data(), normalized.data(), weight.data(),
                      ref_mean.data(), ref_rstd.data(), rows, cols);

          DeviceCopy<float> device_x(gpu, x, offset), device_weight(gpu, weight, offset),
              device_bias(gpu, bias, offset), mean(gpu, std::vector<float>(row_count), offset),
              rstd(gpu, std::vector<float>(row_count), offset), sum(gpu, std::vector<float>(n), offset),
              ref_normalized(gpu, normalized, offset), ref_mean_copy(gpu, ref_mean, offset),
              ref_rstd_copy(gpu, ref_rstd, offset), grad_x(gpu, grad_x_init, offset),
              grad_weight(gpu, grad_weight_init, offset), grad_bias(gpu, grad_bias_init, offset);
          DeviceTensor device_add(gpu, add, offset), device_grad_out(gpu, grad_out, offset),
              out(gpu, HostTensor(type, std::vector<float>(n)), offset), grad_x_copy(gpu, grad_x_copy_init, offset);
          const auto forward = [&] {
            forward_of(ops, gpu.stream, out.get(), mean.get(), rstd.get(), device_x.get(),
                       fused ? device_add.get() : TypedPtr{}, fused ? sum.get() : nullptr, device_weight.get(),
                       device_bias.get(), rows, cols);
          };
          const auto backward = [&] {
            backward_of(ops, gpu.stream, grad_x.get(), fused ? grad_x_copy.get() : TypedPtr{}, grad_weight.get(),
                        grad_bias.get(), device_grad_out.get(), ref_normalized.get(), device_weight.get(),
                        ref_mean_copy.get(), ref_rstd_copy.get(), rows, cols);
          };
          struct Result {
            std::vector<float> out, mean, rstd, sum, grad_x, grad_x_copy, grad_weight, grad_bias;
          };
          const auto run = [&] {
            forward();
            grad_x.write(grad_x_init);
            grad_weight.write(grad_weight_init);
            grad_bias.write(grad_bias_init);
            backward();
            return Result{out.read(),    mean.read(),        rstd.read(),        sum.read(),
                          grad_x.read(), grad_x_copy.read(), grad_weight.read(), grad_bias.read()};
          };
          const Result first = first_run(run), second = second_run(run);
          const std::string name = fmt::format("{} {} {}{}{}", layernorm ? "layernorm" : "rmsnorm", type_name(type),
                                               shape_name(rows, cols), offset != 0 ? " (unaligned)" : "",
                                               fused ? " with the residual add and grad_x's copy" : "");
          checker.compare(name + " out", first.out, ref_out.floats(), stored_in(type, kLayerNormOut));
          checker.compare(name + " rstd", first.rstd, ref_rstd, kLayerNormStatistic);
          checker.compare(name + " grad_x", first.grad_x, ref_grad_x, kLayerNormGradX);
          checker.compare(name + " grad_weight", first.grad_weight, ref_grad_weight,
                          layernorm_column_sum_tolerance(rows));
          // RMSNorm leaves the mean and the bias's gradient as they were.
          checker.compare(name + " mean", first.mean, ref_mean, kLayerNormStatistic);
          checker.compare(name + " grad_bias", first.grad_bias, ref_grad_bias, layernorm_column_sum_tolerance(rows));
          if (fused) {
            checker.compare(name + " sum", first.sum, ref_sum, kExact);
            checker.compare(name + " grad_x's copy", first.grad_x_copy, ref_grad_x_copy.floats(),
                            stored_in(type, kLayerNormGradX));
          }
          checker.check_deterministic(name + " out", first.out, second.out);
          checker.check_deterministic(name + " mean", first.mean, second.mean);
          checker.check_deterministic(name + " rstd", first.rstd, second.rstd);
          checker.check_deterministic(name + " sum", first.sum, second.sum);
          checker.check_deterministic(name + " grad_x", first.grad_x, second.grad_x);
          checker.check_deterministic(name + " grad_x's copy", first.grad_x_copy, second.grad_x_copy);
          checker.check_deterministic(name + " grad_weight", first.grad_weight, second.grad_weight);
          checker.check_deterministic(name + " grad_bias", first.grad_bias, second.grad_bias);
          if (rows == 129 && cols == 70 && offset == 0) {
            check_queued(gpu, checker, name + " forward", {.launches = 1}, forward);
            check_queued(gpu, checker, name + " backward", {.launches = 2}, backward);
          }
        }
}

void test_layernorm(const Gpu& gpu, Checker& checker, std::span<const LayernormCase> cases, uint64_t seed) {
  test_norm(gpu, checker, NormKind::kLayerNorm, cases, seed);
}

void test_rmsnorm(const Gpu& gpu, Checker& checker, std::span<const LayernormCase> cases, uint64_t seed) {
  test_norm(gpu, checker, NormKind::kRmsNorm, cases, seed);
}

// Embedding, weights and grad_out in [-1, 1]. The forward adds two floats per element, and the
// backward adds each row of grad_out onto its token's row of grad_wte one at a time in increasing
// position, and onto its position's row of grad_wpe in increasing batch, as the CPU does: the
// same float additions in the same order, so bitwise equal (kExact), repeated tokens included.
// Without positions (wpe and grad_wpe null, a Llama's), the forward copies the token's row.
// Whether a case runs with positions (GPT-2's), without (a Llama's), or both.
enum class Positions { kBoth, kWith, kWithout };
struct EmbeddingCase {
  int64_t batch, seq, channels, vocab;
  Positions positions = Positions::kBoth;
};
// Vocabularies of 1 and 5 (every token repeated many times), 17, and GPT-2's 50257 (tokens
// mostly distinct); all but the first over 64 positions, one tile of the kernel that finds
// equal tokens; 7 and 70 channels are not whole float4s, 1028 is two blocks of 256 float4s.
// Without positions the kernels skip a launch: GPT-2's vocabulary adds nothing to see there.
constexpr EmbeddingCase kEmbeddingCases[] = {{1, 1, 1, 1},    {3, 43, 7, 5},     {1, 129, 64, 5},
                                             {4, 129, 70, 5}, {2, 65, 1028, 17}, {2, 300, 96, 50257, Positions::kWith}};
// GPT-2 124M's: 8 sequences of 1024 tokens, 768 wide.
constexpr EmbeddingCase kGpt2EmbeddingCases[] = {{8, 1024, 768, 50257, Positions::kWith}};
// Llama 3.2 1B's: 4 sequences of 2048 tokens, 2048 wide, its vocabulary of 128256.
constexpr EmbeddingCase kLlamaEmbeddingCases[] = {{4, 2048, 2048, 128256, Positions::kWithout}};

void test_embedding(const Gpu& gpu, Checker& checker, std::span<const EmbeddingCase> cases, uint64_t seed) {
  // wpe has rows past seq, which backward must leave as they are.
  constexpr int64_t kExtraPositions = 3;
  const trainctl::EmbeddingOps& ops = *gpu.device.embedding;
  const trainctl::EmbeddingOps& ref_ops = *cpu().embedding;
  for (const auto [batch, seq, channels, vocab, positions] : cases)
    // Offset 1: no row 16-byte aligned, so the kernels move one float at a time.
    for (size_t offset : {size_t{0}, size_t{1}})
      for (bool with_positions : {true, false}) {
        if (positions == (with_positions ? Positions::kWithout : Positions::kWith)) continue;
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
        ref_ops.embedding_forward(kCpuStream, ref_out.data(), tokens.data(), wte.data(),
                                  with_positions ? wpe.data() : nullptr, batch, seq, channels);
        ref_ops.embedding_backward(kCpuStream, ref_grad_wte.data(), with_positions ? ref_grad_wpe.data() : nullptr,
                                   grad_out.data(), tokens.data(), batch, seq, channels);

        DeviceCopy<int32_t> device_tokens(gpu, tokens, offset);
        DeviceCopy<float> device_wte(gpu, wte, offset), device_wpe(gpu, wpe, offset),
            device_grad_out(gpu, grad_out, offset), out(gpu, std::vector<float>(out_size), offset),
            grad_wte(gpu, grad_wte_init, offset), grad_wpe(gpu, grad_wpe_init, offset);
        const auto forward = [&] {
          ops.embedding_forward(gpu.stream, out.get(), device_tokens.get(), device_wte.get(),
                                with_positions ? device_wpe.get() : nullptr, batch, seq, channels);
        };
        const auto backward = [&] {
          ops.embedding_backward(gpu.stream, grad_wte.get(), with_positions ? grad_wpe.get() : nullptr,
                                 device_grad_out.get(), device_tokens.get(), batch, seq, channels);
        };
        struct Result {
          std::vector<float> out, grad_wte, grad_wpe;
        };
        const auto run = [&] {
          forward();
          grad_wte.write(grad_wte_init);
          grad_wpe.write(grad_wpe_init);
          backward();
          return Result{out.read(), grad_wte.read(), grad_wpe.read()};
        };
        const Result first = first_run(run), second = second_run(run);
        const std::string name =
            fmt::format("embedding B={} T={} C={} vocab={}{}{}", batch, seq, channels, vocab,
                        offset != 0 ? " (unaligned)" : "", with_positions ? "" : " without positions");
        checker.compare(name + " out", first.out, ref_out, kExact);
        checker.compare(name + " grad_wte", first.grad_wte, ref_grad_wte, kExact);
        checker.compare(name + " grad_wpe", first.grad_wpe, ref_grad_wpe, kExact);
        checker.check_deterministic(name + " out", first.out, second.out);
        checker.check_deterministic(name + " grad_wte", first.grad_wte, second.grad_wte);
        checker.check_deterministic(name + " grad_wpe", first.grad_wpe, second.grad_wpe);
        if (seq == 43) {
          check_queued(gpu, checker, name + " forward", {.launches = 1}, forward);
          check_queued(gpu, checker, name + " backward", {.launches = with_positions ? 3 : 2}, backward);
        }
      }
}

// SwiGLU, gate in [-4, 4] (every 7th exactly 0), up and grad_out in [-1, 1]. Both sides compute
// SwiGlu's float arithmetic (activation_functions.h) in the same order, uncontracted, and differ
// only by expf, within 2 ulp on CUDA and 4 in glibc's vector version: exp(-gate) off by 6 ulp
// moves 1 + exp(-gate), and so silu(gate) and the sigmoid, by at most as much relative (6 * 2^-24
// = 3.6e-7), which the products with up and grad_out (|.| <= 1) keep; the gate's gradient,
// sigmoid * (1 + gate * (1 - sigmoid)) with |gate| <= 4, moves by up to 5 times that absolute,
// where its second factor cancels (near gate = -1.28).
constexpr Tolerance kSwiGlu{2e-6, 1e-6};

struct SwiGluCase {
  int64_t rows, width;
  size_t offset = 0;
};
// Widths a multiple of 8 at offset 0 go 16 bytes at a time in either type (4 floats, 8 bf16s), 4
// in f32 only; 7 and 70 one element at a time, as offset 1. 4099 rows of 64 take a thread over
// more than one row (kernel_common.cuh's row tiles), 1100 columns more than one column tile.
constexpr SwiGluCase kSwiGluCases[] = {{1, 1}, {3, 7}, {129, 64}, {129, 70}, {129, 64, 1}, {33, 4}, {4099, 64},
                                       {5, 1100}};
// Llama 3.2 1B's MLP: 4 x 2048 tokens, 8192 wide.
constexpr SwiGluCase kLlamaSwiGluCases[] = {{8192, 8192}};

void test_swiglu(const Gpu& gpu, Checker& checker, std::span<const SwiGluCase> cases, uint64_t seed) {
  for (ElementType type : kElementTypes)
    for (const auto [rows, width, offset] : cases) {
      const auto n = static_cast<size_t>(rows * width);
      std::vector<float> gate_up_values(2 * n);
      const std::vector<float> gates = pre_activations(n, ++seed), ups = random_floats(n, -1.0f, 1.0f, ++seed);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < width; ++j) {
          gate_up_values[static_cast<size_t>(2 * r * width + j)] = gates[static_cast<size_t>(r * width + j)];
          gate_up_values[static_cast<size_t>((2 * r + 1) * width + j)] = ups[static_cast<size_t>(r * width + j)];
        }
      const HostTensor gate_up(type, gate_up_values), grad_out = random_tensor(type, n, -1.0f, 1.0f, ++seed);
      HostTensor ref_out(type, std::vector<float>(n)), ref_grad(type, std::vector<float>(2 * n));
      cpu().elementwise.swiglu_forward(kCpuStream, ref_out.data(), gate_up.data(), rows, width);
      cpu().elementwise.swiglu_backward(kCpuStream, ref_grad.data(), grad_out.data(), gate_up.data(), rows, width);

      DeviceTensor device_gate_up(gpu, gate_up, offset), device_grad_out(gpu, grad_out, offset),
          out(gpu, HostTensor(type, std::vector<float>(n)), offset),
          // Starts from garbage: the backward overwrites it.
          grad(gpu, random_tensor(type, 2 * n, -100.0f, 100.0f, ++seed), offset);
      const auto forward = [&] {
        gpu.device.elementwise.swiglu_forward(gpu.stream, out.get(), device_gate_up.get(), rows, width);
      };
      const auto backward = [&] {
        gpu.device.elementwise.swiglu_backward(gpu.stream, grad.get(), device_grad_out.get(), device_gate_up.get(),
                                               rows, width);
      };
      struct Result {
        std::vector<float> out, grad;
      };
      const auto run = [&] {
        forward();
        backward();
        return Result{out.read(), grad.read()};
      };
      const Result first = first_run(run), second = second_run(run);
      const std::string name = fmt::format("swiglu {} {}{}", type_name(type), shape_name(rows, width),
                                           offset != 0 ? " (unaligned)" : "");
      checker.compare(name + " out", first.out, ref_out.floats(), stored_in(type, kSwiGlu));
      checker.compare(name + " grad_gate_up", first.grad, ref_grad.floats(), stored_in(type, kSwiGlu));
      checker.compare(name + " gate_up untouched", device_gate_up.read(), gate_up.floats(), kExact);
      checker.check_deterministic(name + " out", first.out, second.out);
      checker.check_deterministic(name + " grad_gate_up", first.grad, second.grad);
      if (rows == 129 && width == 70) {
        check_queued(gpu, checker, name + " forward", {.launches = 1}, forward);
        check_queued(gpu, checker, name + " backward", {.launches = 1}, backward);
      }
    }
}

// RoPE, qkv in [-1, 1], the tables of random angles' cos and sin. Both sides round each of the
// two products, then their sum, in float, uncontracted (--fmad=false), and widen a bf16 element
// exactly and round the result once: bitwise equal (kExact), the value heads untouched. The
// planted bug of tests/cuda_mutations.py (interleaved pairs for rotate_half's halves) must show.
struct RopeCase {
  trainctl::AttentionShape shape;
  size_t offset = 0;
};
// One head of two columns; a key/value head per 3 query heads; Llama's head sizes 32, 64 and
// 128 (two columns per lane of a head's warp); offset 1 in both types.
constexpr RopeCase kRopeCases[] = {{{1, 1, 1, 1, 2}}, {{2, 5, 3, 1, 8}},   {{2, 37, 4, 2, 64}},
                                   {{1, 129, 6, 2, 32}}, {{1, 17, 2, 2, 128}}, {{2, 5, 3, 1, 8}, 1}};
// Llama 3.2 1B's: 4 sequences of 2048 tokens, 32 query heads of 64 in 8 groups.
constexpr RopeCase kLlamaRopeCases[] = {{{4, 2048, 32, 8, 64}}};

void test_rope(const Gpu& gpu, Checker& checker, std::span<const RopeCase> cases, uint64_t seed) {
  for (ElementType type : kElementTypes)
    for (const auto [shape, offset] : cases) {
      const auto n = static_cast<size_t>(shape.batch * shape.seq * shape.qkv_width());
      const auto table = static_cast<size_t>(shape.seq * shape.head_size / 2);
      const std::vector<float> angles = random_floats(table, -3.0f, 3.0f, ++seed);
      std::vector<float> cos(table), sin(table);
      for (size_t i = 0; i < table; ++i) {
        cos[i] = std::cos(angles[i]);
        sin[i] = std::sin(angles[i]);
      }
      const HostTensor qkv = random_tensor(type, n, -1.0f, 1.0f, ++seed);
      HostTensor ref_forward = qkv, ref_backward = qkv;
      cpu().rope->rope_forward(kCpuStream, ref_forward.data(), cos.data(), sin.data(), shape);
      cpu().rope->rope_backward(kCpuStream, ref_backward.data(), cos.data(), sin.data(), shape);

      DeviceCopy<float> device_cos(gpu, cos, offset), device_sin(gpu, sin, offset);
      DeviceTensor device_qkv(gpu, qkv, offset);
      const auto forward = [&] {
        gpu.device.rope->rope_forward(gpu.stream, device_qkv.get(), device_cos.get(), device_sin.get(), shape);
      };
      const auto backward = [&] {
        gpu.device.rope->rope_backward(gpu.stream, device_qkv.get(), device_cos.get(), device_sin.get(), shape);
      };
      struct Result {
        std::vector<float> forward, backward;
      };
      const auto run = [&] {
        device_qkv.write(qkv);
        forward();
        std::vector<float> rotated = device_qkv.read();
        device_qkv.write(qkv);
        backward();
        return Result{std::move(rotated), device_qkv.read()};
      };
      const Result first = first_run(run), second = second_run(run);
      const std::string name =
          fmt::format("rope {} B={} T={} H={} KV={} d={}{}", type_name(type), shape.batch, shape.seq, shape.heads,
                      shape.kv_heads, shape.head_size, offset != 0 ? " (unaligned)" : "");
      checker.compare(name + " forward", first.forward, ref_forward.floats(), kExact);
      checker.compare(name + " backward", first.backward, ref_backward.floats(), kExact);
      checker.check_deterministic(name + " forward", first.forward, second.forward);
      checker.check_deterministic(name + " backward", first.backward, second.backward);
      if (shape.seq == 37) {
        check_queued(gpu, checker, name + " forward", {.launches = 1}, forward);
        check_queued(gpu, checker, name + " backward", {.launches = 1}, backward);
      }
    }
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
  const GemmTypes types[] = {{kF32, kF32}, {kBf16, kF32}};
  test_gemm_cases(gpu, checker, cases, types, 800);
}

// A GEMM as a model's step runs it: transposes, shape, epilogue, and whether its C is a float
// gradient in bf16 runs too.
struct ModelGemm {
  bool transpose_a, transpose_b;
  GemmCase shape;
  Epilogue epilogue;
  int64_t ld_aux = 0;
  bool float_c = false;
};

// Each of `gemms` in each of `precisions`, its random inputs from `seed` on.
void run_model_gemms(const Gpu& gpu, Checker& checker, std::span<const ModelGemm> gemms,
                     std::span<const ElementType> precisions, uint64_t seed) {
  for (ElementType precision : precisions)
    for (const ModelGemm& model_gemm : gemms) {
      const GemmTypes types{precision, model_gemm.float_c ? kF32 : precision};
      Gemm gemm = gemm_of_case(model_gemm.shape, model_gemm.transpose_a, model_gemm.transpose_b);
      gemm.epilogue = model_gemm.epilogue;
      gemm.ld_aux = model_gemm.ld_aux;
      test_gemm(gpu, checker, types, model_gemm.shape, gemm, random_gemm_tensors(types, gemm, seed));
    }
}

// The benchmark MLP's hidden layer (batch 8192, 8192 wide) and GPT-2 124M's GEMMs (8192 rows, 768
// wide, the vocabulary padded to 50304), forward and backward, each in the types an f32 run and a
// bf16 run give it.
void test_model_gemms(const Gpu& gpu, Checker& checker) {
  constexpr int64_t kRows = 8192, kMlpWidth = 8192, kChannels = 768, kVocab = 50304;
  const ModelGemm gemms[] = {
      // MLP: z = x W^T + b; dW += dz^T x and db += the column sums of dz; dx = dz W.
      {false, true, {.m = kRows, .n = kMlpWidth, .k = kMlpWidth}, Epilogue::kBias},
      {true, false, {.m = kMlpWidth, .n = kMlpWidth, .k = kRows, .beta = 1.0f}, Epilogue::kBiasGradA, 0, true},
      {false, false, {.m = kRows, .n = kMlpWidth, .k = kMlpWidth}, Epilogue::kNone},
      // GPT-2's block: qkv, the attention's projection, the MLP's fc (GELU) and projection.
      {false, false, {.m = kRows, .n = 3 * kChannels, .k = kChannels}, Epilogue::kBias},
      {false, false, {.m = kRows, .n = kChannels, .k = kChannels}, Epilogue::kBias},
      {false, false, {.m = kRows, .n = 4 * kChannels, .k = kChannels}, Epilogue::kGeluBias, 4 * kChannels},
      {false, false, {.m = kRows, .n = kChannels, .k = 4 * kChannels}, Epilogue::kBias},
      // Its backward: the projection's weight and bias gradients, the GELU's gradient, the fc's.
      {true, false, {.m = 4 * kChannels, .n = kChannels, .k = kRows, .beta = 1.0f}, Epilogue::kBiasGradB, 0, true},
      {false, true, {.m = kRows, .n = 4 * kChannels, .k = kChannels}, Epilogue::kGeluGrad, 4 * kChannels},
      {true, false, {.m = kChannels, .n = 4 * kChannels, .k = kRows, .beta = 1.0f}, Epilogue::kBiasGradB, 0, true},
      // The tied language-model head: logits, the input's gradient, the embedding's gradient.
      {false, true, {.m = kRows, .n = kVocab, .k = kChannels}, Epilogue::kNone},
      {false, false, {.m = kRows, .n = kChannels, .k = kVocab}, Epilogue::kNone},
      {true, false, {.m = kVocab, .n = kChannels, .k = kRows, .beta = 1.0f}, Epilogue::kNone, 0, true},
  };
  run_model_gemms(gpu, checker, gemms, kElementTypes, 820);
}

// Llama 3.2 1B's GEMMs (8192 rows, 2048 wide, q, k and v 3072 together, gate and up 2 x 8192,
// the vocabulary of 128256), forward and backward, in the types a bf16 run gives them (the
// precision it is trained in).
void test_llama_gemms(const Gpu& gpu, Checker& checker) {
  constexpr int64_t kRows = 8192, kChannels = 2048, kQkv = 3072, kMlp = 8192, kVocab = 128256;
  const ModelGemm gemms[] = {
      // Forward, nn.Linear's x W^T: qkv, o, gate and up, down, the head.
      {false, true, {.m = kRows, .n = kQkv, .k = kChannels}, Epilogue::kNone},
      {false, true, {.m = kRows, .n = kChannels, .k = kChannels}, Epilogue::kNone},
      {false, true, {.m = kRows, .n = 2 * kMlp, .k = kChannels}, Epilogue::kNone},
      {false, true, {.m = kRows, .n = kChannels, .k = kMlp}, Epilogue::kNone},
      {false, true, {.m = kRows, .n = kVocab, .k = kChannels}, Epilogue::kNone},
      // Backward: each weight's gradient dY^T X into float, accumulating, and the input's dY W.
      {true, false, {.m = kChannels, .n = kMlp, .k = kRows, .beta = 1.0f}, Epilogue::kNone, 0, true},
      {false, false, {.m = kRows, .n = kMlp, .k = kChannels}, Epilogue::kNone},
      {true, false, {.m = 2 * kMlp, .n = kChannels, .k = kRows, .beta = 1.0f}, Epilogue::kNone, 0, true},
      {false, false, {.m = kRows, .n = kChannels, .k = 2 * kMlp}, Epilogue::kNone},
      {true, false, {.m = kQkv, .n = kChannels, .k = kRows, .beta = 1.0f}, Epilogue::kNone, 0, true},
      {false, false, {.m = kRows, .n = kChannels, .k = kQkv}, Epilogue::kNone},
      {true, false, {.m = kVocab, .n = kChannels, .k = kRows, .beta = 1.0f}, Epilogue::kNone, 0, true},
      {false, false, {.m = kRows, .n = kChannels, .k = kVocab}, Epilogue::kNone},
  };
  constexpr ElementType kBf16Only[] = {kBf16};
  run_model_gemms(gpu, checker, gemms, kBf16Only, 870);
}

struct TestGroup {
  const char* name;
  std::function<void(const Gpu&, Checker&)> run;
};

// A group that runs `test` over `cases`, its random inputs from `seed` on.
template <typename Case>
std::function<void(const Gpu&, Checker&)> over(void (*test)(const Gpu&, Checker&, std::span<const Case>, uint64_t),
                                               std::span<const Case> cases, uint64_t seed) {
  return [=](const Gpu& gpu, Checker& checker) { test(gpu, checker, cases, seed); };
}

// Which shapes a run takes: the default's, --large's (the benchmark MLP's and GPT-2 124M's) or
// --llama's (Llama 3.2 1B's).
enum class Shapes { kDefault, kLarge, kLlama };

// The groups of each run.
std::vector<TestGroup> test_groups(Shapes shapes) {
  if (shapes == Shapes::kLlama)
    return {{"gemm_model", test_llama_gemms},
            {"softmax_cross_entropy", over<LossCase>(test_softmax_cross_entropy, kLlamaLossCases, 1600)},
            // --large's last case: Llama 3.2 1B's.
            {"attention", over<AttentionCase>(test_attention, std::span(kLargeAttentionCases).last(1), 1610)},
            {"rmsnorm", over<LayernormCase>(test_rmsnorm, kLlamaRmsnormCases, 1620)},
            {"swiglu", over<SwiGluCase>(test_swiglu, kLlamaSwiGluCases, 1630)},
            {"rope", over<RopeCase>(test_rope, kLlamaRopeCases, 1640)},
            {"embedding", over<EmbeddingCase>(test_embedding, kLlamaEmbeddingCases, 1650)}};
  if (shapes == Shapes::kLarge)
    return {{"gemm", test_benchmark_gemms},
            {"gemm_model", test_model_gemms},
            {"activation_forward", over<ActivationCase>(test_activation_forward, kBenchmarkActivationCases, 850)},
            {"activation_backward", over<ActivationCase>(test_activation_backward, kBenchmarkActivationCases, 900)},
            {"softmax_cross_entropy", over<LossCase>(test_softmax_cross_entropy, kGpt2LossCases, 950)},
            {"optimizers", test_gpt2_optimizer},
            {"attention", over<AttentionCase>(test_attention, kLargeAttentionCases, 1050)},
            {"layernorm", over<LayernormCase>(test_layernorm, kGpt2LayernormCases, 1150)},
            {"embedding", over<EmbeddingCase>(test_embedding, kGpt2EmbeddingCases, 1250)}};
  return {{"memory", test_memory},
          {"convert", test_convert},
          {"gemm", test_gemms},
          {"gemm_epilogues", test_epilogues},
          {"activation_forward", over<ActivationCase>(test_activation_forward, kActivationCases, 300)},
          {"activation_backward", over<ActivationCase>(test_activation_backward, kActivationCases, 400)},
          {"add", test_add},
          {"softmax_cross_entropy", over<LossCase>(test_softmax_cross_entropy, kLossCases, 500)},
          {"optimizers", test_optimizers},
          {"sum_squares", test_sum_squares},
          {"attention", over<AttentionCase>(test_attention, kAttentionCases, 1000)},
          // From 1054: the inputs these cases had as the attention group's last.
          {"attention_1024", over<AttentionCase>(test_attention, kLongAttentionCases, 1054)},
          {"attention_gqa", over<AttentionCase>(test_attention, kGroupedQueryCases, 1060)},
          {"layernorm", over<LayernormCase>(test_layernorm, kLayernormCases, 1100)},
          {"embedding", over<EmbeddingCase>(test_embedding, kEmbeddingCases, 1200)},
          {"rmsnorm", over<LayernormCase>(test_rmsnorm, kRmsnormCases, 1300)},
          {"swiglu", over<SwiGluCase>(test_swiglu, kSwiGluCases, 1400)},
          {"rope", over<RopeCase>(test_rope, kRopeCases, 1500)}};
}

struct Options {
  Shapes shapes = Shapes::kDefault;
  std::string only;  // one group's name; all when empty
};

// Parses [--large | --llama] [--only GROUP] [--schedules FIRST,SECOND]; false on anything else.
bool parse_options(int argc, char** argv, Options& options) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--large") {
      options.shapes = Shapes::kLarge;
    } else if (arg == "--llama") {
      options.shapes = Shapes::kLlama;
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
    std::fprintf(stderr, "usage: %s [--large | --llama] [--only GROUP] [--schedules FIRST,SECOND]\n", argv[0]);
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
    std::printf("[INFO] device: %s\n", cuda->info.bind_local(0, 1).c_str());
  } catch (const trainctl::DeviceUnavailable& error) {
    std::printf("SKIP: %s\n", error.what());
    return 77;
  } catch (const std::exception& error) {
    std::printf("FAIL: binding to GPU 0: %s\n", error.what());
    return 1;
  }
  std::printf("[INFO] what each op queues: %s\n",
              cuda->info.activity() ? "counted by the device, and checked" : "not counted by this device");
  const Gpu gpu{*cuda, cuda->streams.create_stream()};

  Checker checker;
  bool found = options.only.empty();
  for (const TestGroup& group : test_groups(options.shapes)) {
    if (!options.only.empty() && options.only != group.name) continue;
    found = true;
    const auto start = std::chrono::steady_clock::now();
    try {
      group.run(gpu, checker);
    } catch (const std::exception& error) {
      checker.record(false, std::string(group.name) + ": exception: " + error.what());
    }
    std::printf("[INFO] %s: %.1f s\n", group.name,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  if (!found) checker.record(false, "--only " + options.only + ": no such group");
  cuda->streams.destroy_stream(gpu.stream);
  cuda->info.unbind();
  std::printf("%d checks, %d failed\n", checker.checks(), checker.failures());
  return checker.failures() == 0 && checker.checks() > 0 ? 0 : 1;
}
