// The CUDA optimizer family: the steps (PyTorch's SGD with momentum and AdamW) and the gradient
// norm's sum of squares. A step is one launch over the update's whole range: a grid-stride loop,
// four floats at a time as float4s where every vector it touches starts aligned for it (a shard
// starts at any float offset of the flat buffers), else one. Each pack finds its parameter group
// by a binary search of the group ends (a pack that straddles a group's end goes element by
// element; elements past the last end are left alone), and every thread computes the clip factor
// from the shards' sums of squares first, in double and in the CPU's order, so that it needs no
// second launch and no host. The steps take their derived scalars as the CPU reference computes
// them (in double, rounded once to float) and repeat its float arithmetic operation for
// operation, with IEEE division and square root and no contraction into FMA (--fmad=false), so
// parameters, optimizer state and the compute copy (rounded once from the new parameters, in the
// same pass) match the CPU's bitwise. sum_squares adds in double, in a fixed order, and leaves its
// result on the device.
#include <cmath>
#include <cstdint>

#include "cuda/cuda_ops.h"
#include "cuda/kernel_common.cuh"

namespace trainctl::cuda_kernels {

namespace {

constexpr int kStepWidth = 4;

// The update's groups and its gradient clipping, as the kernels read them.
struct Groups {
  const int64_t* ends;
  const uint8_t* decays;
  int64_t count;
  const double* shard_squares;
  int64_t shards;
  double max_norm;
};

Groups groups_of(const ParameterUpdate& update) {
  return {update.group_ends, update.group_decays, update.groups, update.shard_squares, update.shards,
          update.max_norm};
}

// max_norm / (norm + 1e-6) where that is below 1, else 1, as the CPU's clip_factor computes it.
__device__ float clip_factor(const Groups& groups) {
  if (!(groups.max_norm > 0.0)) return 1.0f;
  double squares = 0.0;
  for (int64_t shard = 0; shard < groups.shards; ++shard) squares += groups.shard_squares[shard];
  const double coefficient = groups.max_norm / (sqrt(squares) + 1e-6);
  return coefficient < 1.0 ? static_cast<float>(coefficient) : 1.0f;
}

// The group holding element i: the first whose end is past i (groups.count past the last end).
__device__ int64_t group_of(const Groups& groups, int64_t i) {
  int64_t low = 0, high = groups.count;
  while (low < high) {
    const int64_t middle = (low + high) / 2;
    if (groups.ends[middle] > i)
      high = middle;
    else
      low = middle + 1;
  }
  return low;
}

// The step's loop: update(i, width, decays) for each pack of `width` elements in one group (i its
// first element, decays its group's flag), the packs that straddle a group's end element by
// element, and nothing past the last group's end.
template <int kWidth, typename Update>
__device__ void for_each_grouped_pack(int64_t n, const Groups& groups, Update update) {
  for_each_pack<kWidth>(n, [&](int64_t i, auto width) {
    constexpr int kPack = decltype(width)::value;
    const int64_t group = group_of(groups, i);
    if (group == groups.count) return;
    if (i + kPack <= groups.ends[group]) {
      update(i, width, groups.decays[group] != 0);
      return;
    }
    for (int j = 0; j < kPack; ++j) {
      const int64_t element = group_of(groups, i + j);
      if (element < groups.count) update(i + j, std::integral_constant<int, 1>{}, groups.decays[element] != 0);
    }
  });
}

// The parameters' compute copy, where there is one: rounded once from the new parameters.
template <int kPack, typename Copy>
__device__ void write_compute_copy(Copy* compute_copy, int64_t i, const Floats<kPack>& parameters) {
  if (compute_copy != nullptr) store_floats<kPack>(compute_copy + i, parameters);
}

struct SgdScalars {
  float lr, momentum, weight_decay;  // weight_decay: the decaying groups'; the others take none
};

template <int kWidth, typename Copy>
__global__ void sgd_step_kernel(float* __restrict__ param, const float* __restrict__ grad,
                                Copy* __restrict__ compute_copy, float* __restrict__ momentum_buffer, int64_t n,
                                Groups groups, SgdScalars s) {
  const float clip = clip_factor(groups);
  for_each_grouped_pack<kWidth>(n, groups, [&](int64_t i, auto width, bool decays) {
    constexpr int kPack = decltype(width)::value;
    const float weight_decay = decays ? s.weight_decay : 0.0f;
    const Floats<kPack> gradients = load_floats<kPack>(grad + i);
    Floats<kPack> p = load_floats<kPack>(param + i), buffer = load_floats<kPack>(momentum_buffer + i);
    for (int j = 0; j < kPack; ++j) {
      const float g = gradients.v[j] * clip + weight_decay * p.v[j];
      buffer.v[j] = s.momentum * buffer.v[j] + g;
      p.v[j] -= s.lr * buffer.v[j];
    }
    store_floats<kPack>(momentum_buffer + i, buffer);
    store_floats<kPack>(param + i, p);
    write_compute_copy<kPack>(compute_copy, i, p);
  });
}

struct AdamwScalars {
  float decay, no_decay;  // the parameters' factor in decaying groups and in the others
  float beta1, one_minus_beta1, beta2, one_minus_beta2, step_size, bias_correction2_sqrt, eps;
};

template <int kWidth, typename Copy>
__global__ void adamw_step_kernel(float* __restrict__ param, const float* __restrict__ grad,
                                  Copy* __restrict__ compute_copy, float* __restrict__ exp_avg,
                                  float* __restrict__ exp_avg_sq, int64_t n, Groups groups, AdamwScalars s) {
  const float clip = clip_factor(groups);
  for_each_grouped_pack<kWidth>(n, groups, [&](int64_t i, auto width, bool decays) {
    constexpr int kPack = decltype(width)::value;
    const float decay = decays ? s.decay : s.no_decay;
    const Floats<kPack> gradients = load_floats<kPack>(grad + i);
    Floats<kPack> p = load_floats<kPack>(param + i), average = load_floats<kPack>(exp_avg + i),
                  average_sq = load_floats<kPack>(exp_avg_sq + i);
    for (int j = 0; j < kPack; ++j) {
      const float g = gradients.v[j] * clip;
      const float decayed = p.v[j] * decay;
      average.v[j] = s.beta1 * average.v[j] + s.one_minus_beta1 * g;
      average_sq.v[j] = s.beta2 * average_sq.v[j] + s.one_minus_beta2 * g * g;
      const float denominator = sqrtf(average_sq.v[j]) / s.bias_correction2_sqrt + s.eps;
      p.v[j] = decayed - s.step_size * average.v[j] / denominator;
    }
    store_floats<kPack>(exp_avg + i, average);
    store_floats<kPack>(exp_avg_sq + i, average_sq);
    store_floats<kPack>(param + i, p);
    write_compute_copy<kPack>(compute_copy, i, p);
  });
}

// body(std::type_identity<Copy>{}, std::integral_constant<int, kWidth>{}) for the update: Copy
// the device type of its compute copy (float, and a null pointer, without one), kWidth 4 where
// every one of `floats` and the copy start aligned for four of their elements, else 1.
template <typename Body>
void with_update_layout(const ParameterUpdate& update, std::initializer_list<const void*> floats, Body body) {
  with_element_type(update.compute_copy.type, [&](auto copy_type) {
    using Copy = typename decltype(copy_type)::type;
    const bool aligned = aligned_to(kStepWidth * sizeof(float), floats) &&
                         aligned_to(kStepWidth * sizeof(Copy), {update.compute_copy.data});
    with_width<kStepWidth>(aligned, [&](auto width) { body(copy_type, width); });
  });
}

// Each block sums its grid-stride share in double (float * float is exact in double), each
// thread its packs' floats in order, stores the block's sum, and the last block adds the blocks'
// sums in order.
template <int kWidth>
__global__ void sum_squares_kernel(const float* __restrict__ x, int64_t n, double* __restrict__ block_sums,
                                   unsigned int* counter, double* __restrict__ total) {
  double sum = 0.0;
  for_each_pack<kWidth>(n, [&](int64_t i, auto width) {
    constexpr int kPack = decltype(width)::value;
    const Floats<kPack> values = load_floats<kPack>(x + i);
    for (int j = 0; j < kPack; ++j) sum += static_cast<double>(values.v[j]) * values.v[j];
  });
  sum = block_sum(sum);
  if (gridDim.x == 1) {
    if (threadIdx.x == 0) *total = sum;
    return;
  }
  if (threadIdx.x == 0) block_sums[blockIdx.x] = sum;
  if (!finished_last(counter, gridDim.x)) return;
  double blocks_sum = 0.0;
  for (unsigned int b = threadIdx.x; b < gridDim.x; b += kBlockThreads) blocks_sum += __ldcg(&block_sums[b]);
  blocks_sum = block_sum(blocks_sum);
  if (threadIdx.x == 0) *total = blocks_sum;
}

}  // namespace

void sgd_step(Stream stream, const ParameterUpdate& update, float* momentum_buffer, double lr, double momentum) {
  const SgdScalars scalars{
      .lr = static_cast<float>(lr),
      .momentum = static_cast<float>(momentum),
      .weight_decay = static_cast<float>(update.weight_decay),
  };
  with_update_layout(update, {update.parameters, update.gradients, momentum_buffer}, [&](auto copy_type, auto width) {
    using Copy = typename decltype(copy_type)::type;
    launch_over(cuda_stream(stream), ceil_div(update.n, width()), sgd_step_kernel<width(), Copy>, update.parameters,
                update.gradients, typed<Copy>(update.compute_copy), momentum_buffer, update.n, groups_of(update),
                scalars);
  });
}

void adamw_step(Stream stream, const ParameterUpdate& update, float* exp_avg, float* exp_avg_sq, double lr,
                double beta1, double beta2, double eps, int64_t step) {
  const AdamwScalars scalars{
      .decay = static_cast<float>(1.0 - lr * update.weight_decay),
      .no_decay = static_cast<float>(1.0 - lr * 0.0),
      .beta1 = static_cast<float>(beta1),
      .one_minus_beta1 = static_cast<float>(1.0 - beta1),
      .beta2 = static_cast<float>(beta2),
      .one_minus_beta2 = static_cast<float>(1.0 - beta2),
      .step_size = static_cast<float>(lr / (1.0 - std::pow(beta1, static_cast<double>(step)))),
      .bias_correction2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(beta2, static_cast<double>(step)))),
      .eps = static_cast<float>(eps),
  };
  with_update_layout(update, {update.parameters, update.gradients, exp_avg, exp_avg_sq},
                     [&](auto copy_type, auto width) {
                       using Copy = typename decltype(copy_type)::type;
                       launch_over(cuda_stream(stream), ceil_div(update.n, width()), adamw_step_kernel<width(), Copy>,
                                   update.parameters, update.gradients, typed<Copy>(update.compute_copy), exp_avg,
                                   exp_avg_sq, update.n, groups_of(update), scalars);
                     });
}

void sum_squares(Stream stream, const float* x, int64_t n, double* sum) {
  const cudaStream_t cuda = cuda_stream(stream);
  if (n == 0) {
    fill_zero(stream, sum, sizeof(double));
    return;
  }
  StreamScratch& scratch = scratch_of(cuda);
  auto* counter = scratch.block_counters.get<unsigned int>(sizeof(unsigned int), cuda);
  with_pack_width<float>({x}, [&](auto width) {
    const unsigned int blocks = blocks_for(ceil_div(n, width()));
    auto* block_sums = scratch.reduction_partials.get<double>(blocks * sizeof(double), cuda);
    launch(cuda, blocks, kBlockThreads, sum_squares_kernel<width()>, x, n, block_sums, counter, sum);
  });
}

}  // namespace trainctl::cuda_kernels
