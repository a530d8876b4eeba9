// The CUDA collectives family: a DeviceGroup is an NCCL communicator with a non-blocking stream
// of its own, bootstrapped by the caller's `share` (rank 0 makes the unique id and broadcasts
// it). A reduction waits, through an event, for the work queued on the stream it comes after,
// and no longer; work that needs the reduced values waits for the group's stream the same way.
// So the reduction of one layer's gradients overlaps the backward pass through the layers
// before it, and the host never waits.
#include <cuda_runtime.h>
#include <nccl.h>

#include <memory>

#include "cuda/cuda_check.h"
#include "cuda/cuda_ops.h"

namespace trainctl {

struct DeviceGroup {
  ncclComm_t comm = nullptr;
  int ranks = 0;
  cudaStream_t stream = nullptr;
  cudaEvent_t inputs_ready = nullptr, reduced = nullptr;
};

namespace cuda_kernels {

// The group's stream waits for the work queued on `after` so far, and no longer.
namespace {
void start_after(DeviceGroup* group, Stream after) {
  CUDA_CHECK(cudaEventRecord(group->inputs_ready, cuda_stream(after)));
  CUDA_CHECK(cudaStreamWaitEvent(group->stream, group->inputs_ready, 0));
}
}  // namespace

DeviceGroup* open_group(int rank, int ranks, const std::function<void(void* bytes, size_t size)>& share) {
  ncclUniqueId id{};
  if (rank == 0) NCCL_CHECK(ncclGetUniqueId(&id));
  share(&id, sizeof(id));
  auto group = std::make_unique<DeviceGroup>();
  group->ranks = ranks;
  NCCL_CHECK(ncclCommInitRank(&group->comm, ranks, id, rank));
  CUDA_CHECK(cudaStreamCreateWithFlags(&group->stream, cudaStreamNonBlocking));
  CUDA_CHECK(cudaEventCreateWithFlags(&group->inputs_ready, cudaEventDisableTiming));
  CUDA_CHECK(cudaEventCreateWithFlags(&group->reduced, cudaEventDisableTiming));
  return group.release();
}

// No checks: it runs from destructors, also while an earlier failure is being reported.
void close_group(DeviceGroup* group) {
  cudaStreamSynchronize(group->stream);
  cudaEventDestroy(group->reduced);
  cudaEventDestroy(group->inputs_ready);
  cudaStreamDestroy(group->stream);
  ncclCommDestroy(group->comm);
  delete group;
}

void all_reduce_sum(DeviceGroup* group, Stream after, float* data, int64_t count) {
  start_after(group, after);
  NCCL_CHECK(ncclAllReduce(data, data, static_cast<size_t>(count), ncclFloat, ncclSum, group->comm, group->stream));
}

// NCCL's reduce-scatter and all-gather take equal shares; the shards differ by up to one
// alignment unit, so each share is its own reduce to (or broadcast from) its owner, fused in one
// group.
void reduce_scatter_sum(DeviceGroup* group, Stream after, float* data, const int64_t* bounds) {
  start_after(group, after);
  NCCL_CHECK(ncclGroupStart());
  for (int owner = 0; owner < group->ranks; ++owner)
    NCCL_CHECK(ncclReduce(data + bounds[owner], data + bounds[owner], static_cast<size_t>(bounds[owner + 1] - bounds[owner]),
                          ncclFloat, ncclSum, owner, group->comm, group->stream));
  NCCL_CHECK(ncclGroupEnd());
}

void all_gather(DeviceGroup* group, Stream after, float* data, const int64_t* bounds) {
  start_after(group, after);
  NCCL_CHECK(ncclGroupStart());
  for (int owner = 0; owner < group->ranks; ++owner)
    NCCL_CHECK(ncclBroadcast(data + bounds[owner], data + bounds[owner],
                             static_cast<size_t>(bounds[owner + 1] - bounds[owner]), ncclFloat, owner, group->comm,
                             group->stream));
  NCCL_CHECK(ncclGroupEnd());
}

void wait_reductions(DeviceGroup* group, Stream stream) {
  CUDA_CHECK(cudaEventRecord(group->reduced, group->stream));
  CUDA_CHECK(cudaStreamWaitEvent(cuda_stream(stream), group->reduced, 0));
}

}  // namespace cuda_kernels

}  // namespace trainctl
