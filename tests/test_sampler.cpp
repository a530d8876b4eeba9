// Tests for the deterministic sampler (runtime/sampler.cpp): the exact indices of an unshuffled
// run (file order, wrapping at the epoch end, remainder dropped), shuffled epochs that never
// repeat a sample and depend only on (seed, epoch), rank/micro-step slices that tile the global
// batch, the error for a dataset smaller than one global batch, and that a fresh sampler asked
// for step k gives what a sampler that iterated from step 0 gave, which exact resume relies on.
#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>
#include <set>
#include <stdexcept>
#include <vector>

#include "sampler.h"

using trainctl::Sampler;

namespace {

std::vector<int32_t> range_of(int32_t first, int32_t count) {
  std::vector<int32_t> values(static_cast<size_t>(count));
  std::iota(values.begin(), values.end(), first);
  return values;
}

std::vector<int32_t> global_batch(Sampler& sampler, int64_t step, int64_t global_batch_size) {
  return sampler.indices(step, 0, global_batch_size);
}

// Every index of one epoch's steps, in order.
std::vector<int32_t> epoch_indices(Sampler& sampler, int64_t epoch, int64_t global_batch_size) {
  std::vector<int32_t> all;
  for (int64_t step = epoch * sampler.steps_per_epoch(); step < (epoch + 1) * sampler.steps_per_epoch(); ++step) {
    std::vector<int32_t> batch = global_batch(sampler, step, global_batch_size);
    all.insert(all.end(), batch.begin(), batch.end());
  }
  return all;
}

bool all_distinct(const std::vector<int32_t>& values) {
  return std::set<int32_t>(values.begin(), values.end()).size() == values.size();
}

bool all_within(const std::vector<int32_t>& values, int32_t dataset_size) {
  return std::all_of(values.begin(), values.end(), [&](int32_t v) { return v >= 0 && v < dataset_size; });
}

}  // namespace

TEST_CASE("an epoch holds floor(N / G) steps") {
  CHECK(Sampler(10, 3, false, 0).steps_per_epoch() == 3);
  CHECK(Sampler(12, 3, false, 0).steps_per_epoch() == 4);
  CHECK(Sampler(5, 5, true, 0).steps_per_epoch() == 1);
  Sampler sampler(10, 3, false, 0);
  CHECK(sampler.epoch_of(0) == 0);
  CHECK(sampler.epoch_of(2) == 0);
  CHECK(sampler.epoch_of(3) == 1);
  CHECK(sampler.epoch_of(7) == 2);
}

TEST_CASE("unshuffled step s trains on samples s*G .. s*G+G-1 and wraps, dropping the remainder") {
  Sampler sampler(10, 3, false, 99);
  CHECK(global_batch(sampler, 0, 3) == std::vector<int32_t>{0, 1, 2});
  CHECK(global_batch(sampler, 1, 3) == std::vector<int32_t>{3, 4, 5});
  CHECK(global_batch(sampler, 2, 3) == std::vector<int32_t>{6, 7, 8});
  // Sample 9 is the remainder of epoch 0: step 3 starts epoch 1 at sample 0 again.
  CHECK(global_batch(sampler, 3, 3) == std::vector<int32_t>{0, 1, 2});
  CHECK(global_batch(sampler, 5, 3) == std::vector<int32_t>{6, 7, 8});
  CHECK(global_batch(sampler, 3000, 3) == std::vector<int32_t>{0, 1, 2});
  for (int64_t step = 0; step < 9; ++step)
    CHECK(global_batch(sampler, step, 3) == range_of(static_cast<int32_t>(step % 3 * 3), 3));
}

TEST_CASE("a shuffled epoch never repeats a sample") {
  const int64_t dataset_size = 103;
  const int64_t global_batch_size = 8;  // 12 steps per epoch, 7 samples dropped
  Sampler sampler(dataset_size, global_batch_size, true, 7);
  REQUIRE(sampler.steps_per_epoch() == 12);
  for (int64_t epoch = 0; epoch < 4; ++epoch) {
    CAPTURE(epoch);
    const std::vector<int32_t> indices = epoch_indices(sampler, epoch, global_batch_size);
    CHECK(indices.size() == 96);
    CHECK(all_distinct(indices));
    CHECK(all_within(indices, static_cast<int32_t>(dataset_size)));
  }
}

TEST_CASE("a shuffled epoch is a permutation when nothing is dropped") {
  Sampler sampler(24, 6, true, 3);
  std::vector<int32_t> indices = epoch_indices(sampler, 1, 6);
  std::sort(indices.begin(), indices.end());
  CHECK(indices == range_of(0, 24));
}

TEST_CASE("the shuffled order depends on the seed and the epoch only") {
  const int64_t dataset_size = 64;
  const int64_t global_batch_size = 16;
  Sampler first(dataset_size, global_batch_size, true, 42);
  Sampler same_seed(dataset_size, global_batch_size, true, 42);
  Sampler other_seed(dataset_size, global_batch_size, true, 43);

  const std::vector<int32_t> epoch0 = epoch_indices(first, 0, global_batch_size);
  CHECK(epoch0 == epoch_indices(same_seed, 0, global_batch_size));
  CHECK(epoch0 != epoch_indices(other_seed, 0, global_batch_size));
  CHECK(epoch0 != epoch_indices(first, 1, global_batch_size));
  CHECK(epoch0 != range_of(0, static_cast<int32_t>(dataset_size)));  // it is shuffled at all
  // Going back to an epoch gives it again (the sampler caches one epoch at a time).
  CHECK(epoch_indices(first, 0, global_batch_size) == epoch0);
}

TEST_CASE("the slices of all ranks and micro-steps tile the global batch") {
  // G = micro_batch x grad_accum x world = 4 x 3 x 2; offset = (rank * grad_accum + micro) * micro_batch.
  const int64_t micro_batch = 4, grad_accum = 3, world = 2;
  const int64_t global_batch_size = micro_batch * grad_accum * world;
  for (bool shuffle : {false, true}) {
    Sampler sampler(100, global_batch_size, shuffle, 11);
    for (int64_t step : {0, 3, 4, 9}) {
      CAPTURE(shuffle);
      CAPTURE(step);
      std::vector<int32_t> concatenated;
      for (int64_t rank = 0; rank < world; ++rank)
        for (int64_t micro = 0; micro < grad_accum; ++micro) {
          std::vector<int32_t> slice = sampler.indices(step, (rank * grad_accum + micro) * micro_batch, micro_batch);
          CHECK(slice.size() == static_cast<size_t>(micro_batch));
          concatenated.insert(concatenated.end(), slice.begin(), slice.end());
        }
      CHECK(concatenated == global_batch(sampler, step, global_batch_size));
    }
  }
}

TEST_CASE("a dataset smaller than one global batch is rejected") {
  CHECK_THROWS_WITH_AS(Sampler(7, 8, true, 0), "the dataset has 7 samples, fewer than one global batch of 8",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(Sampler(0, 1, false, 0), "the dataset has 0 samples, fewer than one global batch of 1",
                       std::invalid_argument);
  CHECK_NOTHROW(Sampler(8, 8, true, 0));
}

TEST_CASE("a sampler resumed at step k gives the indices of one that iterated from step 0") {
  const int64_t dataset_size = 50, global_batch_size = 12, seed = 2024;
  const int64_t total_steps = 20;  // 4 steps per epoch: five epochs
  Sampler uninterrupted(dataset_size, global_batch_size, true, seed);
  std::vector<std::vector<int32_t>> expected;
  for (int64_t step = 0; step < total_steps; ++step) expected.push_back(global_batch(uninterrupted, step, global_batch_size));

  for (int64_t resume_step : {1, 4, 7, 13}) {
    CAPTURE(resume_step);
    Sampler resumed(dataset_size, global_batch_size, true, seed);
    for (int64_t step = resume_step; step < total_steps; ++step)
      CHECK(global_batch(resumed, step, global_batch_size) == expected[static_cast<size_t>(step)]);
  }
}
