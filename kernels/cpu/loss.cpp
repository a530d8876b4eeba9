// The CPU's loss family: softmax cross-entropy over the classes of each row (an MLP's classes, or
// GPT-2's vocabulary with one row per token), summed in double, with the gradient written over the
// row's logits once the row's loss is known. Logits past `classes` in a row pad the vocabulary and
// are never read; their gradient is 0. A bf16 row is widened first and its gradient rounded once.
#include <algorithm>
#include <cmath>

#include "cpu_ops.h"

namespace trainctl::cpu {

void softmax_cross_entropy(Stream, TypedPtr logits, const int32_t* labels, int64_t rows, int64_t classes,
                           int64_t row_stride, std::optional<float> grad_scale, double* loss_sum, int64_t* correct) {
  double loss = 0.0;
  int64_t hits = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const TypedPtr logits_row = logits + r * row_stride;
    const float* row = as_floats(logits_row, classes, 0);
    const int64_t argmax = std::max_element(row, row + classes) - row;
    const float max_logit = row[argmax];
    double denominator = 0.0;
    for (int64_t c = 0; c < classes; ++c) denominator += std::exp(static_cast<double>(row[c] - max_logit));
    const int32_t label = labels[r];
    loss += std::log(denominator) - static_cast<double>(row[label] - max_logit);
    hits += argmax == label ? 1 : 0;
    if (!grad_scale) continue;
    // Over the row's own floats: `row` is them for f32 logits.
    float* grad_row = floats_for(logits_row, row_stride, 1);
    for (int64_t c = 0; c < classes; ++c) {
      const double probability = std::exp(static_cast<double>(row[c] - max_logit)) / denominator;
      grad_row[c] = static_cast<float>(probability - (c == label ? 1.0 : 0.0)) * *grad_scale;
    }
    std::fill(grad_row + classes, grad_row + row_stride, 0.0f);
    store_floats(logits_row, grad_row, row_stride);
  }
  *loss_sum += loss;
  *correct += hits;
}

}  // namespace trainctl::cpu
