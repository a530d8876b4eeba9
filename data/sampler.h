// The deterministic sampler. Training consumes a stream of global batches of G samples
// (G = micro_batch x grad_accum x world). An epoch holds floor(N / G) steps, the remainder is
// dropped, and step s of the run is step s % steps_per_epoch of epoch s / steps_per_epoch.
// With shuffle, an epoch visits a permutation derived from (seed, epoch); without, samples in
// file order, so step s trains on samples s*G ... s*G+G-1 (wrapping at the epoch end).
// Because positions are a function of the step alone, a resumed run sees exactly the data an
// uninterrupted run would, and no sampler state needs saving.
#pragma once

#include <cstdint>
#include <vector>

namespace trainctl {

class Sampler {
 public:
  // Throws std::invalid_argument when the dataset is smaller than one global batch.
  Sampler(int64_t dataset_size, int64_t global_batch, bool shuffle, uint64_t seed);

  int64_t steps_per_epoch() const { return steps_per_epoch_; }
  int64_t epoch_of(int64_t step) const { return step / steps_per_epoch_; }

  // The sample indices at positions [offset, offset + count) of step `step`'s global batch.
  // Each rank takes the slice for (rank, micro-step): offset = (rank*grad_accum + micro)*micro_batch.
  std::vector<int32_t> indices(int64_t step, int64_t offset, int64_t count);

 private:
  const std::vector<int32_t>& order_of_epoch(int64_t epoch);

  int64_t dataset_size_;
  int64_t global_batch_;
  int64_t steps_per_epoch_;
  bool shuffle_;
  uint64_t seed_;
  int64_t cached_epoch_ = -1;
  std::vector<int32_t> cached_order_;
};

}  // namespace trainctl
