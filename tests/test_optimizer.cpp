// Tests for the optimizers and the learning-rate schedule (runtime/optimizer.cpp, on the CPU
// kernels): SGD with momentum and AdamW against values worked out by hand for a 2-element
// parameter vector over 2-3 steps, PyTorch's semantics (SGD's first momentum buffer is the
// gradient; AdamW's weight decay is decoupled, p *= 1 - lr*wd, before the bias-corrected
// update), the state names a checkpoint stores, resuming from saved state, parameter groups in
// one step, clipping by the norm's squares left on the device, the bf16 compute copy written in
// the same step, and the exact learning rate of warmup, constant, linear and cosine schedules.
#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "device.h"
#include "optimizer.h"

using trainctl::Optimizer;
using trainctl::OptimizerKind;
using trainctl::Schedule;
using trainctl::TrainSpec;

namespace {

using Pair = std::array<float, 2>;

const trainctl::Device& cpu() { return trainctl::cpu_device(); }

TrainSpec sgd_spec(double momentum, double weight_decay) {
  TrainSpec spec;
  spec.optimizer = OptimizerKind::kSgd;
  spec.momentum = momentum;
  spec.weight_decay = weight_decay;
  return spec;
}

TrainSpec adamw_spec(double weight_decay) {
  TrainSpec spec;
  spec.optimizer = OptimizerKind::kAdamW;
  spec.beta1 = 0.9;
  spec.beta2 = 0.999;
  spec.eps = 1e-8;
  spec.weight_decay = weight_decay;
  return spec;
}

// One tensor of two parameters that takes weight decay.
const std::vector<trainctl::ParameterSlice> kPairLayout{{"p", {2}, 0, 2, true}};

// The optimizer works on device pointers; on the CPU table those are host memory from alloc.
struct DevicePair {
  trainctl::DeviceBuffer<float> buffer{cpu(), 2};
  explicit DevicePair(Pair values) { set(values); }
  void set(Pair values) { buffer.upload(values.data(), 2); }
  Pair get() const { return read(buffer); }
  static Pair read(const trainctl::DeviceBuffer<float>& device) {
    Pair values{};
    device.download(values.data(), 2);
    return values;
  }
};

// |actual - expected| <= 1e-6 * |expected|, element by element.
void check_close(const Pair& actual, const std::array<double, 2>& expected) {
  for (size_t i = 0; i < 2; ++i) {
    CAPTURE(i);
    CHECK(static_cast<double>(actual[i]) == doctest::Approx(expected[i]).epsilon(1e-6).scale(0.0));
  }
}

// Applies one step with gradient `gradient` (unclipped, no compute copy) and returns the
// parameters after it.
Pair step(Optimizer& optimizer, DevicePair& parameters, Pair gradient, double lr) {
  DevicePair device_gradient(gradient);
  optimizer.step(parameters.buffer.get() + optimizer.begin(), device_gradient.buffer.get() + optimizer.begin(), {},
                 nullptr, 0, lr);
  return parameters.get();
}

Pair state_of(Optimizer& optimizer, const std::string& name) {
  for (auto& [state_name, buffer] : optimizer.state())
    if (state_name == name) return DevicePair::read(*buffer);
  FAIL("no optimizer state named ", name);
  return {};
}

std::vector<std::string> state_names(Optimizer& optimizer) {
  std::vector<std::string> names;
  for (auto& entry : optimizer.state()) names.push_back(entry.first);
  return names;
}

TrainSpec schedule_spec(Schedule schedule, int64_t steps, int64_t warmup_steps) {
  TrainSpec spec;
  spec.lr = 0.1;
  spec.steps = steps;
  spec.warmup_steps = warmup_steps;
  spec.schedule = schedule;
  return spec;
}

void check_lr(const TrainSpec& spec, int64_t step, double expected) {
  CAPTURE(step);
  CHECK(trainctl::learning_rate(spec, step) == doctest::Approx(expected).epsilon(1e-12).scale(0.0));
}

}  // namespace

TEST_CASE("SGD with momentum and weight decay matches three steps worked by hand") {
  // lr 0.1, momentum 0.9, weight_decay 0.01, p0 = [1, -2]; each step: g += wd*p;
  // buf = 0.9*buf + g; p -= lr*buf.
  const TrainSpec spec = sgd_spec(0.9, 0.01);
  Optimizer optimizer(spec, cpu(), trainctl::Stream{}, kPairLayout, 0, 2);
  DevicePair parameters({1.0f, -2.0f});

  // Step 1, g = [0.5, -1]: g = [0.5 + 0.01, -1 - 0.02] = [0.51, -1.02]; buf = g (PyTorch's first
  // step); p = [1 - 0.051, -2 + 0.102].
  check_close(step(optimizer, parameters, {0.5f, -1.0f}, 0.1), {0.949, -1.898});
  check_close(state_of(optimizer, "momentum_buffer"), {0.51, -1.02});

  // Step 2, g = [0.1, 0.2]: g = [0.1 + 0.00949, 0.2 - 0.01898] = [0.10949, 0.18102];
  // buf = [0.459 + 0.10949, -0.918 + 0.18102] = [0.56849, -0.73698];
  // p = [0.949 - 0.056849, -1.898 + 0.073698].
  check_close(step(optimizer, parameters, {0.1f, 0.2f}, 0.1), {0.892151, -1.824302});
  check_close(state_of(optimizer, "momentum_buffer"), {0.56849, -0.73698});

  // Step 3, g = [-0.3, 0.4]: g = [-0.3 + 0.00892151, 0.4 - 0.01824302] = [-0.29107849, 0.38175698];
  // buf = [0.511641 - 0.29107849, -0.663282 + 0.38175698] = [0.22056251, -0.28152502];
  // p = [0.892151 - 0.022056251, -1.824302 + 0.028152502].
  check_close(step(optimizer, parameters, {-0.3f, 0.4f}, 0.1), {0.870094749, -1.796149498});
  CHECK(optimizer.step_count() == 3);
}

TEST_CASE("SGD without momentum is plain gradient descent with L2 weight decay") {
  // p = [2, 4], g = [1, 1], wd 0.5, lr 0.1: g = [1 + 1, 1 + 2] = [2, 3]; p = [2 - 0.2, 4 - 0.3].
  const TrainSpec spec = sgd_spec(0.0, 0.5);
  Optimizer optimizer(spec, cpu(), trainctl::Stream{}, kPairLayout, 0, 2);
  DevicePair parameters({2.0f, 4.0f});
  check_close(step(optimizer, parameters, {1.0f, 1.0f}, 0.1), {1.8, 3.7});
  // Again from [1.8, 3.7]: g = [1 + 0.9, 1 + 1.85] = [1.9, 2.85]; p = [1.8 - 0.19, 3.7 - 0.285].
  check_close(step(optimizer, parameters, {1.0f, 1.0f}, 0.1), {1.61, 3.415});
}

TEST_CASE("AdamW with weight decay matches three steps worked by hand") {
  // lr 0.1, betas (0.9, 0.999), eps 1e-8, weight_decay 0.1, p0 = [1, -2]; each step t:
  // p *= 1 - lr*wd = 0.99; m = 0.9 m + 0.1 g; v = 0.999 v + 0.001 g^2;
  // p -= lr / (1 - 0.9^t) * m / (sqrt(v) / sqrt(1 - 0.999^t) + eps).
  const TrainSpec spec = adamw_spec(0.1);
  Optimizer optimizer(spec, cpu(), trainctl::Stream{}, kPairLayout, 0, 2);
  DevicePair parameters({1.0f, -2.0f});

  // Step 1, g = [0.5, -1]: p = [0.99, -1.98]; m = [0.05, -0.1]; v = [0.00025, 0.001];
  // lr/0.1 = 1; sqrt(v/0.001) = [0.5, 1]; update = [0.1, -0.1] (lr * sign(g), as Adam's first
  // step is); p = [0.99 - 0.1, -1.98 + 0.1].
  check_close(step(optimizer, parameters, {0.5f, -1.0f}, 0.1), {0.89, -1.88});
  check_close(state_of(optimizer, "exp_avg"), {0.05, -0.1});
  // 1 - beta2 is computed in double, as PyTorch does with its Python floats, so v = 0.001 * g^2.
  check_close(state_of(optimizer, "exp_avg_sq"), {0.00025, 0.001});

  // Step 2, g = [0.1, 0.2]: p = 0.99 * [0.89, -1.88] = [0.8811, -1.8612];
  // m = [0.045 + 0.01, -0.09 + 0.02] = [0.055, -0.07];
  // v = [0.00024975 + 0.00001, 0.000999 + 0.00004] = [0.00025975, 0.001039];
  // 1 - 0.9^2 = 0.19, 1 - 0.999^2 = 0.001999; sqrt(v/0.001999) = [0.3604719, 0.7209437];
  // update = (0.1/0.19) * m / that = [0.0803041, -0.0511026]; p = [0.8811 - 0.0803041, -1.8612 + 0.0511026].
  check_close(step(optimizer, parameters, {0.1f, 0.2f}, 0.1), {0.8007959064, -1.8100973940});
  check_close(state_of(optimizer, "exp_avg"), {0.055, -0.07});
  check_close(state_of(optimizer, "exp_avg_sq"), {0.00025975, 0.001039});

  // Step 3, g = [-0.3, 0.4]: m = [0.0495 - 0.03, -0.063 + 0.04] = [0.0195, -0.023];
  // v = [0.00025949025 + 0.00009, 0.001037961 + 0.00016] = [0.00034949025, 0.001197961];
  // 1 - 0.9^3 = 0.271, 1 - 0.999^3 = 0.002997001; p = 0.99 * p - (0.1/0.271) * m / sqrt(v/0.002997001).
  check_close(step(optimizer, parameters, {-0.3f, 0.4f}, 0.1), {0.7717166527, -1.7785724603});
  CHECK(optimizer.step_count() == 3);
}

TEST_CASE("AdamW weight decay is decoupled: a zero gradient only shrinks p by 1 - lr*wd") {
  // With g = 0 the moments stay 0 and the Adam update is 0 / eps = 0; L2 decay inside the
  // gradient (Adam, not AdamW) would move p by lr * sign(p) on the first step instead.
  const TrainSpec spec = adamw_spec(0.5);
  Optimizer optimizer(spec, cpu(), trainctl::Stream{}, kPairLayout, 0, 2);
  DevicePair parameters({1.0f, -3.0f});
  check_close(step(optimizer, parameters, {0.0f, 0.0f}, 0.2), {0.9, -2.7});  // p * (1 - 0.2*0.5)
  check_close(step(optimizer, parameters, {0.0f, 0.0f}, 0.2), {0.81, -2.43});
  CHECK(state_of(optimizer, "exp_avg") == Pair{0.0f, 0.0f});
  CHECK(state_of(optimizer, "exp_avg_sq") == Pair{0.0f, 0.0f});
}

TEST_CASE("the optimizer names its state as torch.optim does") {
  const TrainSpec sgd = sgd_spec(0.9, 0.0);
  const TrainSpec adamw = adamw_spec(0.0);
  Optimizer sgd_optimizer(sgd, cpu(), trainctl::Stream{}, kPairLayout, 0, 2);
  Optimizer adamw_optimizer(adamw, cpu(), trainctl::Stream{}, kPairLayout, 0, 2);
  CHECK(std::string(sgd_optimizer.name()) == "sgd");
  CHECK(std::string(adamw_optimizer.name()) == "adamw");
  CHECK(state_names(sgd_optimizer) == std::vector<std::string>{"momentum_buffer"});
  CHECK(state_names(adamw_optimizer) == std::vector<std::string>{"exp_avg", "exp_avg_sq"});
  CHECK(state_of(adamw_optimizer, "exp_avg") == Pair{0.0f, 0.0f});  // state starts at zero
  CHECK(adamw_optimizer.step_count() == 0);
}

TEST_CASE("AdamW restored from saved state and step count continues bit for bit") {
  const TrainSpec spec = adamw_spec(0.01);
  const Pair g1{0.5f, -1.0f}, g2{0.1f, 0.2f};
  Optimizer uninterrupted(spec, cpu(), trainctl::Stream{}, kPairLayout, 0, 2);
  DevicePair parameters({1.0f, -2.0f});
  step(uninterrupted, parameters, g1, 0.05);

  // A new optimizer given what a checkpoint after step 1 holds: the moments and the step count.
  Optimizer resumed(spec, cpu(), trainctl::Stream{}, kPairLayout, 0, 2);
  for (auto& [name, buffer] : resumed.state()) {
    const Pair saved = state_of(uninterrupted, name);
    buffer->upload(saved.data(), 2);
  }
  resumed.set_step_count(uninterrupted.step_count());
  DevicePair resumed_parameters(parameters.get());

  const Pair expected = step(uninterrupted, parameters, g2, 0.05);
  CHECK(step(resumed, resumed_parameters, g2, 0.05) == expected);
  CHECK(resumed.step_count() == 2);
}

TEST_CASE("AdamW's second parameter group takes no weight decay") {
  // Two tensors of one parameter each: "w" decays, "b" (1-D, as GPT-2 practice has it) does not.
  // With equal gradients, b moves as a parameter of an optimizer without weight decay would.
  const std::vector<trainctl::ParameterSlice> layout{{"w", {1}, 0, 1, true}, {"b", {1}, 1, 1, false}};
  Optimizer grouped(adamw_spec(0.5), cpu(), trainctl::Stream{}, layout, 0, 2);
  Optimizer no_decay(adamw_spec(0.0), cpu(), trainctl::Stream{}, kPairLayout, 0, 2);
  Optimizer all_decay(adamw_spec(0.5), cpu(), trainctl::Stream{}, kPairLayout, 0, 2);
  DevicePair grouped_parameters({1.0f, 1.0f}), no_decay_parameters({1.0f, 1.0f}), all_decay_parameters({1.0f, 1.0f});
  for (int i = 0; i < 3; ++i) {
    const Pair grouped_after = step(grouped, grouped_parameters, {0.25f, 0.25f}, 0.1);
    const Pair without = step(no_decay, no_decay_parameters, {0.25f, 0.25f}, 0.1);
    const Pair with = step(all_decay, all_decay_parameters, {0.25f, 0.25f}, 0.1);
    CHECK(grouped_after[0] == with[0]);
    CHECK(grouped_after[1] == without[1]);
    CHECK(grouped_after[0] != grouped_after[1]);
  }
}

TEST_CASE("clipping scales the gradient by max_norm / (norm + 1e-6) when that is below 1, from shard squares") {
  // The gradient [3, 4] has norm 5, given as the squares of two shards (9 and 16).
  TrainSpec spec = sgd_spec(0.0, 0.0);
  spec.grad_clip = 1.0;
  Optimizer clipped(spec, cpu(), trainctl::Stream{}, kPairLayout, 0, 2);
  DevicePair parameters({0.0f, 0.0f}), gradient({3.0f, 4.0f});
  trainctl::DeviceBuffer<double> squares(cpu(), 2);
  const std::array<double, 2> shard_squares{9.0, 16.0};
  squares.upload(shard_squares.data(), 2);
  clipped.step(parameters.buffer.get(), gradient.buffer.get(), {}, squares.get(), 2, 1.0);
  const auto factor = static_cast<float>(1.0 / (5.0 + 1e-6));
  CHECK(parameters.get() == Pair{-(3.0f * factor), -(4.0f * factor)});
  // Below max_norm nothing changes.
  spec.grad_clip = 10.0;
  Optimizer unclipped(spec, cpu(), trainctl::Stream{}, kPairLayout, 0, 2);
  parameters.set({0.0f, 0.0f});
  unclipped.step(parameters.buffer.get(), gradient.buffer.get(), {}, squares.get(), 2, 1.0);
  CHECK(parameters.get() == Pair{-3.0f, -4.0f});
}

TEST_CASE("a step writes the bf16 compute copy of what it steps, and leaves what follows the last group") {
  // Three elements: "w" [2] and then one that no tensor names (the padding after a tensor).
  const std::vector<trainctl::ParameterSlice> layout{{"w", {2}, 0, 2, true}};
  Optimizer optimizer(adamw_spec(0.1), cpu(), trainctl::Stream{}, layout, 0, 3);
  trainctl::DeviceBuffer<float> parameters(cpu(), 3), gradient(cpu(), 3);
  const std::array<float, 3> values{1.0f, -2.0f, 7.0f}, gradients{0.5f, 0.25f, 1.0f};
  parameters.upload(values.data(), 3);
  gradient.upload(gradients.data(), 3);
  std::array<trainctl::Bf16, 3> copy{};
  copy[2].bits = 0x1234;
  optimizer.step(parameters.get(), gradient.get(), copy.data(), nullptr, 0, 0.1);
  std::array<float, 3> after{};
  parameters.download(after.data(), 3);
  CHECK(after[2] == 7.0f);
  for (size_t i = 0; i < 2; ++i) CHECK(copy[i].bits == trainctl::to_bf16(after[i]).bits);
  CHECK(copy[2].bits == 0x1234);
}

TEST_CASE("optimizers over two shards step exactly the values one over the whole buffer does (ZeRO-1)") {
  // The shard boundary splits the decaying "w" from the non-decaying "b"; each shard optimizer
  // holds the state of its element alone.
  const std::vector<trainctl::ParameterSlice> layout{{"w", {1}, 0, 1, true}, {"b", {1}, 1, 1, false}};
  Optimizer whole(adamw_spec(0.5), cpu(), trainctl::Stream{}, layout, 0, 2);
  Optimizer first(adamw_spec(0.5), cpu(), trainctl::Stream{}, layout, 0, 1);
  Optimizer second(adamw_spec(0.5), cpu(), trainctl::Stream{}, layout, 1, 2);
  DevicePair whole_parameters({1.0f, -2.0f}), sharded_parameters({1.0f, -2.0f});
  for (const Pair gradient : {Pair{0.5f, -1.0f}, Pair{-0.25f, 0.75f}, Pair{0.125f, 0.5f}}) {
    const Pair expected = step(whole, whole_parameters, gradient, 0.1);
    step(first, sharded_parameters, gradient, 0.1);
    CHECK(step(second, sharded_parameters, gradient, 0.1) == expected);
  }
  CHECK(first.state().front().second->size() == 1);
}

TEST_CASE("warmup ramps the learning rate linearly from lr/warmup_steps") {
  const TrainSpec spec = schedule_spec(Schedule::kConstant, 110, 10);
  check_lr(spec, 0, 0.01);  // lr * 1/10
  check_lr(spec, 4, 0.05);  // lr * 5/10
  check_lr(spec, 9, 0.1);   // lr * 10/10
  check_lr(spec, 10, 0.1);
}

TEST_CASE("the constant schedule keeps lr after warmup") {
  const TrainSpec spec = schedule_spec(Schedule::kConstant, 110, 0);
  check_lr(spec, 0, 0.1);
  check_lr(spec, 55, 0.1);
  check_lr(spec, 109, 0.1);
}

TEST_CASE("the linear schedule decays to zero at train.steps") {
  // 100 decay steps after 10 of warmup: lr * (1 - (step - 10) / 100).
  const TrainSpec spec = schedule_spec(Schedule::kLinear, 110, 10);
  check_lr(spec, 10, 0.1);
  check_lr(spec, 35, 0.075);
  check_lr(spec, 60, 0.05);
  check_lr(spec, 109, 0.001);
  CHECK(std::abs(trainctl::learning_rate(spec, 110)) < 1e-15);
}

TEST_CASE("the cosine schedule is lr/2 half-way through the decay") {
  // lr * (1 + cos(pi * (step - 10) / 100)) / 2.
  const TrainSpec spec = schedule_spec(Schedule::kCosine, 110, 10);
  check_lr(spec, 9, 0.1);  // the end of warmup
  check_lr(spec, 10, 0.1);
  check_lr(spec, 35, 0.08535533905932738);  // 0.05 * (1 + cos(pi/4)) = 0.05 * (1 + 0.70710678)
  check_lr(spec, 60, 0.05);
  check_lr(spec, 85, 0.014644660940672627);  // 0.05 * (1 - 0.70710678)
  CHECK(std::abs(trainctl::learning_rate(spec, 110)) < 1e-15);
}

TEST_CASE("a warmup as long as the run ends at the full learning rate") {
  const TrainSpec spec = schedule_spec(Schedule::kCosine, 10, 10);
  check_lr(spec, 0, 0.01);
  check_lr(spec, 9, 0.1);
}
