// The CUDA loss family: softmax cross-entropy, forward and backward in one kernel. A warp per row
// reads the row three times, each lane four consecutive logits at a time as a float4 where every
// row starts 16-byte aligned (row_stride a multiple of 4 and aligned logits and gradient), else
// one; logits past `classes` (a padded vocabulary) are skipped and get a gradient of 0:
// it finds the row's max (first index on ties, as std::max_element, whichever lane saw which),
// sums exp(logit - max) in double, and writes (softmax - onehot) * grad_scale, with the CPU
// reference's arithmetic element by element (only the double sum's order differs). The loss sum
// and the correct count are reduced in a fixed order (warp, block, then the last block over all
// blocks) and copied back to the host, which waits for the op's stream only.
#include <climits>
#include <cmath>
#include <cstdint>

#include "cuda/cuda_ops.h"
#include "cuda/kernel_common.cuh"

namespace trainctl::cuda_kernels {

namespace {

struct LossTotals {
  double loss_sum;
  long long correct;
};

// Keeps the larger value, or the earlier index of equal ones: the same pair whichever order
// two candidates come in, so a butterfly leaves it in every lane.
__device__ void keep_max(float& value, long long& index, float other_value, long long other_index) {
  if (other_value > value || (other_value == value && other_index < index)) {
    value = other_value;
    index = other_index;
  }
}

// A warp per row; lane l takes packs l, l + 32, ... of kWidth consecutive classes, in order.
template <int kWidth>
__global__ void softmax_cross_entropy_kernel(const float* __restrict__ logits, const int32_t* __restrict__ labels,
                                             float* __restrict__ grad_logits, int64_t rows, int64_t classes,
                                             int64_t row_stride, float grad_scale,
                                             LossTotals* __restrict__ block_totals,
                                             unsigned int* counter, LossTotals* __restrict__ totals) {
  const int lane = lane_index();
  const int64_t packs = row_stride / kWidth;
  double warp_loss = 0.0;  // kept by lane 0
  long long warp_correct = 0;
  for (int64_t r = grid_warp_index(); r < rows; r += grid_warp_count()) {
    const float* row = logits + r * row_stride;
    float max_logit = -INFINITY;
    long long argmax = LLONG_MAX;
    for (int64_t k = lane; k < packs; k += kWarpSize) {
      const Floats<kWidth> values = load_floats<kWidth>(row + k * kWidth);
      for (int j = 0; j < kWidth; ++j)
        if (k * kWidth + j < classes) keep_max(max_logit, argmax, values.v[j], k * kWidth + j);
    }
    for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
      keep_max(max_logit, argmax, __shfl_xor_sync(0xffffffffu, max_logit, offset),
               __shfl_xor_sync(0xffffffffu, argmax, offset));
    double denominator = 0.0;
    for (int64_t k = lane; k < packs; k += kWarpSize) {
      const Floats<kWidth> values = load_floats<kWidth>(row + k * kWidth);
      for (int j = 0; j < kWidth; ++j)
        if (k * kWidth + j < classes) denominator += exp(static_cast<double>(values.v[j] - max_logit));
    }
    denominator = warp_sum(denominator);
    const int32_t label = labels[r];
    if (lane == 0) {
      warp_loss += log(denominator) - static_cast<double>(row[label] - max_logit);
      warp_correct += argmax == label ? 1 : 0;
    }
    if (grad_logits == nullptr) continue;
    float* grad_row = grad_logits + r * row_stride;
    for (int64_t k = lane; k < packs; k += kWarpSize) {
      const Floats<kWidth> values = load_floats<kWidth>(row + k * kWidth);
      Floats<kWidth> grad;
      for (int j = 0; j < kWidth; ++j) {
        const int64_t c = k * kWidth + j;
        const double probability = exp(static_cast<double>(values.v[j] - max_logit)) / denominator;
        grad.v[j] = c < classes ? static_cast<float>(probability - (c == label ? 1.0 : 0.0)) * grad_scale : 0.0f;
      }
      store_floats<kWidth>(grad_row + k * kWidth, grad);
    }
  }

  const double block_loss = block_sum(warp_loss);
  const long long block_correct = block_sum(warp_correct);
  if (gridDim.x == 1) {
    if (threadIdx.x == 0) *totals = {block_loss, block_correct};
    return;
  }
  if (threadIdx.x == 0) block_totals[blockIdx.x] = {block_loss, block_correct};
  if (!finished_last(counter, gridDim.x)) return;
  double loss = 0.0;
  long long correct = 0;
  for (unsigned int b = threadIdx.x; b < gridDim.x; b += kBlockThreads) {
    loss += __ldcg(&block_totals[b].loss_sum);
    correct += __ldcg(&block_totals[b].correct);
  }
  loss = block_sum(loss);
  correct = block_sum(correct);
  if (threadIdx.x == 0) *totals = {loss, correct};
}

}  // namespace

void softmax_cross_entropy(Stream stream, const float* logits, const int32_t* labels, float* grad_logits,
                           int64_t rows, int64_t classes, int64_t row_stride, float grad_scale, double* loss_sum,
                           int64_t* correct) {
  LossTotals host_totals{0.0, 0};
  if (rows > 0) {
    const cudaStream_t cuda = cuda_stream(stream);
    StreamScratch& scratch = scratch_of(cuda);
    const unsigned int blocks = blocks_for_rows(rows);
    auto* block_totals = scratch.reduction_partials.get<LossTotals>(blocks * sizeof(LossTotals), cuda);
    auto* counter = scratch.block_counters.get<unsigned int>(sizeof(unsigned int), cuda);
    auto* totals = scratch.reduction_results.get<LossTotals>(sizeof(LossTotals), cuda);
    with_vector_width(row_stride, {logits, grad_logits}, [&](auto width) {
      launch(cuda, blocks, kBlockThreads, softmax_cross_entropy_kernel<width()>, logits, labels, grad_logits, rows,
             classes, row_stride, grad_scale, block_totals, counter, totals);
    });
    host_totals = host_value(cuda, totals);
  }
  *loss_sum = host_totals.loss_sum;
  *correct = host_totals.correct;
}

}  // namespace trainctl::cuda_kernels
