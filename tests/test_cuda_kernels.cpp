// Tests for the CUDA device table (kernels/cuda/) against the CPU reference
// (kernels/cpu/ops_cpu.cpp): every op on random inputs from fixed seeds, on shapes that are not
// multiples of 8, 16 or 32 (1x1, 3x5x7, 129x257x63, ...), every transpose, and operands at odd
// float offsets, compared element by element as |cuda - ref| <= abs + rel * |ref| with the
// tolerance stated per op below; the worst element of each comparison is printed. Each op also
// runs twice on the same inputs and must give bitwise the same output. Without a usable GPU the
// program prints why and exits 77 (meson's SKIP); any failure exits 1.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "device.h"

namespace {

using trainctl::Activation;
using trainctl::DeviceOps;

struct Tolerance {
  double abs, rel;
};

// Tolerances, per op and dtype. Operands are in [-1, 1] unless said otherwise.
// Same IEEE operations in the same order, uncontracted (nvcc --fmad=false): bitwise equal.
constexpr Tolerance kExact{0.0, 0.0};
// fp32 GEMM, k <= 1031: both sum in fp32, in different orders (OpenBLAS's blocking, cuBLASLt's).
constexpr Tolerance kGemmFp32{1e-4, 1e-4};
// bf16 GEMM against the CPU gemm_bf16: the same rounded operands and exact products, summed in
// fp32 in different orders, on the GPU by tensor cores. Operands left unrounded on one side
// would differ by about 1e-2.
constexpr Tolerance kGemmBf16{5e-4, 5e-4};
// GELU, z in [-4, 4]: erff and expf are not correctly rounded on either side (CUDA's within 2
// ulp, glibc's vector versions within 4), so 1 + erf differs by up to about 6 ulp of 1.
constexpr Tolerance kGelu{2e-6, 2e-6};
// softmax cross-entropy gradient: exp in double on both sides, within an ulp of double, rounded
// to float once.
constexpr Tolerance kSoftmaxGrad{1e-12, 1e-6};
// Sums in double in different orders: the loss sum and sum_squares.
constexpr Tolerance kDoubleSum{1e-10, 1e-11};
// grad_bias, a float sum over rows: the CPU adds row by row, CUDA in blocks of rows, so the
// rounding differs by up to about an ulp of the running sum per row.
Tolerance grad_bias_tolerance(int64_t rows) { return {2e-7 * static_cast<double>(rows) + 1e-6, 1e-6}; }

const DeviceOps& cpu() { return trainctl::cpu_device(); }

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
  DeviceCopy(const DeviceOps& cuda, const std::vector<T>& host, size_t offset = 0)
      : cuda_(cuda),
        size_(host.size()),
        base_(static_cast<T*>(cuda.alloc((offset + host.size()) * sizeof(T)))),
        data_(base_ + offset) {
    write(host);
  }
  DeviceCopy(const DeviceCopy&) = delete;
  DeviceCopy& operator=(const DeviceCopy&) = delete;
  ~DeviceCopy() { cuda_.release(base_); }

  T* get() const { return data_; }
  void write(const std::vector<T>& host) { cuda_.upload(data_, host.data(), size_ * sizeof(T)); }
  std::vector<T> read() const {
    std::vector<T> host(size_);
    cuda_.download(host.data(), data_, size_ * sizeof(T));
    return host;
  }

 private:
  const DeviceOps& cuda_;
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
      const double ratio = error == 0.0 ? 0.0 : allowed == 0.0 ? std::numeric_limits<double>::infinity() : error / allowed;
      if (error > allowed) ++over;
      if (ratio > worst_ratio) {
        worst_ratio = ratio;
        worst_error = error;
        worst = i;
      }
    }
    const int digits = std::is_floating_point_v<T> ? std::numeric_limits<T>::max_digits10 : 20;
    char line[512];
    std::snprintf(line, sizeof(line),
                  "%s: worst [%zu] cuda=%.*g ref=%.*g |err|=%.3g (tolerance %.3g + %.3g*|ref|), %zu of %zu over",
                  what.c_str(), worst, digits, static_cast<double>(cuda[worst]), digits,
                  static_cast<double>(ref[worst]), worst_error, tolerance.abs, tolerance.rel, over, ref.size());
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

std::string shape_name(int64_t a, int64_t b) { return std::to_string(a) + "x" + std::to_string(b); }
std::string shape_name(int64_t a, int64_t b, int64_t c) { return shape_name(a, b) + "x" + std::to_string(c); }

void test_memory(const DeviceOps& cuda, Checker& checker) {
  const std::vector<float> values = random_floats(1000, -1.0f, 1.0f, 1);
  DeviceCopy<float> device(cuda, values, 3);
  checker.compare("upload/download 1000 floats", device.read(), values, kExact);

  // Downloads into page-locked memory, as checkpoints do.
  std::vector<float> pinned(values.size(), 0.0f);
  cuda.pin_host(pinned.data(), pinned.size() * sizeof(float));
  cuda.download(pinned.data(), device.get(), pinned.size() * sizeof(float));
  cuda.unpin_host(pinned.data());
  checker.compare("download into pinned memory", pinned, values, kExact);

  cuda.fill_zero(device.get(), static_cast<int64_t>(values.size()));
  checker.compare("fill_zero", device.read(), std::vector<float>(values.size(), 0.0f), kExact);
}

struct GemmCase {
  int64_t m, n, k;
  float alpha, beta;
  size_t offset;  // of a, b and c from their allocations, in floats
};

void test_gemm(const DeviceOps& cuda, Checker& checker, bool bf16, const GemmCase& shape, bool transpose_a,
               bool transpose_b, const std::vector<float>& a, const std::vector<float>& b,
               const std::vector<float>& c_init) {
  const auto gemm_of = [bf16](const DeviceOps& ops) { return bf16 ? ops.gemm_bf16 : ops.gemm; };
  std::vector<float> ref = c_init;
  gemm_of(cpu())(transpose_a, transpose_b, shape.m, shape.n, shape.k, shape.alpha, a.data(), b.data(), shape.beta,
                 ref.data());
  DeviceCopy<float> device_a(cuda, a, shape.offset), device_b(cuda, b, shape.offset),
      device_c(cuda, c_init, shape.offset);
  const auto run = [&] {
    device_c.write(c_init);
    gemm_of(cuda)(transpose_a, transpose_b, shape.m, shape.n, shape.k, shape.alpha, device_a.get(), device_b.get(),
                  shape.beta, device_c.get());
    return device_c.read();
  };
  const std::vector<float> first = run();
  char name[160];
  std::snprintf(name, sizeof(name), "%s %c%c %s alpha=%g beta=%g%s", bf16 ? "gemm_bf16" : "gemm",
                transpose_a ? 'T' : 'N', transpose_b ? 'T' : 'N', shape_name(shape.m, shape.n, shape.k).c_str(),
                static_cast<double>(shape.alpha), static_cast<double>(shape.beta),
                shape.offset != 0 ? " (operands at odd offsets)" : "");
  checker.compare(name, first, ref, bf16 ? kGemmBf16 : kGemmFp32);
  checker.check_deterministic(name, first, run());
}

void test_gemms(const DeviceOps& cuda, Checker& checker) {
  const GemmCase cases[] = {
      {1, 1, 1, 1.0f, 0.0f, 0},          {3, 5, 7, 1.0f, 0.0f, 0},         {3, 5, 7, 0.75f, -0.5f, 0},
      {129, 257, 63, 1.0f, 0.0f, 0},     {129, 257, 63, 0.75f, -0.5f, 0},  {129, 257, 63, 1.0f, 1.0f, 1},
      {64, 128, 256, 1.0f, 0.0f, 0},     {257, 129, 1031, 1.0f, 1.0f, 0},  {1000, 10, 33, 1.0f, 0.0f, 3},
  };
  uint64_t seed = 100;
  for (bool bf16 : {false, true})
    for (const GemmCase& shape : cases)
      for (bool transpose_a : {false, true})
        for (bool transpose_b : {false, true}) {
          const auto a = random_floats(static_cast<size_t>(shape.m * shape.k), -1.0f, 1.0f, ++seed);
          const auto b = random_floats(static_cast<size_t>(shape.k * shape.n), -1.0f, 1.0f, ++seed);
          const auto c = random_floats(static_cast<size_t>(shape.m * shape.n), -1.0f, 1.0f, ++seed);
          test_gemm(cuda, checker, bf16, shape, transpose_a, transpose_b, a, b, c);
        }

  // Operands halfway between two bf16 values (1 + odd multiples of 2^-8): rounding them toward
  // even, as the CPU does, or any other way shows as about 4e-3 relative.
  const GemmCase ties{5, 6, 7, 1.0f, 0.0f, 0};
  std::mt19937_64 engine(7);
  auto halfway = [&engine](size_t n) {
    std::vector<float> values(n);
    for (float& value : values) {
      const float sign = engine() % 2 != 0 ? -1.0f : 1.0f;
      value = sign * (1.0f + static_cast<float>(2 * (engine() % 64) + 1) / 256.0f);
    }
    return values;
  };
  test_gemm(cuda, checker, true, ties, false, false, halfway(5 * 7), halfway(7 * 6), std::vector<float>(5 * 6, 0.0f));
}

// z in [-4, 4] with every 7th element exactly 0 (GELU's derivative takes its own branch there).
std::vector<float> pre_activations(size_t n, uint64_t seed) {
  std::vector<float> z = random_floats(n, -4.0f, 4.0f, seed);
  for (size_t i = 0; i < n; i += 7) z[i] = 0.0f;
  return z;
}

const int64_t kActivationShapes[][2] = {{1, 1}, {3, 7}, {129, 257}, {4099, 70}, {20000, 10}};

void test_bias_act_forward(const DeviceOps& cuda, Checker& checker) {
  uint64_t seed = 300;
  for (const auto& shape : kActivationShapes)
    for (Activation act : {Activation::kNone, Activation::kRelu, Activation::kGelu}) {
      const int64_t rows = shape[0], cols = shape[1];
      const auto n = static_cast<size_t>(rows * cols);
      const std::vector<float> z_init = pre_activations(n, ++seed);
      const std::vector<float> bias = random_floats(static_cast<size_t>(cols), -1.0f, 1.0f, ++seed);
      std::vector<float> ref_z = z_init, ref_out(n);
      cpu().bias_act_forward(ref_z.data(), bias.data(), ref_out.data(), rows, cols, act);

      DeviceCopy<float> z(cuda, z_init), device_bias(cuda, bias), out(cuda, std::vector<float>(n));
      const auto run = [&] {
        z.write(z_init);
        cuda.bias_act_forward(z.get(), device_bias.get(), out.get(), rows, cols, act);
        return out.read();
      };
      const std::vector<float> first = run();
      const std::string name = std::string("bias_act_forward ") + activation_name(act) + " " + shape_name(rows, cols);
      checker.compare(name + " z", z.read(), ref_z, kExact);
      checker.compare(name + " out", first, ref_out, act == Activation::kGelu ? kGelu : kExact);
      checker.check_deterministic(name, first, run());
    }
}

void test_bias_act_backward(const DeviceOps& cuda, Checker& checker) {
  uint64_t seed = 400;
  for (const auto& shape : kActivationShapes)
    for (Activation act : {Activation::kNone, Activation::kRelu, Activation::kGelu})
      for (bool in_place : {false, true}) {
        const int64_t rows = shape[0], cols = shape[1];
        const auto n = static_cast<size_t>(rows * cols);
        const std::vector<float> grad_out = random_floats(n, -1.0f, 1.0f, ++seed);
        std::vector<float> z = pre_activations(n, ++seed), out(n);
        cpu().bias_act_forward(z.data(), std::vector<float>(static_cast<size_t>(cols), 0.0f).data(), out.data(), rows,
                               cols, act);
        const std::vector<float> grad_bias_init = random_floats(static_cast<size_t>(cols), -1.0f, 1.0f, ++seed);
        std::vector<float> ref_grad_z(n), ref_grad_bias = grad_bias_init;
        cpu().bias_act_backward(grad_out.data(), z.data(), out.data(), ref_grad_z.data(), ref_grad_bias.data(), rows,
                                cols, act);

        DeviceCopy<float> device_grad_out(cuda, grad_out), device_z(cuda, z), device_out(cuda, out),
            separate_grad_z(cuda, std::vector<float>(n)), grad_bias(cuda, grad_bias_init);
        // In place, as the model calls it: grad_z is grad_out.
        DeviceCopy<float>& grad_z = in_place ? device_grad_out : separate_grad_z;
        struct Result {
          std::vector<float> grad_z, grad_bias;
        };
        const auto run = [&] {
          device_grad_out.write(grad_out);
          grad_bias.write(grad_bias_init);
          cuda.bias_act_backward(device_grad_out.get(), device_z.get(), device_out.get(), grad_z.get(),
                                 grad_bias.get(), rows, cols, act);
          return Result{grad_z.read(), grad_bias.read()};
        };
        const Result first = run(), second = run();
        const std::string name = std::string("bias_act_backward ") + activation_name(act) + " " +
                                 shape_name(rows, cols) + (in_place ? " in place" : "");
        checker.compare(name + " grad_z", first.grad_z, ref_grad_z, act == Activation::kGelu ? kGelu : kExact);
        checker.compare(name + " grad_bias", first.grad_bias, ref_grad_bias, grad_bias_tolerance(rows));
        checker.check_deterministic(name + " grad_z", first.grad_z, second.grad_z);
        checker.check_deterministic(name + " grad_bias", first.grad_bias, second.grad_bias);
      }
}

void test_softmax_cross_entropy(const DeviceOps& cuda, Checker& checker) {
  struct Case {
    int64_t rows, classes;
    bool integer_logits;  // many ties for the argmax, which goes to the first
  };
  const Case cases[] = {{1, 1, false},     {3, 5, false},     {129, 10, false}, {129, 10, true},
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
      cpu().softmax_cross_entropy(logits.data(), labels.data(), with_gradient ? ref_grad.data() : nullptr, shape.rows,
                                  shape.classes, grad_scale, &ref_loss, &ref_correct);

      DeviceCopy<float> device_logits(cuda, logits), grad(cuda, std::vector<float>(n, 0.0f));
      DeviceCopy<int32_t> device_labels(cuda, labels);
      struct Result {
        double loss;
        int64_t correct;
        std::vector<float> grad;
      };
      const auto run = [&] {
        Result result{0.0, 0, {}};
        cuda.softmax_cross_entropy(device_logits.get(), device_labels.get(), with_gradient ? grad.get() : nullptr,
                                   shape.rows, shape.classes, grad_scale, &result.loss, &result.correct);
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
      checker.check_deterministic(name + " loss_sum", std::vector<double>{first.loss}, std::vector<double>{second.loss});
      checker.check_deterministic(name + " correct", std::vector<int64_t>{first.correct},
                                  std::vector<int64_t>{second.correct});
      checker.check_deterministic(name + " grad_logits", first.grad, second.grad);
    }
}

const int64_t kVectorSizes[] = {1, 1000, 100003};

// Runs `steps` optimizer steps on the CPU and on CUDA from the same state; the gradients of step s
// are the same on both. `step(ops, state pointers, gradient, s)` makes one step; state[0] is the
// parameter vector.
void test_optimizer(const DeviceOps& cuda, Checker& checker, const std::string& name, int state_vectors, int steps,
                    const std::function<void(const DeviceOps&, const std::vector<float*>&, const float*, int64_t,
                                             int)>& step) {
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
    for (int s = 0; s < steps; ++s) step(cpu(), ref_pointers, gradients[static_cast<size_t>(s)].data(), n, s + 1);

    std::vector<std::unique_ptr<DeviceCopy<float>>> state;
    std::vector<float*> state_pointers;
    for (const auto& vector : initial) {
      state.push_back(std::make_unique<DeviceCopy<float>>(cuda, vector));
      state_pointers.push_back(state.back()->get());
    }
    DeviceCopy<float> gradient(cuda, gradients[0]);
    const auto run = [&] {
      for (size_t v = 0; v < state.size(); ++v) state[v]->write(initial[v]);
      for (int s = 0; s < steps; ++s) {
        gradient.write(gradients[static_cast<size_t>(s)]);
        step(cuda, state_pointers, gradient.get(), n, s + 1);
      }
      std::vector<std::vector<float>> result;
      for (const auto& vector : state) result.push_back(vector->read());
      return result;
    };
    const auto first = run(), second = run();
    for (size_t v = 0; v < state.size(); ++v) {
      const std::string what = name + " n=" + std::to_string(n) + " state " + std::to_string(v) +
                               " after " + std::to_string(steps) + " steps";
      checker.compare(what, first[v], ref[v], kExact);
      checker.check_deterministic(what, first[v], second[v]);
    }
  }
}

void test_optimizers(const DeviceOps& cuda, Checker& checker) {
  test_optimizer(cuda, checker, "sgd_step (state: param, momentum_buffer)", 2, 3,
                 [](const DeviceOps& ops, const std::vector<float*>& state, const float* grad, int64_t n, int) {
                   ops.sgd_step(state[0], grad, state[1], n, 0.1, 0.9, 1e-4);
                 });
  test_optimizer(cuda, checker, "sgd_step without momentum or decay", 2, 2,
                 [](const DeviceOps& ops, const std::vector<float*>& state, const float* grad, int64_t n, int) {
                   ops.sgd_step(state[0], grad, state[1], n, 0.05, 0.0, 0.0);
                 });
  test_optimizer(cuda, checker, "adamw_step (state: param, exp_avg, exp_avg_sq)", 3, 3,
                 [](const DeviceOps& ops, const std::vector<float*>& state, const float* grad, int64_t n, int step) {
                   ops.adamw_step(state[0], grad, state[1], state[2], n, 1e-3, 0.9, 0.999, 1e-8, 0.01, step);
                 });
}

void test_sum_squares_and_scale(const DeviceOps& cuda, Checker& checker) {
  uint64_t seed = 700;
  for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{1000}, int64_t{100003}, int64_t{3000017}}) {
    const std::vector<float> x = random_floats(static_cast<size_t>(n), -1.0f, 1.0f, ++seed);
    DeviceCopy<float> device_x(cuda, x);
    const double first = cuda.sum_squares(device_x.get(), n), second = cuda.sum_squares(device_x.get(), n);
    const std::string name = "sum_squares n=" + std::to_string(n);
    checker.compare(name, first, cpu().sum_squares(x.data(), n), kDoubleSum);
    checker.check_deterministic(name, std::vector<double>{first}, std::vector<double>{second});
  }
  for (int64_t n : kVectorSizes) {
    const std::vector<float> x = random_floats(static_cast<size_t>(n), -1.0f, 1.0f, ++seed);
    std::vector<float> ref = x;
    cpu().scale(ref.data(), n, 0.37f);
    DeviceCopy<float> device_x(cuda, x);
    cuda.scale(device_x.get(), n, 0.37f);
    checker.compare("scale n=" + std::to_string(n), device_x.read(), ref, kExact);
  }
}

}  // namespace

int main() {
  const DeviceOps* cuda = trainctl::find_device("cuda");
  if (cuda == nullptr) {
    std::puts("FAIL: this build has no CUDA device table, though this test is built only with it");
    return 1;
  }
  try {
    cuda->bind_local(0, 1);
  } catch (const trainctl::DeviceUnavailable& error) {
    std::printf("SKIP: %s\n", error.what());
    return 77;
  } catch (const std::exception& error) {
    std::printf("FAIL: binding to GPU 0: %s\n", error.what());
    return 1;
  }

  Checker checker;
  const std::function<void(const DeviceOps&, Checker&)> groups[] = {
      test_memory, test_gemms, test_bias_act_forward, test_bias_act_backward, test_softmax_cross_entropy,
      test_optimizers, test_sum_squares_and_scale};
  for (const auto& group : groups) {
    try {
      group(*cuda, checker);
    } catch (const std::exception& error) {
      checker.record(false, std::string("exception: ") + error.what());
    }
  }
  std::printf("%d checks, %d failed\n", checker.checks(), checker.failures());
  return checker.failures() == 0 && checker.checks() > 0 ? 0 : 1;
}
