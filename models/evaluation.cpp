// A validation loss over the ranks' shares of the examples: see evaluation.h.
#include "evaluation.h"

#include <algorithm>
#include <vector>

namespace trainctl {

ExampleRange rank_share(int64_t examples, int64_t rank, int64_t world_size) {
  return {examples * rank / world_size, examples * (rank + 1) / world_size};
}

BatchResult evaluate_examples(Model& model, const BatchSource& data, ExampleRange range, int64_t micro_batch,
                              Batch& batch, BatchResult* device_totals, int64_t passes) {
  const MemoryOps& memory = model.device().memory;
  memory.fill_zero(Stream{}, device_totals, sizeof(BatchResult));
  std::vector<int32_t> indices;
  int64_t made = 0;
  for (int64_t first = range.begin; first < range.end; first += micro_batch, ++made) {
    indices.resize(static_cast<size_t>(std::min(micro_batch, range.end - first)));
    for (size_t i = 0; i < indices.size(); ++i) indices[i] = static_cast<int32_t>(first + static_cast<int64_t>(i));
    data.gather(indices, batch);
    model.evaluate_into(batch, device_totals);
  }
  if (made < passes) data.gather({0}, batch);
  for (; made < passes; ++made) model.evaluate_into(batch, device_totals + 1);
  BatchResult totals;
  memory.download(Stream{}, &totals, device_totals, sizeof(totals));
  return totals;
}

int64_t most_evaluation_passes(int64_t examples, int64_t world_size, int64_t micro_batch) {
  const int64_t largest_share = (examples + world_size - 1) / world_size;
  return (largest_share + micro_batch - 1) / micro_batch;
}

ValidationScore validation_score(double loss_sum, double correct_terms, int64_t examples, const Model& model) {
  const auto terms = static_cast<double>(examples * model.loss_terms_per_example());
  return {loss_sum / terms, correct_terms / terms};
}

}  // namespace trainctl
