// Gradient averaging across ranks: see grad_sync.h.
#include "grad_sync.h"

#include <string_view>

#include "bad_input.h"
#include "check.h"
#include "signals.h"

#ifdef TRAINCTL_HAVE_NCCL
#include <cuda_runtime.h>
#include <nccl.h>

#include "cuda/cuda_check.h"

#define NCCL_CHECK(statement)                                                           \
  do {                                                                                  \
    const ncclResult_t nccl_result = (statement);                                       \
    if (nccl_result != ncclSuccess)                                                     \
      ::trainctl::report_check_failure(#statement, __FILE__, __LINE__, ncclGetErrorString(nccl_result)); \
  } while (0)
#endif

namespace trainctl {

namespace {

// A world of one has nothing to average.
class NoSync : public GradientSync {
 public:
  void layer_ready(float*, int64_t, int64_t) override {}
  void finish(float*, int64_t) override {}
};

// Host memory: the whole buffer in one MPI all-reduce, whose result does not depend on how
// backward was split into layers.
class MpiSync : public GradientSync {
 public:
  explicit MpiSync(Comm& comm) : comm_(comm) {}
  void layer_ready(float*, int64_t, int64_t) override {}
  void finish(float* gradients, int64_t count) override { comm_.allreduce_sum(gradients, static_cast<size_t>(count)); }

 private:
  Comm& comm_;
};

#ifdef TRAINCTL_HAVE_NCCL
// The CUDA kernels run on the legacy default stream; NCCL gets a non-blocking stream, which the
// default stream does not implicitly wait for, ordered against it with events.
class NcclSync : public GradientSync {
 public:
  explicit NcclSync(Comm& comm) {
    ncclUniqueId id{};
    if (comm.rank() == 0) NCCL_CHECK(ncclGetUniqueId(&id));
    comm.broadcast(&id, sizeof(id));
    // NCCL starts proxy threads; they must not be the ones a stop signal is delivered to.
    with_stop_signals_blocked([&] { NCCL_CHECK(ncclCommInitRank(&nccl_, comm.world_size(), id, comm.rank())); });
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreateWithFlags(&layer_done_, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&reduced_, cudaEventDisableTiming));
  }
  ~NcclSync() override {
    // No checks: a destructor may run while an error is already being reported.
    cudaEventDestroy(reduced_);
    cudaEventDestroy(layer_done_);
    cudaStreamDestroy(stream_);
    ncclCommDestroy(nccl_);
  }
  NcclSync(const NcclSync&) = delete;
  NcclSync& operator=(const NcclSync&) = delete;

  void layer_ready(float* gradients, int64_t offset, int64_t count) override {
    // The NCCL stream waits for backward to have written this layer, and no longer.
    CUDA_CHECK(cudaEventRecord(layer_done_, 0));
    CUDA_CHECK(cudaStreamWaitEvent(stream_, layer_done_, 0));
    NCCL_CHECK(ncclAllReduce(gradients + offset, gradients + offset, static_cast<size_t>(count), ncclFloat, ncclSum,
                             nccl_, stream_));
  }
  void finish(float*, int64_t) override {
    // The device waits for the reductions; the host does not.
    CUDA_CHECK(cudaEventRecord(reduced_, stream_));
    CUDA_CHECK(cudaStreamWaitEvent(0, reduced_, 0));
  }

 private:
  ncclComm_t nccl_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t layer_done_ = nullptr, reduced_ = nullptr;
};
#endif

}  // namespace

std::unique_ptr<GradientSync> make_gradient_sync(const Device& device, Comm& comm) {
  if (comm.world_size() == 1) return std::make_unique<NoSync>();
  if (std::string_view(device.name) != "cuda") return std::make_unique<MpiSync>(comm);
#ifdef TRAINCTL_HAVE_NCCL
  return std::make_unique<NcclSync>(comm);
#else
  throw BadInput("train.device = \"cuda\" on several ranks needs NCCL, which this trainctl-runtime was built "
                    "without (NCCL is looked for in /usr/local/cuda/lib64)");
#endif
}

}  // namespace trainctl
