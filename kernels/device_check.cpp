// The check of a bound device: see device_check.h.
#include "device_check.h"

#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "count_text.h"
#include "device_buffer.h"

namespace trainctl {

namespace {

// Not square, so that a transposed operand shows.
constexpr int64_t kRows = 96, kColumns = 80, kInner = 64;
// The element the test hook changes, and by how much.
constexpr int64_t kPerturbedElement = 17;
constexpr float kPerturbation = 2.25f;
// |device - reference| <= kAbsolute + kRelative * |reference|. The operands make the exact product
// the only right answer (operand()), so this is only slack for a device that rounds its fp32
// accumulator otherwise in the last bits, which none should on these values: 8 units in the last
// place, far below any fault.
constexpr double kAbsolute = 0x1p-20, kRelative = 0x1p-20;

// Multiples of 1/16 in [-4, 4), 7 significant bits (exact in fp32, TF32 and bf16 alike): every
// product is a multiple of 1/256 below 16 in magnitude and every partial sum of kInner of them a
// multiple of 1/256 below 1024, 18 significant bits, exact in fp32. So any summation order gives
// the reference's value exactly.
std::vector<float> operand(int64_t count, int64_t salt) {
  std::vector<float> values(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i)
    values[static_cast<size_t>(i)] = static_cast<float>((i * 37 + salt) % 128 - 64) / 16.0f;
  return values;
}

std::optional<std::string> check_gemm(const Device& device, bool perturb) {
  const std::vector<float> a = operand(kRows * kInner, 5), b = operand(kInner * kColumns, 11);
  std::vector<float> reference(static_cast<size_t>(kRows * kColumns), 0.0f);
  for (int64_t i = 0; i < kRows; ++i)
    for (int64_t j = 0; j < kColumns; ++j) {
      float sum = 0.0f;
      for (int64_t k = 0; k < kInner; ++k)
        sum += a[static_cast<size_t>(i * kInner + k)] * b[static_cast<size_t>(k * kColumns + j)];
      reference[static_cast<size_t>(i * kColumns + j)] = sum;
    }

  DeviceBuffer<float> device_a(device, kRows * kInner), device_b(device, kInner * kColumns),
      device_c(device, kRows * kColumns);
  device_a.upload(a.data(), device_a.size());
  device_b.upload(b.data(), device_b.size());
  device.blas.gemm(Stream{}, dense_gemm(false, false, kRows, kColumns, kInner, 1.0f, device_a.get(), device_b.get(),
                                         0.0f, device_c.get()));
  if (perturb) {
    const float wrong = reference[kPerturbedElement] + kPerturbation;
    device.memory.upload(Stream{}, device_c.get() + kPerturbedElement, &wrong, sizeof(wrong));
  }
  std::vector<float> computed(reference.size());
  device_c.download(computed.data(), device_c.size());

  std::optional<size_t> worst;
  double worst_excess = 0.0;
  for (size_t i = 0; i < computed.size(); ++i) {
    const double difference = std::fabs(static_cast<double>(computed[i]) - reference[i]);
    // A NaN is the worst there is.
    const double allowed = kAbsolute + kRelative * std::fabs(reference[i]);
    const double excess = std::isnan(difference) ? INFINITY : difference - allowed;
    if (excess > 0.0 && (!worst || excess > worst_excess)) {
      worst = i;
      worst_excess = excess;
    }
  }
  if (!worst) return std::nullopt;
  return fmt::format("GEMM differs from the CPU's (worst element {}: {} vs {})", *worst, computed[*worst],
                     reference[*worst]);
}

}  // namespace

std::string device_label(std::string_view device_name, int local_rank) {
  if (device_name == cpu_device().name) return std::string(device_name);
  return fmt::format("{} device {}", device_name, local_rank);
}

// The memory first: the GEMM keeps cuBLASLt's workspace, which the run's estimate counts.
std::optional<std::string> check_device(const Device& device, const DeviceCheck& check) {
  if (check.needed_bytes) {
    const std::optional<int64_t> free = device.info.free_memory_bytes();
    if (free && *free < *check.needed_bytes)
      return fmt::format("{} free, the run needs {}", size_text(*free), size_text(*check.needed_bytes));
  }
  return check_gemm(device, check.perturb_gemm);
}

}  // namespace trainctl
