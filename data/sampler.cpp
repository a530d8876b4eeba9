// The deterministic sampler: see sampler.h.
#include "sampler.h"

#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>

#include "rng.h"

namespace trainctl {

Sampler::Sampler(int64_t dataset_size, int64_t global_batch, bool shuffle, uint64_t seed)
    : dataset_size_(dataset_size),
      global_batch_(global_batch),
      steps_per_epoch_(global_batch > 0 ? dataset_size / global_batch : 0),
      shuffle_(shuffle),
      seed_(seed) {
  if (steps_per_epoch_ < 1)
    throw std::invalid_argument("the dataset has " + std::to_string(dataset_size) +
                                " samples, fewer than one global batch of " + std::to_string(global_batch));
}

const std::vector<int32_t>& Sampler::order_of_epoch(int64_t epoch) {
  if (epoch == cached_epoch_) return cached_order_;
  cached_order_.resize(static_cast<size_t>(dataset_size_));
  std::iota(cached_order_.begin(), cached_order_.end(), 0);
  if (shuffle_) {
    Rng rng(seed_, kEpochPermutationStream + static_cast<uint64_t>(epoch));
    for (int64_t i = dataset_size_ - 1; i > 0; --i)
      std::swap(cached_order_[static_cast<size_t>(i)], cached_order_[rng.below(static_cast<uint64_t>(i + 1))]);
  }
  cached_epoch_ = epoch;
  return cached_order_;
}

std::vector<int32_t> Sampler::indices(int64_t step, int64_t offset, int64_t count) {
  const std::vector<int32_t>& order = order_of_epoch(epoch_of(step));
  const int64_t start = (step % steps_per_epoch_) * global_batch_ + offset;
  return {order.begin() + start, order.begin() + start + count};
}

}  // namespace trainctl
