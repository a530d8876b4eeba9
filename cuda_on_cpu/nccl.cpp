// NCCL over MPI, for several ranks with device = "cuda" on the CPU implementation: a
// communicator is an MPI communicator split off MPI_COMM_WORLD by the unique id's colour (so
// every rank of the world calls ncclCommInitRank together, as the runtime does), and a
// collective runs as the MPI collective with the same meaning. A collective is ordered on its
// stream like a kernel, but runs as soon as it is called, once the stream's earlier work (and
// what that waits for) is done: the ranks call their collectives in the same order, and running
// them then keeps a rank from blocking in one while a peer waits for it in another MPI call that
// its host reached first. MPI must be initialised before the first communicator.
#include <mpi.h>
#include <nccl.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <random>

#include "device_state.h"

using namespace cuda_on_cpu;

struct ncclComm {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0, ranks = 0;
};

namespace {

// What the unique id holds: the colour the world splits by.
struct IdContents {
  uint32_t mark;
  int32_t colour;
};
constexpr uint32_t kIdMark = 0x6e63636c;  // "nccl"

bool mpi_initialized() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized != 0 && finalized == 0;
}

bool to_mpi(ncclDataType_t type, MPI_Datatype& mpi_type) {
  switch (type) {
    case ncclFloat32: mpi_type = MPI_FLOAT; return true;
    case ncclFloat64: mpi_type = MPI_DOUBLE; return true;
    case ncclInt32: mpi_type = MPI_INT32_T; return true;
    case ncclInt64: mpi_type = MPI_INT64_T; return true;
    default: return false;
  }
}

bool to_mpi(ncclRedOp_t op, MPI_Op& mpi_op) {
  switch (op) {
    case ncclSum: mpi_op = MPI_SUM; return true;
    case ncclProd: mpi_op = MPI_PROD; return true;
    case ncclMax: mpi_op = MPI_MAX; return true;
    case ncclMin: mpi_op = MPI_MIN; return true;
    default: return false;
  }
}

}  // namespace

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  if (id == nullptr) return ncclInvalidArgument;
  std::random_device entropy;
  const IdContents contents{kIdMark, static_cast<int32_t>(entropy() & 0x7FFFFFFFu)};
  std::memset(id->internal, 0, sizeof(id->internal));
  std::memcpy(id->internal, &contents, sizeof(contents));
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int ranks, ncclUniqueId id, int rank) {
  if (comm == nullptr || ranks < 1 || rank < 0 || rank >= ranks) return ncclInvalidArgument;
  IdContents contents{};
  std::memcpy(&contents, id.internal, sizeof(contents));
  if (contents.mark != kIdMark) return ncclInvalidArgument;
  if (!mpi_initialized()) {
    std::fprintf(stderr, "cuda_on_cpu: NCCL runs over MPI here, and MPI is not initialised\n");
    return ncclInvalidUsage;
  }
  auto made = std::make_unique<ncclComm>();
  if (MPI_Comm_split(MPI_COMM_WORLD, contents.colour, rank, &made->comm) != MPI_SUCCESS) return ncclSystemError;
  MPI_Comm_rank(made->comm, &made->rank);
  MPI_Comm_size(made->comm, &made->ranks);
  if (made->rank != rank || made->ranks != ranks) {
    std::fprintf(stderr, "cuda_on_cpu: ncclCommInitRank(rank %d of %d) joined rank %d of %d ranks of MPI_COMM_WORLD\n",
                 rank, ranks, made->rank, made->ranks);
    MPI_Comm_free(&made->comm);
    return ncclInvalidUsage;
  }
  *comm = made.release();
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (comm == nullptr) return ncclInvalidArgument;
  if (mpi_initialized()) MPI_Comm_free(&comm->comm);
  delete comm;
  return ncclSuccess;
}

namespace {

// Checks a collective's arguments, then waits for the work queued on its stream; `run` then makes
// the MPI call. `buffers` must be device memory of `count` elements.
template <typename Run>
ncclResult_t run_collective(const char* name, std::initializer_list<const void*> buffers, size_t count,
                            ncclDataType_t type, ncclComm_t comm, cudaStream_t stream, Run run) {
  MPI_Datatype mpi_type{};
  if (comm == nullptr || !to_mpi(type, mpi_type) || count > INT32_MAX) return ncclInvalidArgument;
  const std::lock_guard lock(device_mutex());
  CUstream_st* queue = resolve(stream);
  if (queue == nullptr) return ncclInvalidArgument;
  int element_bytes = 0;
  MPI_Type_size(mpi_type, &element_bytes);
  const size_t bytes = count * static_cast<size_t>(element_bytes);
  for (const void* buffer : buffers) {
    const Allocation* allocation = find_allocation(buffer, bytes);
    if (count > 0 && (allocation == nullptr || allocation->kind != MemoryKind::kDevice)) return ncclInvalidArgument;
  }
  log_queued(queue, name, buffers);
  drain(queue);
  if (sticky_error() != cudaSuccess) return ncclUnhandledCudaError;
  if (count == 0) return ncclSuccess;
  return run(mpi_type) == MPI_SUCCESS ? ncclSuccess : ncclSystemError;
}

}  // namespace

ncclResult_t ncclAllReduce(const void* send, void* receive, size_t count, ncclDataType_t type, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  MPI_Op mpi_op{};
  if (!to_mpi(op, mpi_op)) return ncclInvalidArgument;
  return run_collective("ncclAllReduce", {send, receive}, count, type, comm, stream, [&](MPI_Datatype mpi_type) {
    return MPI_Allreduce(send == receive ? MPI_IN_PLACE : send, receive, static_cast<int>(count), mpi_type, mpi_op,
                         comm->comm);
  });
}

// `receive` is the root's only.
ncclResult_t ncclReduce(const void* send, void* receive, size_t count, ncclDataType_t type, ncclRedOp_t op, int root,
                        ncclComm_t comm, cudaStream_t stream) {
  MPI_Op mpi_op{};
  if (!to_mpi(op, mpi_op) || comm == nullptr || root < 0 || root >= comm->ranks) return ncclInvalidArgument;
  const bool is_root = comm->rank == root;
  return run_collective("ncclReduce",
                        is_root ? std::initializer_list<const void*>{send, receive} : std::initializer_list<const void*>{send},
                        count, type, comm, stream, [&](MPI_Datatype mpi_type) {
                          const void* source = is_root && send == receive ? MPI_IN_PLACE : send;
                          return MPI_Reduce(source, receive, static_cast<int>(count), mpi_type, mpi_op, root,
                                            comm->comm);
                        });
}

// `send` is the root's only; in place when it is `receive`.
ncclResult_t ncclBroadcast(const void* send, void* receive, size_t count, ncclDataType_t type, int root,
                           ncclComm_t comm, cudaStream_t stream) {
  if (comm == nullptr || root < 0 || root >= comm->ranks) return ncclInvalidArgument;
  return run_collective("ncclBroadcast", {receive}, count, type, comm, stream, [&](MPI_Datatype mpi_type) {
    if (comm->rank == root && send != receive) {
      int element_bytes = 0;
      MPI_Type_size(mpi_type, &element_bytes);
      std::memcpy(receive, send, count * static_cast<size_t>(element_bytes));
    }
    return MPI_Bcast(receive, static_cast<int>(count), mpi_type, root, comm->comm);
  });
}

// Each collective runs as it is called (see the top of this file), which every member of a group
// allows: the ranks call them in the same order.
ncclResult_t ncclGroupStart() { return ncclSuccess; }
ncclResult_t ncclGroupEnd() { return ncclSuccess; }

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    default: return "unknown result code";
  }
}
