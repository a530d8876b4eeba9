// The CUDA loss family: softmax cross-entropy in one kernel, over f32 or bf16 logits, with the
// gradient written over them in place. A warp per row reads the row three times, each lane 16
// bytes of consecutive logits at a time (four floats, eight bf16s) where every row starts 16-byte
// aligned, else one: it finds the row's max (first index on ties, as std::max_element, whichever
// lane saw which), sums exp(logit - max) in double, and only then, the whole row read and the warp
// past a shuffle that every lane reaches, writes (softmax - onehot) * grad_scale over the logits
// it read, each lane its own; logits past `classes` (a padded
// vocabulary) are skipped and get a gradient of 0. The arithmetic is the CPU reference's element
// by element (only the double sum's order differs). The loss sum and the correct count are reduced
// in a fixed order (warp, block, then the last block over all blocks) and added to the device
// scalars by one thread: the host neither copies nor waits.
#include <climits>
#include <cmath>
#include <cstdint>
#include <optional>

#include "cuda/cuda_ops.h"
#include "cuda/kernel_common.cuh"

namespace trainctl::cuda_kernels {

namespace {

struct LossTotals {
  double loss_sum;
  int64_t correct;
};

// Keeps the larger value, or the earlier index of equal ones: the same pair whichever order
// two candidates come in, so a butterfly leaves it in every lane.
__device__ void keep_max(float& value, int64_t& index, float other_value, int64_t other_index) {
  if (other_value > value || (other_value == value && other_index < index)) {
    value = other_value;
    index = other_index;
  }
}

// A warp per row; lane l takes packs l, l + 32, ... of kWidth consecutive classes, in order.
// Without a gradient (with_gradient false) the logits are only read.
template <int kWidth, typename T>
__global__ void softmax_cross_entropy_kernel(T* logits, const int32_t* __restrict__ labels, int64_t rows,
                                             int64_t classes, int64_t row_stride, bool with_gradient,
                                             float grad_scale, LossTotals* __restrict__ block_totals,
                                             unsigned int* counter, double* loss_sum, int64_t* correct) {
  const int lane = lane_index();
  const int64_t packs = row_stride / kWidth;
  double lane_loss = 0.0;
  int64_t lane_correct = 0;
  for (int64_t r = grid_warp_index(); r < rows; r += grid_warp_count()) {
    T* row = logits + r * row_stride;
    const int32_t label = labels[r];
    float max_logit = -INFINITY;
    int64_t argmax = LLONG_MAX;
    for (int64_t k = lane; k < packs; k += kWarpSize) {
      const Floats<kWidth> values = load_floats<kWidth>(row + k * kWidth);
      for (int j = 0; j < kWidth; ++j)
        if (k * kWidth + j < classes) keep_max(max_logit, argmax, values.v[j], k * kWidth + j);
    }
    for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
      keep_max(max_logit, argmax, __shfl_xor_sync(0xffffffffu, max_logit, offset),
               __shfl_xor_sync(0xffffffffu, argmax, offset));
    // The row's loss, log(denominator) - (label's logit - max), is added in two terms: the label's
    // by the lane that reads it, so that no lane reads a logit after the shuffle below, past which
    // the row may be overwritten.
    double denominator = 0.0;
    for (int64_t k = lane; k < packs; k += kWarpSize) {
      const Floats<kWidth> values = load_floats<kWidth>(row + k * kWidth);
      for (int j = 0; j < kWidth; ++j) {
        const int64_t c = k * kWidth + j;
        if (c < classes) denominator += exp(static_cast<double>(values.v[j] - max_logit));
        if (c == label) lane_loss -= static_cast<double>(values.v[j] - max_logit);
      }
    }
    denominator = warp_sum(denominator);
    if (lane == 0) {
      lane_loss += log(denominator);
      lane_correct += argmax == label ? 1 : 0;
    }
    if (!with_gradient) continue;
    for (int64_t k = lane; k < packs; k += kWarpSize) {
      Floats<kWidth> values = load_floats<kWidth>(row + k * kWidth);
      for (int j = 0; j < kWidth; ++j) {
        const int64_t c = k * kWidth + j;
        const double probability = exp(static_cast<double>(values.v[j] - max_logit)) / denominator;
        values.v[j] = c < classes ? static_cast<float>(probability - (c == label ? 1.0 : 0.0)) * grad_scale : 0.0f;
      }
      store_floats<kWidth>(row + k * kWidth, values);
    }
  }

  LossTotals totals{block_sum(lane_loss), block_sum(lane_correct)};
  if (gridDim.x > 1) {
    if (threadIdx.x == 0) block_totals[blockIdx.x] = totals;
    if (!finished_last(counter, gridDim.x)) return;
    double loss = 0.0;
    int64_t hits = 0;
    for (unsigned int b = threadIdx.x; b < gridDim.x; b += kBlockThreads) {
      loss += __ldcg(&block_totals[b].loss_sum);
      hits += __ldcg(&block_totals[b].correct);
    }
    totals = {block_sum(loss), block_sum(hits)};
  }
  if (threadIdx.x == 0) {
    *loss_sum += totals.loss_sum;
    *correct += totals.correct;
  }
}

}  // namespace

void softmax_cross_entropy(Stream stream, TypedPtr logits, const int32_t* labels, int64_t rows, int64_t classes,
                           int64_t row_stride, std::optional<float> grad_scale, double* loss_sum, int64_t* correct) {
  if (rows == 0) return;
  const cudaStream_t cuda = cuda_stream(stream);
  StreamScratch& scratch = scratch_of(cuda);
  const unsigned int blocks = blocks_for_rows(rows);
  auto* block_totals = scratch.reduction_partials.get<LossTotals>(blocks * sizeof(LossTotals), cuda);
  auto* counter = scratch.block_counters.get<unsigned int>(sizeof(unsigned int), cuda);
  with_element_type(logits.type, [&](auto type) {
    using T = typename decltype(type)::type;
    with_vector_width<T>(row_stride, {logits.data}, [&](auto width) {
      launch(cuda, blocks, kBlockThreads, softmax_cross_entropy_kernel<width(), T>, typed<T>(logits), labels, rows,
             classes, row_stride, grad_scale.has_value(), grad_scale.value_or(0.0f), block_totals, counter, loss_sum,
             correct);
    });
  });
}

}  // namespace trainctl::cuda_kernels
