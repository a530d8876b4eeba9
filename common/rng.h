// The one random number generator of the runtime. std::mt19937_64 is specified bit for bit by
// the C++ standard, but the standard distributions are not, so the conversions are written
// here: the same seed gives the same weights and the same data order on every platform.
#pragma once

#include <cstdint>
#include <cmath>
#include <random>

namespace trainctl {

class Rng {
 public:
  // Distinct streams (e.g. weight init, epoch 7's permutation) from one user seed.
  Rng(uint64_t seed, uint64_t stream) : engine_(seed * 0x9E3779B97F4A7C15ULL + stream) {}

  // Uniform in [low, high), from the top 24 bits so every value is exact in float.
  float uniform(float low, float high) {
    return low + (high - low) * static_cast<float>(engine_() >> 40) * (1.0f / 16777216.0f);
  }
  // Uniform in [0, 1), from the top 53 bits: every double of the form k / 2^53.
  double unit() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }
  // Uniform integer in [0, bound), unbiased by rejection.
  uint64_t below(uint64_t bound) {
    const uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
    uint64_t value;
    do value = engine_();
    while (value >= limit);
    return value % bound;
  }
  // Standard normal by Box-Muller, for synthetic data.
  double normal() {
    const double u1 = (static_cast<double>(engine_() >> 11) + 1.0) * 0x1.0p-53;
    const double u2 = unit();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  std::mt19937_64 engine_;
};

// Stream ids, so that no two uses of one seed overlap.
constexpr uint64_t kWeightInitStream = 1;
constexpr uint64_t kSyntheticDataStream = 2;
constexpr uint64_t kSweepSampleStream = 3;  // trainctl's random search (cli/sweeps/sweep.cpp)
constexpr uint64_t kSampleStream = 4;  // trainctl sample's token draws (cli/commands/cmd_sample.cpp)
constexpr uint64_t kEpochPermutationStream = 1000;  // + epoch

}  // namespace trainctl
