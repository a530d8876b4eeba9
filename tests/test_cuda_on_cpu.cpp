// Tests of cuda_on_cpu/, the CPU implementation of CUDA that the kernels' tests run on: what it
// promises the project's CUDA code, each against the CUDA behaviour it stands for.
//   Execution: blocks and threads in the schedule's order (in-order, reversed, shuffled:SEED);
//   __syncthreads orders the block; a kernel that misses it reads what the order left there, so
//   two schedules disagree; __shared__ memory reads as 0xFF bytes (NaN) before each block writes
//   it; shuffles exchange within the lanes of their mask, with PTX's rules for width; warps go
//   through different numbers of shuffles without waiting for each other. A barrier that some
//   threads leave by returning, and a shuffle that half a warp reaches, are reported as
//   deadlocks naming the kernel, the block, each thread's place (file:line) and abort.
//   Launches: the driver's limits on block and grid shapes and on dynamic shared memory; a
//   pointer argument outside device memory faults when the kernel runs (cudaErrorIllegalAddress,
//   sticky), registered host memory does not.
//   Streams: work on a non-blocking stream runs only once something waits for it, so work
//   ordered on the wrong stream shows; events order one stream after another; the legacy
//   default stream waits for blocking streams; copies to pageable memory wait for their stream,
//   to registered memory they are queued; ranges outside allocations are cudaErrorInvalidValue.
//   Devices: as many as CUDA_VISIBLE_DEVICES names, up to its first entry that is no device;
//   each of TRAINCTL_CUDA_ON_CPU_MEMORY_MIB (80 GiB by default), a cudaMalloc past it
//   cudaErrorMemoryAllocation.
//   cuBLASLt: every transpose, padded leading dimensions, strided batches (stride 0 too), alpha
//   and beta, C apart from D, bf16 operands, against a naive column-major product of small
//   integers (exact in fp32, so bitwise); a pointer less aligned than its plan assumed, shapes
//   that do not fit, and ReLU's epilogue are refused.
//   cuBLASLt's epilogues (BIAS, GELU, GELU_BIAS, GELU_AUX, GELU_AUX_BIAS, DGELU, BGRADA, BGRADB)
//   with fp32 or bf16 A and B and fp32 or bf16 C and D, C apart from D, beta != 0, m != n (a bias
//   along the wrong dimension shows), against the header's definitions computed here in double:
//   exactly where the result is a small multiple of 1/4, within a stated tolerance after GELU;
//   the aux matrix written and read, padding kept, bias gradients for every transpose. Refused:
//   bf16 C and D with fp32 A and B, an aux leading dimension not divisible by 8 or below D's rows,
//   a bias or aux type other than D's, an epilogue with batches, a missing pointer, a bias or aux
//   pointer less aligned than the heuristic saw; one short of its extent faults when it runs.
//   Activity (activity.h): launches, matmuls, host syncs and upload waits of a known sequence,
//   refused calls counting nothing; the peak of device memory held. NCCL refuses to start
//   without MPI.
// (The tensor-core instructions, dynamic shared memory and cp.async: test_tensor_cores.cu.)
// A plain program (cuda_test_support.h): `--only GROUP` runs one group (kGroups). Exits 0 when
// every check passes, 1 otherwise.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cuda_on_cpu/activity.h>
#include <nccl.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "cuda_test_support.h"

namespace {

using namespace cuda_tests;

void use_schedule(const char* schedule) { setenv("TRAINCTL_CUDA_ON_CPU_SCHEDULE", schedule, 1); }

// --- kernels ---------------------------------------------------------------------------------

// Each thread takes a ticket: the order in which the schedule ran the threads.
__global__ void take_tickets(unsigned int* counter, unsigned int* tickets) {
  tickets[blockIdx.x * blockDim.x + threadIdx.x] = atomicAdd(counter, 1u);
}

// Reverses each block's 64 values through shared memory: with the barrier, or racing without it.
template <bool kBarrier>
__global__ void reverse_blocks(const float* in, float* out) {
  __shared__ float staged[64];
  const unsigned int i = blockIdx.x * 64 + threadIdx.x;
  staged[threadIdx.x] = in[i];
  if (kBarrier) __syncthreads();
  out[i] = staged[63 - threadIdx.x];
}

// Block 0 writes the shared value; every block reads it.
__global__ void read_shared(float* out) {
  __shared__ float value;
  if (blockIdx.x == 0 && threadIdx.x == 0) value = 1.0f;
  __syncthreads();
  if (threadIdx.x == 0) out[blockIdx.x] = value;
}

__global__ void butterfly_sums(const float* in, float* out, int width) {
  float value = in[threadIdx.x];
  for (int offset = width / 2; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset, width);
  out[threadIdx.x] = value;
}

__global__ void shuffle_across_segments(int* out) {
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, static_cast<int>(threadIdx.x), 16, 16);
}

// Warp w goes through w + 1 shuffles, the block through no barrier.
__global__ void uneven_warps(float* out) {
  const unsigned int warp = threadIdx.x / 32;
  float value = 1.0f;
  for (unsigned int round = 0; round <= warp; ++round) value = __shfl_xor_sync(0xffffffffu, value, 1) + 1.0f;
  out[threadIdx.x] = value;
}

__global__ void barrier_after_return(float* out) {
  if (threadIdx.x >= 16) return;
  __syncthreads();
  out[threadIdx.x] = 1.0f;
}

__global__ void half_warp_shuffle(float* out) {
  float value = static_cast<float>(threadIdx.x);
  if (threadIdx.x % 32 < 16) value = __shfl_xor_sync(0xffffffffu, value, 1);
  out[threadIdx.x] = value;
}

__global__ void fill(float* out, float value, int n) {
  for (int i = static_cast<int>(threadIdx.x); i < n; i += static_cast<int>(blockDim.x)) out[i] = value;
}

// --- tests -------------------------------------------------------------------------------------

void test_schedules() {
  constexpr unsigned int kBlocks = 3, kThreads = 40;
  constexpr unsigned int kAll = kBlocks * kThreads;
  std::vector<unsigned int> in_order(kAll), reversed(kAll);
  std::iota(in_order.begin(), in_order.end(), 0u);
  std::iota(reversed.rbegin(), reversed.rend(), 0u);
  const auto tickets_under = [&](const char* schedule) {
    use_schedule(schedule);
    DeviceArray<unsigned int> counter(1), tickets(kAll);
    launch(kBlocks, kThreads, nullptr, take_tickets, counter.get(), tickets.get());
    return tickets.read();
  };
  check(tickets_under("in-order") == in_order, "in-order: blocks and threads run in increasing order");
  check(tickets_under("reversed") == reversed, "reversed: blocks and threads run in decreasing order");
  const std::vector<unsigned int> shuffled = tickets_under("shuffled:7");
  std::vector<unsigned int> sorted = shuffled;
  std::sort(sorted.begin(), sorted.end());
  check(sorted == in_order && shuffled != in_order && shuffled != reversed,
        "shuffled:7: every thread once, in neither order");
  // A process's launches go through the seed's permutations in turn: a fresh process with the
  // same seed and the same launches repeats them.
  const auto first_launch_in_a_process = [&](const char* schedule) {
    return in_child([&] {
      for (const unsigned int ticket : tickets_under(schedule)) std::fprintf(stderr, "%u ", ticket);
    }).error_output;
  };
  check(first_launch_in_a_process("shuffled:7") == first_launch_in_a_process("shuffled:7") &&
            first_launch_in_a_process("shuffled:8") != first_launch_in_a_process("shuffled:7"),
        "shuffled: the seed decides the order, the same in every run of a program");
  use_schedule("in-order");
}

void test_barriers_and_shared_memory() {
  std::vector<float> in(128);
  std::iota(in.begin(), in.end(), 0.0f);
  std::vector<float> expected(128);
  for (size_t i = 0; i < 128; ++i) expected[i] = in[i / 64 * 64 + 63 - i % 64];
  const auto reversed_under = [&](const char* schedule, auto kernel) {
    use_schedule(schedule);
    DeviceArray<float> device_in(in), out(128);
    launch(2, 64, nullptr, kernel, device_in.get(), out.get());
    return out.read();
  };
  check(reversed_under("in-order", reverse_blocks<true>) == expected &&
            reversed_under("reversed", reverse_blocks<true>) == expected,
        "with __syncthreads, the block's reversal is right under both schedules");
  const std::vector<float> racing_in_order = reversed_under("in-order", reverse_blocks<false>);
  const std::vector<float> racing_reversed = reversed_under("reversed", reverse_blocks<false>);
  check(std::isnan(racing_in_order[0]) && racing_in_order[40] == expected[40],
        "without it, in order: thread 0 reads slot 63 before thread 63 wrote it (NaN), thread 40 reads a written one");
  check(std::isnan(racing_reversed[63]) && racing_reversed[0] == expected[0],
        "reversed: thread 63 reads slot 0 unwritten, thread 0 reads a written one");
  check(std::memcmp(racing_in_order.data(), racing_reversed.data(), 128 * sizeof(float)) != 0,
        "the race gives different bits under the two schedules");

  use_schedule("in-order");
  DeviceArray<float> out(3);
  launch(3, 32, nullptr, read_shared, out.get());
  const std::vector<float> read = out.read();
  check(read[0] == 1.0f && std::isnan(read[1]) && std::isnan(read[2]),
        "shared memory is poisoned before every block: what block 0 wrote, block 1 reads as NaN");
}

void test_warp_operations() {
  std::vector<float> in(32);
  std::iota(in.begin(), in.end(), 1.0f);
  for (const int width : {32, 16, 4}) {
    DeviceArray<float> device_in(in), out(32);
    launch(1, 32, nullptr, butterfly_sums, device_in.get(), out.get(), width);
    std::vector<float> expected(32);
    for (int lane = 0; lane < 32; ++lane) {
      const int first = lane / width * width;
      expected[static_cast<size_t>(lane)] = std::accumulate(in.begin() + first, in.begin() + first + width, 0.0f);
    }
    check(out.read() == expected, "a butterfly of __shfl_xor_sync with width " + std::to_string(width) +
                                      " sums each segment, in every lane of it");
  }
  DeviceArray<int> lanes(32);
  launch(1, 32, nullptr, shuffle_across_segments, lanes.get());
  std::vector<int> expected(32);
  for (int lane = 0; lane < 32; ++lane) expected[static_cast<size_t>(lane)] = lane < 16 ? lane : lane - 16;
  check(lanes.read() == expected,
        "width 16: a lane whose source lies in a later segment keeps its value, one in an earlier gets it");

  DeviceArray<float> uneven(128);
  launch(1, 128, nullptr, uneven_warps, uneven.get());
  const std::vector<float> result = uneven.read();
  bool each_warp_its_rounds = true;
  for (size_t t = 0; t < 128; ++t) each_warp_its_rounds &= result[t] == static_cast<float>(t / 32 + 2);
  check(each_warp_its_rounds, "warps go through different numbers of shuffles without waiting for each other");
}

void test_deadlocks() {
  const ChildEnd barrier = in_child([] {
    DeviceArray<float> out(32);
    launch(1, 32, nullptr, barrier_after_return, out.get());
    cudaDeviceSynchronize();
  });
  check(barrier.signal == SIGABRT && contains(barrier.error_output, "deadlock in ") &&
            contains(barrier.error_output, "barrier_after_return") &&
            contains(barrier.error_output, "block (0,0,0) of grid (1,1,1)") &&
            contains(barrier.error_output,
                     "threads 0-15 (first (0,0,0), warp 0 lane 0): waits at __syncthreads() in "
                     "barrier_after_return (") &&
            contains(barrier.error_output, "test_cuda_on_cpu.cpp:") &&
            contains(barrier.error_output, "threads 16-31 (first (16,0,0), warp 0 lane 16): returned from the kernel"),
        "a barrier that half the block leaves by returning: a deadlock report, then abort:\n" + barrier.error_output);
  const ChildEnd shuffle = in_child([] {
    DeviceArray<float> out(64);
    launch(1, 64, nullptr, half_warp_shuffle, out.get());
    cudaDeviceSynchronize();
  });
  check(shuffle.signal == SIGABRT && contains(shuffle.error_output, "half_warp_shuffle") &&
            contains(shuffle.error_output, "threads 0-15 (first (0,0,0), warp 0 lane 0): waits at "
                                           "__shfl_xor_sync(mask 0xffffffff) in half_warp_shuffle (") &&
            contains(shuffle.error_output, "returned from the kernel"),
        "a shuffle that half a warp reaches: a deadlock report naming the lanes, then abort:\n" +
            shuffle.error_output);
}

void test_launch_checks() {
  DeviceArray<float> out(4);
  cudaGetLastError();
  check(launch(1, 1025, nullptr, fill, out.get(), 1.0f, 4) == cudaErrorInvalidConfiguration &&
            cudaGetLastError() == cudaErrorInvalidConfiguration && cudaGetLastError() == cudaSuccess,
        "1025 threads a block: cudaErrorInvalidConfiguration, which cudaGetLastError returns once");
  check(launch(dim3(1, 65536), 32, nullptr, fill, out.get(), 1.0f, 4) == cudaErrorInvalidConfiguration,
        "a grid 65536 blocks high: cudaErrorInvalidConfiguration");
  check(launch(dim3(32, 32, 2), dim3(32, 32, 2), nullptr, fill, out.get(), 1.0f, 4) == cudaErrorInvalidConfiguration,
        "a block of 32 x 32 x 2 threads: cudaErrorInvalidConfiguration");
  check(launch(0, 32, nullptr, fill, out.get(), 1.0f, 4) == cudaErrorInvalidConfiguration,
        "a grid of no blocks: cudaErrorInvalidConfiguration");
  cudaLaunchConfig_t too_much_shared{};
  too_much_shared.gridDim = 1;
  too_much_shared.blockDim = 32;
  too_much_shared.dynamicSmemBytes = (48 << 10) + 4;
  check(cudaLaunchKernelEx(&too_much_shared, fill, out.get(), 1.0f, 4) == cudaErrorInvalidValue,
        "more than 48 KiB of dynamic shared memory without opting in: cudaErrorInvalidValue");
  cudaGetLastError();

  std::vector<float> pinned(4, 0.0f);
  cudaHostRegister(pinned.data(), pinned.size() * sizeof(float), cudaHostRegisterDefault);
  launch(1, 32, nullptr, fill, pinned.data(), 2.0f, 4);
  check(cudaDeviceSynchronize() == cudaSuccess && pinned == std::vector<float>(4, 2.0f),
        "registered host memory is a valid kernel argument");
  cudaHostUnregister(pinned.data());

  const ChildEnd host_pointer = in_child([] {
    std::vector<float> host(4);
    const bool launched = launch(1, 32, nullptr, fill, host.data(), 1.0f, 4) == cudaSuccess;
    const bool faulted = cudaDeviceSynchronize() == cudaErrorIllegalAddress;
    void* later = nullptr;
    const bool sticky = cudaMalloc(&later, 4) == cudaErrorIllegalAddress;
    _exit(launched && faulted && sticky ? 0 : 1);
  });
  check(host_pointer.exit_code == 0 && contains(host_pointer.error_output, "cudaErrorIllegalAddress: launch of ") &&
            contains(host_pointer.error_output, "fill") &&
            contains(host_pointer.error_output, "argument 0 (0x") &&
            contains(host_pointer.error_output, "is not device memory"),
        "a host pointer argument: the launch succeeds, the kernel faults when it runs "
        "(cudaErrorIllegalAddress, sticky):\n" +
            host_pointer.error_output);
}

void test_streams_and_copies() {
  cudaStream_t own = nullptr, other = nullptr, blocking = nullptr;
  cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&blocking, cudaStreamDefault);
  DeviceArray<float> buffer(std::vector<float>(4, 0.0f));
  const std::vector<float> zeros(4, 0.0f), ones(4, 1.0f), twos(4, 2.0f), threes(4, 3.0f);

  launch(1, 32, own, fill, buffer.get(), 1.0f, 4);
  check(buffer.read() == zeros, "a kernel on a non-blocking stream has not run for a copy on the default stream");
  cudaStreamSynchronize(own);
  check(buffer.read() == ones, "cudaStreamSynchronize runs it");

  cudaEvent_t filled = nullptr;
  cudaEventCreateWithFlags(&filled, cudaEventDisableTiming);
  launch(1, 32, own, fill, buffer.get(), 2.0f, 4);
  cudaEventRecord(filled, own);
  cudaStreamWaitEvent(other, filled, 0);
  std::vector<float> host(4);
  cudaMemcpyAsync(host.data(), buffer.get(), buffer.bytes(), cudaMemcpyDeviceToHost, other);
  check(host == twos, "a stream that waits for another's event sees that stream's work before it");
  cudaEventDestroy(filled);

  launch(1, 32, blocking, fill, buffer.get(), 3.0f, 4);
  check(buffer.read() == threes, "the legacy default stream waits for a blocking stream's work");

  std::vector<float> pinned(4, -1.0f);
  cudaHostRegister(pinned.data(), pinned.size() * sizeof(float), cudaHostRegisterDefault);
  cudaMemcpyAsync(pinned.data(), buffer.get(), buffer.bytes(), cudaMemcpyDeviceToHost, own);
  check(pinned == std::vector<float>(4, -1.0f), "a copy into registered memory is queued on its stream");
  cudaStreamSynchronize(own);
  check(pinned == threes, "and done once the stream is waited for");
  cudaHostUnregister(pinned.data());

  check(cudaMemcpyAsync(host.data(), buffer.get(), buffer.bytes() + 4, cudaMemcpyDeviceToHost, own) ==
            cudaErrorInvalidValue,
        "a copy past an allocation's end: cudaErrorInvalidValue");
  check(cudaMemcpyAsync(buffer.get(), host.data(), buffer.bytes(), cudaMemcpyDeviceToHost, own) ==
            cudaErrorInvalidValue,
        "a copy whose kind does not match where its pointers are: cudaErrorInvalidValue");
  check(cudaMemsetAsync(buffer.get() + 1, 0, buffer.bytes(), own) == cudaErrorInvalidValue,
        "a memset past an allocation's end: cudaErrorInvalidValue");
  check(cudaFree(buffer.get() + 1) == cudaErrorInvalidValue, "cudaFree of a pointer inside an allocation: cudaErrorInvalidValue");
  cudaStreamDestroy(other);
  check(cudaStreamSynchronize(other) == cudaErrorInvalidResourceHandle,
        "a destroyed stream: cudaErrorInvalidResourceHandle");
  cudaStreamDestroy(own);
  cudaStreamDestroy(blocking);
  cudaGetLastError();
}

void test_devices() {
  int count = 0;
  unsetenv("CUDA_VISIBLE_DEVICES");
  check(cudaGetDeviceCount(&count) == cudaSuccess && count == 8,
        "without CUDA_VISIBLE_DEVICES, the machine's 8 GPUs (TRAINCTL_CUDA_ON_CPU_GPUS's default)");
  setenv("CUDA_VISIBLE_DEVICES", "2,5", 1);
  cudaDeviceProp properties{};
  check(cudaGetDeviceCount(&count) == cudaSuccess && count == 2 &&
            cudaGetDeviceProperties(&properties, 1) == cudaSuccess && properties.pciBusID == 5 &&
            contains(properties.name, "GPU 5"),
        "CUDA_VISIBLE_DEVICES=2,5: two devices, the second the machine's GPU 5");
  check(cudaSetDevice(2) == cudaErrorInvalidDevice && cudaGetLastError() == cudaErrorInvalidDevice,
        "a device past the visible ones: cudaErrorInvalidDevice");
  setenv("CUDA_VISIBLE_DEVICES", "1,x,3", 1);
  check(cudaGetDeviceCount(&count) == cudaSuccess && count == 1, "CUDA_VISIBLE_DEVICES=1,x,3: up to the first bad entry");
  setenv("TRAINCTL_CUDA_ON_CPU_GPUS", "2", 1);
  setenv("CUDA_VISIBLE_DEVICES", "0,3", 1);
  check(cudaGetDeviceCount(&count) == cudaSuccess && count == 1,
        "on a machine of 2 GPUs, CUDA_VISIBLE_DEVICES=0,3 names one");
  setenv("CUDA_VISIBLE_DEVICES", "", 1);
  check(cudaGetDeviceCount(&count) == cudaErrorNoDevice && count == 0, "CUDA_VISIBLE_DEVICES=\"\": cudaErrorNoDevice");
  cudaGetLastError();
  unsetenv("TRAINCTL_CUDA_ON_CPU_GPUS");
  unsetenv("CUDA_VISIBLE_DEVICES");
}

void test_device_memory() {
  size_t free = 0, total = 0;
  check(cudaMemGetInfo(&free, &total) == cudaSuccess && total == size_t{80} << 30,
        "without TRAINCTL_CUDA_ON_CPU_MEMORY_MIB, an H100's 80 GiB");
  // Room for 1 MiB and more beside what the groups before hold.
  const size_t held = total - free, mebibytes = held / (size_t{1} << 20) + 2;
  setenv("TRAINCTL_CUDA_ON_CPU_MEMORY_MIB", std::to_string(mebibytes).c_str(), 1);
  cudaDeviceProp properties{};
  check(cudaGetDeviceProperties(&properties, 0) == cudaSuccess && properties.totalGlobalMem == mebibytes << 20 &&
            cudaMemGetInfo(&free, &total) == cudaSuccess && total == mebibytes << 20 && free == total - held,
        "TRAINCTL_CUDA_ON_CPU_MEMORY_MIB: totalGlobalMem and cudaMemGetInfo's total, free what is not held");
  void *most = nullptr, *more = nullptr;
  check(cudaMalloc(&most, free - 256) == cudaSuccess, "an allocation up to the device's memory");
  check(cudaMalloc(&more, 512) == cudaErrorMemoryAllocation && more == nullptr &&
            cudaGetLastError() == cudaErrorMemoryAllocation,
        "one past it: cudaErrorMemoryAllocation, as on a GPU");
  cudaFree(most);
  check(cudaMalloc(&more, 512) == cudaSuccess, "the same allocation once memory was freed");
  cudaFree(more);
  unsetenv("TRAINCTL_CUDA_ON_CPU_MEMORY_MIB");
}

// --- cuBLASLt ----------------------------------------------------------------------------------

// A column-major matrix as cuBLASLt's layout describes it.
struct Layout {
  int64_t rows, cols, ld, batch, stride;
  size_t elements() const { return static_cast<size_t>((batch - 1) * stride + (cols - 1) * ld + rows); }
};

struct MatmulCase {
  bool transpose_a, transpose_b;
  int64_t m, n, k, batch;
  int64_t pad;                    // added to every leading dimension
  int64_t stride_gap;             // added to every batch stride
  bool shared_b;                  // B's batch stride 0
  float alpha, beta;
  bool bf16;
};

cublasLtMatrixLayout_t make_layout(cudaDataType_t type, const Layout& layout) {
  cublasLtMatrixLayout_t made = nullptr;
  cublasLtMatrixLayoutCreate(&made, type, static_cast<uint64_t>(layout.rows), static_cast<uint64_t>(layout.cols),
                             layout.ld);
  const auto batch = static_cast<int32_t>(layout.batch);
  cublasLtMatrixLayoutSetAttribute(made, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof(batch));
  cublasLtMatrixLayoutSetAttribute(made, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &layout.stride,
                                   sizeof(layout.stride));
  return made;
}

// Small integers: every product and sum is exact in fp32, in any order.
std::vector<float> small_integers(size_t n, unsigned int seed) {
  std::vector<float> values(n);
  for (float& value : values) {
    seed = seed * 1103515245u + 12345u;
    value = static_cast<float>(static_cast<int>(seed >> 16) % 7 - 3);
  }
  return values;
}

struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  ~Plan() {
    cublasLtMatmulDescDestroy(desc);
    for (cublasLtMatrixLayout_t layout : {a, b, c}) cublasLtMatrixLayoutDestroy(layout);
  }
};

void test_cublaslt_case(cublasLtHandle_t handle, const MatmulCase& matmul) {
  const Layout a{matmul.transpose_a ? matmul.k : matmul.m, matmul.transpose_a ? matmul.m : matmul.k, 0, matmul.batch, 0};
  Layout la = a, lb{matmul.transpose_b ? matmul.n : matmul.k, matmul.transpose_b ? matmul.k : matmul.n, 0,
                    matmul.batch, 0},
         lc{matmul.m, matmul.n, 0, matmul.batch, 0};
  for (Layout* layout : {&la, &lb, &lc}) {
    layout->ld = layout->rows + matmul.pad;
    layout->stride = layout->ld * layout->cols + matmul.stride_gap;
  }
  if (matmul.shared_b) lb.stride = 0;
  const std::vector<float> host_a = small_integers(la.elements(), 1), host_b = small_integers(lb.elements(), 2),
                           host_c = small_integers(lc.elements(), 3);
  std::vector<float> expected = host_c;  // D starts as a copy of C: the gaps stay as they were
  for (int64_t i = 0; i < matmul.batch; ++i)
    for (int64_t col = 0; col < matmul.n; ++col)
      for (int64_t row = 0; row < matmul.m; ++row) {
        float sum = 0.0f;
        for (int64_t l = 0; l < matmul.k; ++l) {
          const float x = host_a[static_cast<size_t>(i * la.stride + (matmul.transpose_a ? row * la.ld + l : l * la.ld + row))];
          const float y = host_b[static_cast<size_t>(i * lb.stride + (matmul.transpose_b ? l * lb.ld + col : col * lb.ld + l))];
          sum += x * y;
        }
        const size_t at = static_cast<size_t>(i * lc.stride + col * lc.ld + row);
        expected[at] = matmul.alpha * sum + matmul.beta * host_c[at];
      }

  const cudaDataType_t input = matmul.bf16 ? CUDA_R_16BF : CUDA_R_32F;
  DeviceArray<float> c(host_c), d(host_c);
  DeviceArray<float> a32(host_a), b32(host_b);
  std::vector<__nv_bfloat16> a16(host_a.size()), b16(host_b.size());
  std::transform(host_a.begin(), host_a.end(), a16.begin(), [](float x) { return __float2bfloat16_rn(x); });
  std::transform(host_b.begin(), host_b.end(), b16.begin(), [](float x) { return __float2bfloat16_rn(x); });
  DeviceArray<__nv_bfloat16> a_bf16(a16), b_bf16(b16);
  const void* device_a = matmul.bf16 ? static_cast<const void*>(a_bf16.get()) : a32.get();
  const void* device_b = matmul.bf16 ? static_cast<const void*>(b_bf16.get()) : b32.get();

  Plan plan;
  cublasLtMatmulDescCreate(&plan.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  const cublasOperation_t op_a = matmul.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = matmul.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a));
  cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b));
  plan.a = make_layout(input, la);
  plan.b = make_layout(input, lb);
  plan.c = make_layout(CUDA_R_32F, lc);
  cublasLtMatmulPreference_t preference = nullptr;
  cublasLtMatmulPreferenceCreate(&preference);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t heuristic = cublasLtMatmulAlgoGetHeuristic(handle, plan.desc, plan.a, plan.b, plan.c, plan.c,
                                                                  preference, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(preference);
  const cublasStatus_t status =
      cublasLtMatmul(handle, plan.desc, &matmul.alpha, device_a, plan.a, device_b, plan.b, &matmul.beta, c.get(),
                     plan.c, d.get(), plan.c, &result.algo, nullptr, 0, nullptr);
  char name[200];
  std::snprintf(name, sizeof(name), "cublasLtMatmul %c%c m=%ld n=%ld k=%ld batch=%ld pad=%ld%s alpha=%g beta=%g%s",
                matmul.transpose_a ? 'T' : 'N', matmul.transpose_b ? 'T' : 'N', static_cast<long>(matmul.m),
                static_cast<long>(matmul.n), static_cast<long>(matmul.k), static_cast<long>(matmul.batch),
                static_cast<long>(matmul.pad), matmul.shared_b ? " (B shared)" : "", matmul.alpha, matmul.beta,
                matmul.bf16 ? " bf16" : "");
  check(heuristic == CUBLAS_STATUS_SUCCESS && found == 1 && status == CUBLAS_STATUS_SUCCESS && d.read() == expected,
        std::string(name) + ": D = alpha op(A) op(B) + beta C, exactly, C untouched, padding kept");
}

void test_cublaslt() {
  cublasLtHandle_t handle = nullptr;
  cublasLtCreate(&handle);
  for (const bool bf16 : {false, true})
    for (const bool transpose_a : {false, true})
      for (const bool transpose_b : {false, true}) {
        test_cublaslt_case(handle, {transpose_a, transpose_b, 5, 7, 3, 1, 0, 0, false, 1.0f, 0.0f, bf16});
        test_cublaslt_case(handle, {transpose_a, transpose_b, 4, 6, 9, 3, 2, 5, false, 0.5f, -2.0f, bf16});
        test_cublaslt_case(handle, {transpose_a, transpose_b, 3, 2, 4, 4, 1, 0, true, 2.0f, 1.0f, bf16});
      }

  // A plan made for 256-byte aligned operands, used on an A four bytes off.
  Plan plan;
  cublasLtMatmulDescCreate(&plan.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  plan.a = make_layout(CUDA_R_32F, {4, 4, 4, 1, 0});
  plan.b = make_layout(CUDA_R_32F, {4, 4, 4, 1, 0});
  plan.c = make_layout(CUDA_R_32F, {4, 4, 4, 1, 0});
  cublasLtMatmulPreference_t preference = nullptr;
  cublasLtMatmulPreferenceCreate(&preference);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  cublasLtMatmulAlgoGetHeuristic(handle, plan.desc, plan.a, plan.b, plan.c, plan.c, preference, 1, &result, &found);
  DeviceArray<float> a(17), b(16), c(16);
  const float one = 1.0f, zero = 0.0f;
  check(cublasLtMatmul(handle, plan.desc, &one, a.get() + 1, plan.a, b.get(), plan.b, &zero, c.get(), plan.c,
                       c.get(), plan.c, &result.algo, nullptr, 0, nullptr) == CUBLAS_STATUS_NOT_SUPPORTED,
        "an operand less aligned than the plan's preference promised: CUBLAS_STATUS_NOT_SUPPORTED");
  const uint32_t four = 4;
  cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &four, sizeof(four));
  cublasLtMatmulAlgoGetHeuristic(handle, plan.desc, plan.a, plan.b, plan.c, plan.c, preference, 1, &result, &found);
  check(cublasLtMatmul(handle, plan.desc, &one, a.get() + 1, plan.a, b.get(), plan.b, &zero, c.get(), plan.c,
                       c.get(), plan.c, &result.algo, nullptr, 0, nullptr) == CUBLAS_STATUS_SUCCESS,
        "the same operand with a plan for 4-byte alignment: accepted");
  cublasLtMatrixLayout_t wrong_k = make_layout(CUDA_R_32F, {5, 4, 5, 1, 0});
  check(cublasLtMatmulAlgoGetHeuristic(handle, plan.desc, plan.a, wrong_k, plan.c, plan.c, preference, 1, &result,
                                       &found) == CUBLAS_STATUS_INVALID_VALUE,
        "B with 5 rows for A's 4 columns: CUBLAS_STATUS_INVALID_VALUE");
  cublasLtMatrixLayoutDestroy(wrong_k);
  const cublasLtEpilogue_t relu = CUBLASLT_EPILOGUE_RELU;
  cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &relu, sizeof(relu));
  check(cublasLtMatmulAlgoGetHeuristic(handle, plan.desc, plan.a, plan.b, plan.c, plan.c, preference, 1, &result,
                                       &found) == CUBLAS_STATUS_NOT_SUPPORTED,
        "a ReLU epilogue, which nothing here uses: CUBLAS_STATUS_NOT_SUPPORTED");
  cublasLtMatmulPreferenceDestroy(preference);
  cublasLtDestroy(handle);
  cudaDeviceSynchronize();
}

// --- cuBLASLt's epilogues ------------------------------------------------------------------------

const char* type_name(cudaDataType_t type) { return type == CUDA_R_16BF ? "bf16" : "fp32"; }

// Device memory of type fp32 or bf16 holding `values` (exact in bf16 where the tests use it).
class TypedArray {
 public:
  TypedArray(cudaDataType_t type, const std::vector<float>& values) : type_(type), bytes_(encode(type, values)) {}
  void* get() const { return bytes_.get(); }
  std::vector<float> read() const {
    const std::vector<unsigned char> bytes = bytes_.read();
    std::vector<float> values(bytes.size() / (type_ == CUDA_R_16BF ? 2 : 4));
    for (size_t i = 0; i < values.size(); ++i) {
      if (type_ == CUDA_R_16BF) {
        __nv_bfloat16 value;
        std::memcpy(&value, bytes.data() + 2 * i, 2);
        values[i] = __bfloat162float(value);
      } else {
        std::memcpy(&values[i], bytes.data() + 4 * i, 4);
      }
    }
    return values;
  }

 private:
  static std::vector<unsigned char> encode(cudaDataType_t type, const std::vector<float>& values) {
    std::vector<unsigned char> bytes(values.size() * (type == CUDA_R_16BF ? 2 : 4));
    for (size_t i = 0; i < values.size(); ++i) {
      if (type == CUDA_R_16BF) {
        const __nv_bfloat16 value = __float2bfloat16_rn(values[i]);
        std::memcpy(bytes.data() + 2 * i, &value, 2);
      } else {
        std::memcpy(bytes.data() + 4 * i, &values[i], 4);
      }
    }
    return bytes;
  }
  cudaDataType_t type_;
  DeviceArray<unsigned char> bytes_;
};

template <typename Value>
void set_attribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute, const Value& value) {
  cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof(value));
}

struct Tolerance {
  double abs, rel;
};
constexpr Tolerance kExactly{0.0, 0.0};
// fp32 results of tanh, against double: a few units in the last place of values up to ~16.
constexpr Tolerance kFp32Gelu{1e-4, 1e-5};
// bf16 results: one unit in the last place (2^-7 of the value) covers rounding an fp32 result
// that differs from double's in its last bits to the neighbour of the exact result's.
constexpr Tolerance kBf16Gelu{1e-3, 1.0 / 128};

// Whether every element is within abs + rel * |expected|; the text names the worst element.
void check_close(const std::string& what, const std::vector<float>& got, const std::vector<double>& expected,
                 Tolerance tolerance) {
  bool passed = got.size() == expected.size();
  size_t worst = 0;
  double worst_ratio = -1.0;
  for (size_t i = 0; passed && i < got.size(); ++i) {
    const double error = std::fabs(static_cast<double>(got[i]) - expected[i]);
    const double allowed = tolerance.abs + tolerance.rel * std::fabs(expected[i]);
    const double ratio = error == 0.0 ? 0.0 : allowed == 0.0 || std::isnan(error) ? INFINITY : error / allowed;
    if (ratio > worst_ratio) {
      worst_ratio = ratio;
      worst = i;
    }
  }
  passed = passed && worst_ratio <= 1.0;
  char worst_text[160] = "";
  if (got.size() == expected.size() && !got.empty())
    std::snprintf(worst_text, sizeof(worst_text), " (worst: element %zu, %.9g for %.9g, tolerance %g + %g |x|)", worst,
                  static_cast<double>(got[worst]), expected[worst], tolerance.abs, tolerance.rel);
  check(passed, what + worst_text);
}

double gelu(double x) { return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }

double gelu_gradient(double x) {
  const double inner = std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
  const double t = std::tanh(inner);
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * std::sqrt(2.0 / M_PI) * (1.0 + 3.0 * 0.044715 * x * x);
}

// The shape of every epilogue case: m != n, so that a bias along D's columns reads other values
// (m > n, so that it stays inside the vector); C and D padded to leading dimension m + 2, the
// aux matrix to 16 (divisible by 8, as cuBLASLt requires).
constexpr int64_t kM = 6, kN = 4, kK = 5, kAuxLd = 16;
constexpr float kUnwritten = 100.0f;  // what D, aux and bias gradients hold before, exact in bf16

struct EpilogueCase {
  cublasLtEpilogue_t epilogue;
  const char* name;
  bool transpose_a, transpose_b;
  cudaDataType_t inputs, outputs;  // of A and B; of C, D, the bias and the aux matrix
};

// The epilogue against the documentation's definition, computed here in double from
// x = alpha op(A) op(B) + beta C (exact in fp32: multiples of 1/4 below 64).
void test_epilogue_case(cublasLtHandle_t handle, const EpilogueCase& e) {
  const cublasLtEpilogue_t epilogue = e.epilogue;
  const bool adds_bias = epilogue == CUBLASLT_EPILOGUE_BIAS || epilogue == CUBLASLT_EPILOGUE_GELU_BIAS ||
                         epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
  const bool applies_gelu = epilogue == CUBLASLT_EPILOGUE_GELU || epilogue == CUBLASLT_EPILOGUE_GELU_AUX ||
                            epilogue == CUBLASLT_EPILOGUE_GELU_BIAS || epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
  const bool stores_aux = epilogue == CUBLASLT_EPILOGUE_GELU_AUX || epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
  const bool gelu_backward = epilogue == CUBLASLT_EPILOGUE_DGELU;
  const bool gradient_a = epilogue == CUBLASLT_EPILOGUE_BGRADA, gradient_b = epilogue == CUBLASLT_EPILOGUE_BGRADB;
  const bool uses_bias = adds_bias || gradient_a || gradient_b, uses_aux = stores_aux || gelu_backward;

  Layout la{e.transpose_a ? kK : kM, e.transpose_a ? kM : kK, 0, 1, 0},
      lb{e.transpose_b ? kN : kK, e.transpose_b ? kK : kN, 0, 1, 0}, lc{kM, kN, kM + 2, 1, 0};
  la.ld = la.rows + 1;
  lb.ld = lb.rows + 3;
  const float alpha = 0.25f, beta = -0.5f;
  const std::vector<float> host_a = small_integers(la.elements(), 11), host_b = small_integers(lb.elements(), 12),
                           host_c = small_integers(lc.elements(), 13);
  const int64_t bias_length = gradient_b ? kN : kM;
  const auto bias_elements = static_cast<size_t>(bias_length);
  const std::vector<float> host_bias =
      adds_bias ? small_integers(bias_elements, 14) : std::vector<float>(bias_elements, kUnwritten);
  const size_t aux_elements = static_cast<size_t>((kN - 1) * kAuxLd + kM);
  std::vector<float> host_aux(aux_elements, kUnwritten);
  if (gelu_backward) {
    host_aux = small_integers(aux_elements, 15);
    for (float& value : host_aux) value *= 0.5f;
  }
  const auto op_a = [&](int64_t row, int64_t l) {
    return host_a[static_cast<size_t>(e.transpose_a ? row * la.ld + l : l * la.ld + row)];
  };
  const auto op_b = [&](int64_t l, int64_t col) {
    return host_b[static_cast<size_t>(e.transpose_b ? l * lb.ld + col : col * lb.ld + l)];
  };

  std::vector<double> expected_d(lc.elements(), kUnwritten), expected_aux(host_aux.begin(), host_aux.end()),
      expected_bias(host_bias.begin(), host_bias.end());
  for (int64_t col = 0; col < kN; ++col)
    for (int64_t row = 0; row < kM; ++row) {
      float sum = 0.0f;
      for (int64_t l = 0; l < kK; ++l) sum += op_a(row, l) * op_b(l, col);
      const size_t at = static_cast<size_t>(col * lc.ld + row), aux_at = static_cast<size_t>(col * kAuxLd + row);
      double x = alpha * sum + beta * host_c[at];
      if (adds_bias) x += host_bias[static_cast<size_t>(row)];
      if (stores_aux) expected_aux[aux_at] = x;
      if (applies_gelu) x = gelu(x);
      if (gelu_backward) x *= gelu_gradient(host_aux[aux_at]);
      expected_d[at] = x;
    }
  if (gradient_a)
    for (int64_t row = 0; row < kM; ++row) {
      expected_bias[static_cast<size_t>(row)] = 0.0;
      for (int64_t l = 0; l < kK; ++l) expected_bias[static_cast<size_t>(row)] += op_a(row, l);
    }
  if (gradient_b)
    for (int64_t col = 0; col < kN; ++col) {
      expected_bias[static_cast<size_t>(col)] = 0.0;
      for (int64_t l = 0; l < kK; ++l) expected_bias[static_cast<size_t>(col)] += op_b(l, col);
    }

  const TypedArray a(e.inputs, host_a), b(e.inputs, host_b), c(e.outputs, host_c),
      d(e.outputs, std::vector<float>(lc.elements(), kUnwritten)), bias(e.outputs, host_bias), aux(e.outputs, host_aux);
  Plan plan;
  cublasLtMatmulDescCreate(&plan.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  set_attribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, e.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N);
  set_attribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, e.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N);
  set_attribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue);
  if (uses_bias) set_attribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias.get());
  if (uses_aux) {
    set_attribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, aux.get());
    set_attribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, kAuxLd);
  }
  plan.a = make_layout(e.inputs, la);
  plan.b = make_layout(e.inputs, lb);
  plan.c = make_layout(e.outputs, lc);
  cublasLtMatmulPreference_t preference = nullptr;
  cublasLtMatmulPreferenceCreate(&preference);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t heuristic = cublasLtMatmulAlgoGetHeuristic(handle, plan.desc, plan.a, plan.b, plan.c, plan.c,
                                                                  preference, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(preference);
  const cublasStatus_t status = cublasLtMatmul(handle, plan.desc, &alpha, a.get(), plan.a, b.get(), plan.b, &beta,
                                               c.get(), plan.c, d.get(), plan.c, &result.algo, nullptr, 0, nullptr);
  const std::string name = std::string("epilogue ") + e.name + " " + (e.transpose_a ? "T" : "N") +
                           (e.transpose_b ? "T" : "N") + " A,B " + type_name(e.inputs) + " C,D " +
                           type_name(e.outputs) + ": ";
  check(heuristic == CUBLAS_STATUS_SUCCESS && found == 1 && status == CUBLAS_STATUS_SUCCESS,
        name + "the heuristic and the matmul accept it");
  const bool exact = !applies_gelu && !gelu_backward;
  check_close(name + "D, padding kept" + (exact ? ", exactly" : ""), d.read(), expected_d,
              exact ? kExactly : e.outputs == CUDA_R_16BF ? kBf16Gelu : kFp32Gelu);
  if (stores_aux)
    check_close(name + "aux = the GELU's input, padding kept, exactly", aux.read(), expected_aux, kExactly);
  if (gelu_backward) check_close(name + "aux read, not written", aux.read(), expected_aux, kExactly);
  if (gradient_a || gradient_b)
    check_close(name + "the bias gradient, exactly", bias.read(), expected_bias, kExactly);
  else if (adds_bias)
    check_close(name + "the bias read, not written", bias.read(), expected_bias, kExactly);
}

void test_cublaslt_epilogues() {
  cublasLtHandle_t handle = nullptr;
  cublasLtCreate(&handle);
  struct Types {
    cudaDataType_t inputs, outputs;
  };
  constexpr Types kTypes[] = {{CUDA_R_32F, CUDA_R_32F}, {CUDA_R_16BF, CUDA_R_16BF}, {CUDA_R_16BF, CUDA_R_32F}};
  struct Named {
    cublasLtEpilogue_t epilogue;
    const char* name;
  };
  constexpr Named kForward[] = {
      {CUBLASLT_EPILOGUE_BIAS, "BIAS"},
      {CUBLASLT_EPILOGUE_GELU, "GELU"},
      {CUBLASLT_EPILOGUE_GELU_BIAS, "GELU_BIAS"},
      {CUBLASLT_EPILOGUE_GELU_AUX, "GELU_AUX"},
      {CUBLASLT_EPILOGUE_GELU_AUX_BIAS, "GELU_AUX_BIAS"},
      {CUBLASLT_EPILOGUE_DGELU, "DGELU"},
  };
  constexpr Named kGradients[] = {{CUBLASLT_EPILOGUE_BGRADA, "BGRADA"}, {CUBLASLT_EPILOGUE_BGRADB, "BGRADB"}};
  for (const Types& types : kTypes) {
    for (const Named& named : kForward)
      for (const bool transposed : {false, true})
        test_epilogue_case(handle, {named.epilogue, named.name, transposed, transposed, types.inputs, types.outputs});
    for (const Named& named : kGradients)
      for (const bool transpose_a : {false, true})
        for (const bool transpose_b : {false, true})
          test_epilogue_case(handle,
                             {named.epilogue, named.name, transpose_a, transpose_b, types.inputs, types.outputs});
  }
  cublasLtDestroy(handle);
}

// What cuBLASLt's heuristic and matmul answer for a 6 x 4 x 5 product (C apart from D) with
// the descriptor as `configure` leaves it, and what waiting for the matmul then returns; the
// matmul uses the heuristic's algorithm, or a plan for the other pointers `plan_pointers` sets
// first.
struct Answers {
  cublasStatus_t heuristic, matmul;
  cudaError_t synchronized;
};
using Configure = std::function<void(cublasLtMatmulDesc_t)>;

Answers answers(cublasLtHandle_t handle, cudaDataType_t inputs, cudaDataType_t outputs, int32_t batch,
                const Configure& configure, const Configure& plan_pointers = nullptr) {
  const Layout la{kM, kK, kM, batch, kM * kK}, lb{kK, kN, kK, batch, kK * kN}, lc{kM, kN, kM, batch, kM * kN};
  const TypedArray a(inputs, std::vector<float>(la.elements(), 1.0f)),
      b(inputs, std::vector<float>(lb.elements(), 1.0f)), c(outputs, std::vector<float>(lc.elements())),
      d(outputs, std::vector<float>(lc.elements()));
  Plan plan;
  cublasLtMatmulDescCreate(&plan.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  plan.a = make_layout(inputs, la);
  plan.b = make_layout(inputs, lb);
  plan.c = make_layout(outputs, lc);
  configure(plan.desc);
  if (plan_pointers) plan_pointers(plan.desc);
  cublasLtMatmulPreference_t preference = nullptr;
  cublasLtMatmulPreferenceCreate(&preference);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  Answers answered{};
  answered.heuristic = cublasLtMatmulAlgoGetHeuristic(handle, plan.desc, plan.a, plan.b, plan.c, plan.c, preference, 1,
                                                      &result, &found);
  cublasLtMatmulPreferenceDestroy(preference);
  if (plan_pointers) configure(plan.desc);
  const float one = 1.0f;
  answered.matmul = cublasLtMatmul(handle, plan.desc, &one, a.get(), plan.a, b.get(), plan.b, &one, c.get(), plan.c,
                                   d.get(), plan.c, &result.algo, nullptr, 0, nullptr);
  answered.synchronized = cudaDeviceSynchronize();
  return answered;
}

bool accepted(const Answers& answered) {
  return answered.matmul == CUBLAS_STATUS_SUCCESS && answered.synchronized == cudaSuccess;
}

// Both the heuristic and the matmul answer `status`; a product accepted also runs.
bool both(const Answers& answered, cublasStatus_t status) {
  return answered.heuristic == status && answered.matmul == status &&
         (status != CUBLAS_STATUS_SUCCESS || answered.synchronized == cudaSuccess);
}

void test_cublaslt_epilogue_refusals() {
  cublasLtHandle_t handle = nullptr;
  cublasLtCreate(&handle);
  const TypedArray bias(CUDA_R_32F, std::vector<float>(kM + 2)),
      aux(CUDA_R_32F, std::vector<float>(static_cast<size_t>((kN - 1) * kAuxLd + kM + 1)));
  const auto epilogue = [](cublasLtEpilogue_t chosen) -> Configure {
    return [chosen](cublasLtMatmulDesc_t desc) { set_attribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, chosen); };
  };
  const auto with_bias = [](const void* pointer) -> Configure {
    return [pointer](cublasLtMatmulDesc_t desc) {
      set_attribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_BIAS);
      set_attribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, pointer);
    };
  };
  const auto with_aux = [](const void* pointer, int64_t ld) -> Configure {
    return [pointer, ld](cublasLtMatmulDesc_t desc) {
      set_attribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_GELU_AUX);
      set_attribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, pointer);
      set_attribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, ld);
    };
  };
  const auto none = [](cublasLtMatmulDesc_t) {};

  check(both(answers(handle, CUDA_R_32F, CUDA_R_16BF, 1, none), CUBLAS_STATUS_NOT_SUPPORTED),
        "bf16 C and D with fp32 A and B: CUBLAS_STATUS_NOT_SUPPORTED from the heuristic and the matmul");
  check(both(answers(handle, CUDA_R_16BF, CUDA_R_16BF, 1, none), CUBLAS_STATUS_SUCCESS) &&
            both(answers(handle, CUDA_R_16BF, CUDA_R_32F, 1, none), CUBLAS_STATUS_SUCCESS),
        "bf16 A and B with bf16 or fp32 C and D: accepted");
  check(both(answers(handle, CUDA_R_32F, CUDA_R_32F, 1, with_aux(aux.get(), 12)), CUBLAS_STATUS_INVALID_VALUE) &&
            both(answers(handle, CUDA_R_32F, CUDA_R_32F, 1, with_aux(aux.get(), 0)), CUBLAS_STATUS_INVALID_VALUE),
        "an aux leading dimension not divisible by 8 (12), or below D's 6 rows (0): CUBLAS_STATUS_INVALID_VALUE");
  check(both(answers(handle, CUDA_R_32F, CUDA_R_32F, 1, with_aux(aux.get(), 8)), CUBLAS_STATUS_SUCCESS),
        "an aux leading dimension of 8 for 6 rows: accepted");
  const auto bias_of_type = [&](cudaDataType_t type) {
    return [&, type](cublasLtMatmulDesc_t desc) {
      with_bias(bias.get())(desc);
      set_attribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, static_cast<int32_t>(type));
    };
  };
  check(both(answers(handle, CUDA_R_16BF, CUDA_R_16BF, 1, bias_of_type(CUDA_R_32F)), CUBLAS_STATUS_NOT_SUPPORTED) &&
            both(answers(handle, CUDA_R_16BF, CUDA_R_32F, 1, bias_of_type(CUDA_R_16BF)), CUBLAS_STATUS_NOT_SUPPORTED),
        "a bias type set to other than D's: CUBLAS_STATUS_NOT_SUPPORTED");
  check(both(answers(handle, CUDA_R_16BF, CUDA_R_16BF, 1, bias_of_type(CUDA_R_16BF)), CUBLAS_STATUS_SUCCESS),
        "a bias type set to D's: accepted");
  const auto aux_of_type = [&](cudaDataType_t type) {
    return [&, type](cublasLtMatmulDesc_t desc) {
      with_aux(aux.get(), kAuxLd)(desc);
      set_attribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, static_cast<int32_t>(type));
    };
  };
  check(both(answers(handle, CUDA_R_32F, CUDA_R_32F, 1, aux_of_type(CUDA_R_16BF)), CUBLAS_STATUS_NOT_SUPPORTED),
        "an aux type set to other than D's: CUBLAS_STATUS_NOT_SUPPORTED");
  check(both(answers(handle, CUDA_R_32F, CUDA_R_32F, 2, with_bias(bias.get())), CUBLAS_STATUS_NOT_SUPPORTED) &&
            both(answers(handle, CUDA_R_32F, CUDA_R_32F, 2, none), CUBLAS_STATUS_SUCCESS),
        "an epilogue with batch count 2: CUBLAS_STATUS_NOT_SUPPORTED (the same product without one is accepted)");
  check(both(answers(handle, CUDA_R_32F, CUDA_R_32F, 1, epilogue(CUBLASLT_EPILOGUE_RELU_BIAS)),
             CUBLAS_STATUS_NOT_SUPPORTED) &&
            both(answers(handle, CUDA_R_32F, CUDA_R_32F, 1, epilogue(CUBLASLT_EPILOGUE_DGELU_BGRAD)),
                 CUBLAS_STATUS_NOT_SUPPORTED),
        "RELU_BIAS and DGELU_BGRAD: CUBLAS_STATUS_NOT_SUPPORTED");

  const Answers no_bias = answers(handle, CUDA_R_32F, CUDA_R_32F, 1, epilogue(CUBLASLT_EPILOGUE_BIAS));
  const Answers no_aux = answers(handle, CUDA_R_32F, CUDA_R_32F, 1, [](cublasLtMatmulDesc_t desc) {
    set_attribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_DGELU);
    set_attribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, kAuxLd);
  });
  check(no_bias.heuristic == CUBLAS_STATUS_SUCCESS && no_bias.matmul == CUBLAS_STATUS_INVALID_VALUE &&
            no_aux.heuristic == CUBLAS_STATUS_SUCCESS && no_aux.matmul == CUBLAS_STATUS_INVALID_VALUE,
        "no bias pointer for BIAS, no aux pointer for DGELU: the heuristic plans, the matmul refuses "
        "(CUBLAS_STATUS_INVALID_VALUE)");

  // The heuristic takes the bias and aux pointers' alignment from the descriptor (256 bytes for
  // an allocation's start); the matmul runs with one 4 bytes further.
  const auto* bias_base = static_cast<const float*>(bias.get());
  const auto* aux_base = static_cast<const float*>(aux.get());
  check(answers(handle, CUDA_R_32F, CUDA_R_32F, 1, with_bias(bias_base + 1), with_bias(bias_base)).matmul ==
                CUBLAS_STATUS_NOT_SUPPORTED &&
            answers(handle, CUDA_R_32F, CUDA_R_32F, 1, with_aux(aux_base + 1, kAuxLd), with_aux(aux_base, kAuxLd))
                    .matmul == CUBLAS_STATUS_NOT_SUPPORTED,
        "a bias or aux pointer less aligned than the one the heuristic saw: CUBLAS_STATUS_NOT_SUPPORTED");
  check(accepted(answers(handle, CUDA_R_32F, CUDA_R_32F, 1, with_bias(bias_base + 1))) &&
            accepted(answers(handle, CUDA_R_32F, CUDA_R_32F, 1, with_bias(bias_base + 2), with_bias(bias_base + 1))),
        "a bias pointer as aligned as the heuristic saw, or more: accepted");

  // A bias vector or aux matrix one element short: the matmul faults when it runs.
  const auto short_by_one = [&](bool aux_matrix) {
    return in_child([&] {
      const size_t elements = aux_matrix ? static_cast<size_t>((kN - 1) * kAuxLd + kM - 1) : kM - 1;
      const TypedArray short_buffer(CUDA_R_32F, std::vector<float>(elements));
      const Configure configure = aux_matrix ? with_aux(short_buffer.get(), kAuxLd) : with_bias(short_buffer.get());
      const Answers answered = answers(handle, CUDA_R_32F, CUDA_R_32F, 1, configure);
      _exit(answered.matmul == CUBLAS_STATUS_SUCCESS && answered.synchronized == cudaErrorIllegalAddress ? 0 : 1);
    });
  };
  const ChildEnd short_bias = short_by_one(false), short_aux = short_by_one(true);
  check(short_bias.exit_code == 0 &&
            contains(short_bias.error_output, "cudaErrorIllegalAddress: cublasLtMatmul: the bias vector's 24 bytes") &&
            short_aux.exit_code == 0 &&
            contains(short_aux.error_output, "cudaErrorIllegalAddress: cublasLtMatmul: the aux matrix's 216 bytes"),
        "a bias vector or aux matrix one element short of D's rows: the matmul faults when it runs "
        "(cudaErrorIllegalAddress, sticky):\n" +
            short_bias.error_output + short_aux.error_output);
  cublasLtDestroy(handle);
}

// --- activity -----------------------------------------------------------------------------------

void test_activity() {
  using cuda_on_cpu::Activity;
  using cuda_on_cpu::activity;
  // Every earlier group freed what it allocated, so that the peak grows by what is held at once.
  const int64_t peak = activity().peak_device_bytes;
  void *first = nullptr, *second = nullptr, *third = nullptr;
  const auto bytes = static_cast<size_t>(peak + 1000);
  cudaMalloc(&first, bytes);
  cudaMalloc(&second, 3000);
  cudaFree(first);
  cudaMalloc(&third, bytes + 500);
  cudaFree(second);
  cudaFree(third);
  check(activity().peak_device_bytes == peak + 1000 + 3000 + 500,
        "peak_device_bytes: the most cudaMalloc'd bytes held at once (" + std::to_string(activity().peak_device_bytes) +
            " after holding " + std::to_string(bytes) + ", then 3000 and " + std::to_string(bytes + 500) + ")");

  cudaStream_t stream = nullptr, gone = nullptr;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&gone, cudaStreamNonBlocking);
  cudaStreamDestroy(gone);
  cudaEvent_t event = nullptr;
  cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
  DeviceArray<float> device(64), other(64);
  std::vector<float> pinned(64), pageable(64);
  cudaHostRegister(pinned.data(), pinned.size() * sizeof(float), cudaHostRegisterDefault);
  const size_t size = device.bytes();
  cublasLtHandle_t handle = nullptr;
  cublasLtCreate(&handle);
  Plan plan;
  cublasLtMatmulDescCreate(&plan.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  plan.a = make_layout(CUDA_R_32F, {8, 8, 8, 1, 0});
  cublasLtMatmulPreference_t preference = nullptr;
  cublasLtMatmulPreferenceCreate(&preference);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  cublasLtMatmulAlgoGetHeuristic(handle, plan.desc, plan.a, plan.a, plan.a, plan.a, preference, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(preference);
  const float one = 1.0f;
  const auto matmul = [&](cudaStream_t on) {
    return cublasLtMatmul(handle, plan.desc, &one, device.get(), plan.a, device.get(), plan.a, &one, other.get(),
                          plan.a, other.get(), plan.a, &result.algo, nullptr, 0, on);
  };
  cudaGetLastError();

  const Activity before = activity();
  launch(1, 32, stream, fill, device.get(), 1.0f, 64);                                 // launch 1
  cudaMemsetAsync(other.get(), 0, size, stream);                                       // launch 2
  cudaMemcpyAsync(other.get(), device.get(), size, cudaMemcpyDeviceToDevice, stream);  // launch 3
  cudaMemcpyAsync(device.get(), pinned.data(), size, cudaMemcpyHostToDevice, stream);  // an upload
  cudaStreamSynchronize(stream);                                                       // upload wait 1
  cudaMemcpyAsync(device.get(), pinned.data(), size, cudaMemcpyHostToDevice, stream);  // an upload
  cudaEventRecord(event, stream);
  launch(1, 32, stream, fill, other.get(), 2.0f, 64);  // launch 4, after the event
  cudaEventSynchronize(event);                         // upload wait 2: what the event follows
  cudaStreamSynchronize(stream);                       // host sync 1: the launch last
  cudaStreamSynchronize(stream);                       // host sync 2: nothing pending
  matmul(stream);                                      // blas call 1
  cudaMemcpyAsync(pageable.data(), other.get(), size, cudaMemcpyDeviceToHost, stream);  // host sync 3
  cudaMemcpyAsync(pinned.data(), other.get(), size, cudaMemcpyDeviceToHost, stream);    // queued download
  cudaMemcpyAsync(pinned.data(), pageable.data(), size, cudaMemcpyHostToHost, stream);  // host sync 4
  cudaDeviceSynchronize();                                                              // host sync 5
  cudaEventRecord(event, stream);
  cudaEventSynchronize(event);  // host sync 6
  // Refused before they queue or wait: none counts.
  launch(1, 1025, stream, fill, device.get(), 1.0f, 64);
  cudaStreamSynchronize(gone);
  cudaMemcpyAsync(pageable.data(), other.get(), size + 4, cudaMemcpyDeviceToHost, stream);
  cudaMemsetAsync(other.get(), 0, 0, stream);
  matmul(gone);
  const Activity after = activity();
  const auto delta = [](int64_t later, int64_t earlier) { return std::to_string(later - earlier); };
  check(after.kernel_launches - before.kernel_launches == 4 && after.blas_calls - before.blas_calls == 1 &&
            after.host_syncs - before.host_syncs == 6 && after.upload_waits - before.upload_waits == 2,
        "activity: 4 launches (a kernel, a memset, a device-to-device copy, a kernel), 1 matmul, 6 host syncs, "
        "2 upload waits; refused calls count nothing (got " +
            delta(after.kernel_launches, before.kernel_launches) + ", " + delta(after.blas_calls, before.blas_calls) +
            ", " + delta(after.host_syncs, before.host_syncs) + ", " + delta(after.upload_waits, before.upload_waits) +
            ")");
  cudaGetLastError();
  cudaEventDestroy(event);
  cudaStreamDestroy(stream);
  cudaHostUnregister(pinned.data());
  cublasLtDestroy(handle);
}

void test_nccl_needs_mpi() {
  ncclUniqueId id{};
  ncclComm_t comm = nullptr;
  check(ncclGetUniqueId(&id) == ncclSuccess && ncclCommInitRank(&comm, 1, id, 0) == ncclInvalidUsage,
        "NCCL over MPI refuses to start before MPI_Init: ncclInvalidUsage");
}

constexpr Group kGroups[] = {
    {"schedules", test_schedules},
    {"barriers", test_barriers_and_shared_memory},
    {"warps", test_warp_operations},
    {"deadlocks", test_deadlocks},
    {"launches", test_launch_checks},
    {"streams", test_streams_and_copies},
    {"devices", test_devices},
    {"device_memory", test_device_memory},
    {"cublaslt", test_cublaslt},
    {"epilogues", test_cublaslt_epilogues},
    {"epilogue_refusals", test_cublaslt_epilogue_refusals},
    {"activity", test_activity},
    {"nccl", test_nccl_needs_mpi},
};

}  // namespace

int main(int argc, char** argv) { return run_groups(argc, argv, kGroups); }
