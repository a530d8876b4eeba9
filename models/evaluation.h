// A model's validation loss as a world of data-parallel ranks computes it: each rank scores a
// contiguous share of the examples, micro-batch by micro-batch, into loss sums on its device, and
// the ranks' sums, added, make the mean loss. The trainer scores its own rank's share; `trainctl
// eval` scores every rank's in turn on one CPU, so that it reproduces the loss a run logged.
#pragma once

#include <cstdint>

#include "batch.h"
#include "model.h"

namespace trainctl {

// Examples [begin, end).
struct ExampleRange {
  int64_t begin = 0;
  int64_t end = 0;
};

// Rank `rank`'s share of `examples` among `world_size` ranks: [examples*r/W, examples*(r+1)/W).
ExampleRange rank_share(int64_t examples, int64_t rank, int64_t world_size);

// The loss and correct terms of the examples `range` of `data`, scored in micro-batches of up to
// `micro_batch` examples (which the model must have been built for) and summed on the device in
// `device_totals`; the host reads the sums once, at the end. `batch` is the caller's, reused.
// With `passes`, the model makes at least that many forward passes: those past the range score
// example 0 into device_totals[1], which the result leaves out. A model whose layers are gathered
// across the ranks (train.zero = 3) must make as many on every rank, whatever its share.
BatchResult evaluate_examples(Model& model, const BatchSource& data, ExampleRange range, int64_t micro_batch,
                              Batch& batch, BatchResult* device_totals, int64_t passes = 0);
// The most forward passes evaluate_examples makes for a share of `examples` among `world_size`.
int64_t most_evaluation_passes(int64_t examples, int64_t world_size, int64_t micro_batch);

struct ValidationScore {
  double loss = 0.0;      // mean over the loss terms
  double accuracy = 0.0;  // the fraction of loss terms whose argmax is the target
};

// The score of a whole validation set of `examples` from its sums over every rank.
ValidationScore validation_score(double loss_sum, double correct_terms, int64_t examples, const Model& model);

}  // namespace trainctl
