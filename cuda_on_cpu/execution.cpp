// Kernel execution: a launch waits on its stream like any other work; when it runs, its blocks
// run one after another, and the threads of a block are fibers that switch only at
// __syncthreads and at warp operations. Between those points, the order in which the fibers of a
// block run, and the order of the blocks, follow the schedule TRAINCTL_CUDA_ON_CPU_SCHEDULE
// names: "in-order" (the default), "reversed", or "shuffled[:SEED]" (a fresh seeded permutation
// at every round and of every grid's blocks). A kernel that is correct gives bitwise the same
// result under every schedule; one that misses a barrier reads what another fiber has or has
// not yet written, depending on the order, so running it under two schedules shows the race.
// Warp operations synchronize the lanes of their mask only, never the block: a kernel's warps may
// go through different numbers of them. A barrier that some thread of the block leaves by
// returning, and a warp operation that some lane of its mask does not reach, are deadlocks,
// reported with the kernel, the block and each waiting thread's place; the process then aborts,
// where a GPU would hang.
// The warp operations are __shfl_xor_sync and the tensor-core instructions mma and ldmatrix
// (tensor_cores.h), which take the whole warp; cp.async's copies are queued per thread and done
// at the thread's wait that covers them. A launch's dynamic shared memory is a buffer of its
// size, filled with 0xFF bytes before each block as the static shared memory is. An access that
// a GPU would fault on (an ldmatrix or cp.async address misaligned, or outside shared or device
// memory) stops the launch with the GPU's error, which stays (the context is lost), so the block's
// other threads, left where they were, never run again.
#include <link.h>

#include <algorithm>
#include <bit>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cuda_on_cpu/kernel_api.h"
#include "cuda_on_cpu/tensor_cores.h"
#include "device_state.h"
#include "fiber.h"
#include "matrix_fragments.h"

// glibc's resolver of a module's thread-local storage (the x86-64 TLS ABI), which allocates the
// calling thread's block of the module on first use.
struct TlsIndex {
  unsigned long module;
  unsigned long offset;
};
extern "C" void* __tls_get_addr(TlsIndex* index);

namespace cuda_on_cpu {

namespace {

constexpr unsigned kFullWarp = 0xFFFFFFFFu;
// What a launch's dynamic shared memory is aligned to: what `extern __shared__ __align__(16)`
// promises under nvcc.
constexpr size_t kDynamicSharedAlignment = 16;

enum class Order { kInOrder, kReversed, kShuffled };

struct Schedule {
  Order order = Order::kInOrder;
  uint64_t seed = 0;
};

[[noreturn]] void misuse(const std::string& what) {
  std::fprintf(stderr, "cuda_on_cpu: %s\n", what.c_str());
  std::abort();
}

Schedule schedule_from_environment() {
  const char* value = std::getenv("TRAINCTL_CUDA_ON_CPU_SCHEDULE");
  const std::string name = value != nullptr ? value : "";
  if (name.empty() || name == "in-order") return {};
  if (name == "reversed") return {Order::kReversed, 0};
  if (name == "shuffled") return {Order::kShuffled, 1};
  if (name.starts_with("shuffled:")) {
    char* end = nullptr;
    const uint64_t seed = std::strtoull(name.c_str() + 9, &end, 10);
    if (*end == '\0' && end != name.c_str() + 9) return {Order::kShuffled, seed};
  }
  misuse("TRAINCTL_CUDA_ON_CPU_SCHEDULE=\"" + name + "\": expected in-order, reversed, shuffled or shuffled:SEED");
}

enum class ThreadState { kReady, kAtBarrier, kAtWarpOp, kDone };

enum class WarpOpKind { kShuffleXor, kMma, kLoadMatrices };

// A warp operation as one lane called it; the lanes of a mask must all call the same, with the
// same qualifiers.
struct WarpOp {
  WarpOpKind kind = WarpOpKind::kShuffleXor;
  unsigned mask = 0;
  int lane_mask = 0;  // a shuffle's
  int width = 0;
  int matrices = 0;  // ldmatrix's
  bool transposed = false;
  bool operator==(const WarpOp&) const = default;
};

// A cp.async copy that its thread has issued and not yet waited for.
struct AsyncCopy {
  void* destination;
  const void* source;
  int copy_bytes, source_bytes;
  uint64_t group;  // the thread's count of committed groups when it was issued
};

struct FiberThread {
  ThreadState state = ThreadState::kReady;
  const void* site = nullptr;  // where it waits
  WarpOp op;
  const void* operands = nullptr;  // what it gives to the warp operation, on its own stack
  void* results = nullptr;         // where it gets its share
  std::vector<AsyncCopy> async_copies;  // in the order issued
  uint64_t committed_groups = 0;
};

struct KernelLaunch {
  const void* kernel;
  dim3 grid, block;
  size_t dynamic_shared_bytes;
  std::function<void()> run_thread;
  std::string fault;  // why it faults when it runs; empty when it does not
  std::vector<uint3> thread_indices;  // threadIdx of each linear thread index, set when it runs
};

// What stopped a block: an access of one of its threads that a GPU would fault on.
struct KernelFault {
  cudaError_t error = cudaSuccess;
  std::string report;
};

// The block that runs now: what the intrinsics, called on its fibers, act on. Its vectors keep
// their capacity from block to block.
struct BlockRun {
  const KernelLaunch* launch = nullptr;
  uint3 index{};
  std::vector<FiberThread> threads;
  std::vector<uint32_t> at_warp_op;  // per warp, the lanes waiting at a warp operation
  int running = -1;
  std::span<std::byte> static_shared, dynamic_shared;
  KernelFault fault;
};

BlockRun* current_block = nullptr;
uint64_t launches_executed = 0;

// Fibers for the largest block so far, reused by every block; never destroyed (a kernel may be
// waited for from a destructor at exit).
std::vector<std::unique_ptr<Fiber>>& fiber_pool(size_t threads) {
  static auto* const pool = new std::vector<std::unique_ptr<Fiber>>;
  while (pool->size() < threads) pool->push_back(std::make_unique<Fiber>());
  return *pool;
}

uint3 thread_index(int linear, const dim3& block) {
  const auto t = static_cast<unsigned int>(linear);
  return {t % block.x, t / block.x % block.y, t / (block.x * block.y)};
}

std::string triple(unsigned int x, unsigned int y, unsigned int z) { return fmt::format("({},{},{})", x, y, z); }

std::string kernel_name(const KernelLaunch& launch) {
  return describe_code(launch.kernel, CodeAddress::kFunction);
}

std::string where_is(const BlockRun& run) {
  const KernelLaunch& launch = *run.launch;
  return kernel_name(launch) + ", block " + triple(run.index.x, run.index.y, run.index.z) + " of grid " +
         triple(launch.grid.x, launch.grid.y, launch.grid.z) + ", blocks of " +
         triple(launch.block.x, launch.block.y, launch.block.z) + " threads";
}

// The name of a warp operation as a kernel's source calls it (a shuffle) or as PTX names it.
std::string name_of(const WarpOp& op) {
  switch (op.kind) {
    case WarpOpKind::kShuffleXor: return fmt::format("__shfl_xor_sync(mask 0x{:08x})", op.mask);
    case WarpOpKind::kMma: return "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32";
    case WarpOpKind::kLoadMatrices:
      return fmt::format("ldmatrix.sync.aligned.m8n8.x{}{}.shared.b16", op.matrices, op.transposed ? ".trans" : "");
  }
  return "";
}

std::string describe_wait(const FiberThread& thread) {
  switch (thread.state) {
    case ThreadState::kDone: return "returned from the kernel";
    case ThreadState::kReady: return "ready";
    case ThreadState::kAtBarrier: return "waits at __syncthreads() in " + describe_code(thread.site, CodeAddress::kReturnAddress);
    case ThreadState::kAtWarpOp:
      return "waits at " + name_of(thread.op) + " in " + describe_code(thread.site, CodeAddress::kReturnAddress);
  }
  return "";
}

std::string describe_thread(int thread) {
  return fmt::format("thread {} (warp {} lane {})", thread, thread / kWarpLanes, thread % kWarpLanes);
}

// Stops the block at an access that a GPU would fault on, as `error`.
void stop_block(BlockRun& run, cudaError_t error, const std::string& what) {
  run.fault = {error, "in " + where_is(run) + ": " + what};
}

// Whether [address, address + bytes) lies in the block's static or dynamic shared memory.
bool in_shared_memory(const BlockRun& run, const void* address, size_t bytes) {
  const auto start = reinterpret_cast<uintptr_t>(address);
  for (const std::span<std::byte> region : {run.static_shared, run.dynamic_shared}) {
    const auto begin = reinterpret_cast<uintptr_t>(region.data());
    if (start >= begin && start - begin <= region.size() && region.size() - (start - begin) >= bytes) return true;
  }
  return false;
}

[[noreturn]] void report_deadlock(const BlockRun& run) {
  std::string report = "deadlock in " + where_is(run) + ":\n";
  const auto n = static_cast<int>(run.threads.size());
  for (int first = 0; first < n;) {
    const FiberThread& thread = run.threads[static_cast<size_t>(first)];
    int last = first;
    while (last + 1 < n && run.threads[static_cast<size_t>(last + 1)].state == thread.state &&
           run.threads[static_cast<size_t>(last + 1)].site == thread.site &&
           run.threads[static_cast<size_t>(last + 1)].op == thread.op)
      ++last;
    const std::string threads = first == last ? "thread " + std::to_string(first)
                                              : "threads " + std::to_string(first) + "-" + std::to_string(last);
    const uint3 index = thread_index(first, run.launch->block);
    report += "  " + threads + " (first " + triple(index.x, index.y, index.z) + ", warp " +
              std::to_string(first / kWarpLanes) + " lane " + std::to_string(first % kWarpLanes) +
              "): " + describe_wait(thread) + "\n";
    first = last + 1;
  }
  report +=
      "  (a barrier needs every thread of the block, a warp operation every lane of its mask; a GPU would hang "
      "here)";
  misuse(report);
}

// A shuffle whose lanes have all arrived: each gets its value (PTX's shfl.sync.bfly: from
// lane ^ lane_mask within its segment of `width` lanes, or its own value where that lane lies in
// a later segment).
void exchange_shuffle(BlockRun& run, int warp, const WarpOp& op) {
  const int first = warp * kWarpLanes;
  const int width = op.width;
  if (width < 1 || width > kWarpLanes || (width & (width - 1)) != 0)
    misuse("in " + where_is(run) + ": __shfl_xor_sync with width " + std::to_string(width) +
           ", not a power of two up to 32");
  const int segment_mask = kWarpLanes - width;
  for (uint32_t lanes = op.mask; lanes != 0; lanes &= lanes - 1) {
    const int lane = std::countr_zero(lanes);
    const int max_lane = (lane & segment_mask) | ((kWarpLanes - 1) & ~segment_mask);
    int source = lane ^ op.lane_mask;
    if (source > max_lane || source < 0) source = lane;
    if ((op.mask >> source & 1u) == 0)
      misuse("in " + where_is(run) + ": lane " + std::to_string(lane) + " of warp " + std::to_string(warp) +
             " reads lane " + std::to_string(source) + ", which is not in the shuffle's mask");
    *static_cast<uint64_t*>(run.threads[static_cast<size_t>(first + lane)].results) =
        *static_cast<const uint64_t*>(run.threads[static_cast<size_t>(first + source)].operands);
  }
}

// An mma whose 32 lanes have all arrived (matrix_fragments.h).
void multiply_accumulate(BlockRun& run, int warp) {
  const MmaFragments* lanes[kWarpLanes];
  float* d[kWarpLanes];
  for (int lane = 0; lane < kWarpLanes; ++lane) {
    const FiberThread& thread = run.threads[static_cast<size_t>(warp * kWarpLanes + lane)];
    lanes[lane] = static_cast<const MmaFragments*>(thread.operands);
    d[lane] = static_cast<float*>(thread.results);
  }
  multiply_accumulate_m16n8k16(lanes, d);
}

// An ldmatrix whose 32 lanes have all arrived: false, with the block stopped, where a row address
// that it uses is not 16-byte aligned or not in shared memory.
bool load_matrices_of_warp(BlockRun& run, int warp, const WarpOp& op) {
  const int first = warp * kWarpLanes;
  const unsigned char* rows[4][8];
  for (int lane = 0; lane < 8 * op.matrices; ++lane) {
    const FiberThread& thread = run.threads[static_cast<size_t>(first + lane)];
    const void* address = *static_cast<const void* const*>(thread.operands);
    const bool aligned = reinterpret_cast<uintptr_t>(address) % 16 == 0;
    if (!aligned || !in_shared_memory(run, address, 16)) {
      stop_block(run, aligned ? cudaErrorIllegalAddress : cudaErrorMisalignedAddress,
                 fmt::format("{} in {}: {} gives the row address {}, which is {}", name_of(op),
                             describe_code(thread.site, CodeAddress::kReturnAddress), describe_thread(first + lane),
                             address, aligned ? "not in the block's shared memory" : "not 16-byte aligned"));
      return false;
    }
    rows[lane / 8][lane % 8] = static_cast<const unsigned char*>(address);
  }
  for (int lane = 0; lane < kWarpLanes; ++lane) {
    auto* fragments = static_cast<uint32_t*>(run.threads[static_cast<size_t>(first + lane)].results);
    for (int matrix = 0; matrix < op.matrices; ++matrix)
      fragments[matrix] = matrix_fragment(rows[matrix], lane, op.transposed);
  }
  return true;
}

// Lane `arriving` has reached a warp operation: once every lane of its mask has, the operation
// gives each its share, and they become ready (unless it stopped the block).
void arrive_at_warp_op(BlockRun& run, int arriving, std::vector<int>& ready) {
  const FiberThread& thread = run.threads[static_cast<size_t>(arriving)];
  const int warp = arriving / kWarpLanes, own_lane = arriving % kWarpLanes;
  const int first = warp * kWarpLanes;
  const auto lanes_in_block = static_cast<int>(run.threads.size()) - first;
  const uint32_t existing = lanes_in_block >= kWarpLanes ? ~0u : (1u << lanes_in_block) - 1;
  const uint32_t mask = thread.op.mask;
  if ((mask >> own_lane & 1u) == 0)
    misuse("in " + where_is(run) + ": thread " + std::to_string(arriving) +
           " calls a warp operation whose mask leaves out its own lane");
  if ((mask & ~existing) != 0)
    misuse(fmt::format("in {}: {} needs lanes 0x{:08x} of warp {}, which in a block of {} threads has lanes 0x{:08x}",
                       where_is(run), name_of(thread.op), mask, warp, run.threads.size(), existing));
  uint32_t& waiting = run.at_warp_op[static_cast<size_t>(warp)];
  waiting |= 1u << own_lane;
  if ((waiting & mask) != mask) return;
  for (uint32_t lanes = mask; lanes != 0; lanes &= lanes - 1) {
    const FiberThread& other = run.threads[static_cast<size_t>(first + std::countr_zero(lanes))];
    if (!(other.op == thread.op))
      misuse("in " + where_is(run) + ": the lanes of warp " + std::to_string(warp) +
             " reached different warp operations (" + describe_wait(thread) + "; lane " +
             std::to_string(std::countr_zero(lanes)) + " " + describe_wait(other) + ")");
  }
  switch (thread.op.kind) {
    case WarpOpKind::kShuffleXor: exchange_shuffle(run, warp, thread.op); break;
    case WarpOpKind::kMma: multiply_accumulate(run, warp); break;
    case WarpOpKind::kLoadMatrices:
      if (!load_matrices_of_warp(run, warp, thread.op)) return;
      break;
  }
  waiting &= ~mask;
  for (uint32_t lanes = mask; lanes != 0; lanes &= lanes - 1) {
    const int thread_index = first + std::countr_zero(lanes);
    run.threads[static_cast<size_t>(thread_index)].state = ThreadState::kReady;
    ready.push_back(thread_index);
  }
}

// Ready fibers come in increasing order (all of a block, or the lanes of warps that completed
// an operation, warp by warp), so only the other orders need work.
void order_by(std::vector<int>& items, const Schedule& schedule, std::mt19937_64& random) {
  switch (schedule.order) {
    case Order::kInOrder:
      if (!std::is_sorted(items.begin(), items.end())) std::sort(items.begin(), items.end());
      break;
    case Order::kReversed: std::sort(items.begin(), items.end(), std::greater<>()); break;
    case Order::kShuffled: std::shuffle(items.begin(), items.end(), random); break;
  }
}

void run_fiber_thread(void*) {
  BlockRun& run = *current_block;
  run.launch->run_thread();
  run.threads[static_cast<size_t>(run.running)].state = ThreadState::kDone;
}

// The thread-local storage of the module this code is linked into, which holds the kernels:
// their __shared__ variables (kernel_api.h) and nothing else.
struct StaticSharedMemory {
  unsigned long tls_module = 0;  // 0: the module has no thread-local storage
  size_t bytes = 0;
};

int find_own_tls(dl_phdr_info* info, size_t, void* found) {
  const auto own = reinterpret_cast<uintptr_t>(&find_own_tls);
  bool holds_own_code = false;
  const ElfW(Phdr)* tls = nullptr;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& header = info->dlpi_phdr[i];
    const uintptr_t start = info->dlpi_addr + header.p_vaddr;
    if (header.p_type == PT_LOAD && own >= start && own < start + header.p_memsz) holds_own_code = true;
    if (header.p_type == PT_TLS) tls = &header;
  }
  if (!holds_own_code) return 0;
  if (tls != nullptr) *static_cast<StaticSharedMemory*>(found) = {info->dlpi_tls_modid, tls->p_memsz};
  return 1;
}

// The kernels' static shared memory on this host thread; empty when the module has none.
std::span<std::byte> static_shared_memory() {
  static const StaticSharedMemory shared = [] {
    StaticSharedMemory found;
    dl_iterate_phdr(find_own_tls, &found);
    return found;
  }();
  if (shared.tls_module == 0) return {};
  TlsIndex index{shared.tls_module, 0};
  return {static_cast<std::byte*>(__tls_get_addr(&index)), shared.bytes};
}

struct FreeMemory {
  void operator()(std::byte* memory) const { std::free(memory); }
};

// A launch's dynamic shared memory: exactly `bytes`, so that AddressSanitizer's red zone follows
// its last byte; null for none.
std::unique_ptr<std::byte, FreeMemory> allocate_dynamic_shared(size_t bytes) {
  void* memory = nullptr;
  if (bytes != 0 && posix_memalign(&memory, kDynamicSharedAlignment, bytes) != 0)
    misuse(fmt::format("no host memory for {} bytes of dynamic shared memory", bytes));
  return std::unique_ptr<std::byte, FreeMemory>(static_cast<std::byte*>(memory));
}

KernelFault run_block(const KernelLaunch& launch, const uint3& index, std::span<std::byte> dynamic_shared,
                      const Schedule& schedule, std::mt19937_64& random) {
  const auto threads = static_cast<int>(launch.block.x * launch.block.y * launch.block.z);
  std::vector<std::unique_ptr<Fiber>>& fibers = fiber_pool(static_cast<size_t>(threads));
  blockIdx = index;
  static BlockRun run;
  static std::vector<int> ready, next;
  run.launch = &launch;
  run.index = index;
  run.threads.assign(static_cast<size_t>(threads), FiberThread{});
  run.at_warp_op.assign(static_cast<size_t>((threads + kWarpLanes - 1) / kWarpLanes), 0);
  run.static_shared = static_shared_memory();
  run.dynamic_shared = dynamic_shared;
  for (const std::span<std::byte> shared : {run.static_shared, run.dynamic_shared})
    if (!shared.empty()) std::memset(shared.data(), 0xFF, shared.size());
  run.fault = {};
  current_block = &run;
  ready.resize(static_cast<size_t>(threads));
  std::iota(ready.begin(), ready.end(), 0);
  for (int t = 0; t < threads; ++t) fibers[static_cast<size_t>(t)]->prepare(run_fiber_thread, nullptr);
  int done = 0, at_barrier = 0;
  for (;;) {
    order_by(ready, schedule, random);
    next.clear();
    for (const int t : ready) {
      run.running = t;
      threadIdx = launch.thread_indices[static_cast<size_t>(t)];
      fibers[static_cast<size_t>(t)]->resume();
      switch (run.threads[static_cast<size_t>(t)].state) {
        case ThreadState::kDone: ++done; break;
        case ThreadState::kAtBarrier: ++at_barrier; break;
        case ThreadState::kAtWarpOp: arrive_at_warp_op(run, t, next); break;
        case ThreadState::kReady: break;
      }
      if (run.fault.error != cudaSuccess) break;
    }
    if (run.fault.error != cudaSuccess) break;
    ready.swap(next);
    if (!ready.empty()) continue;
    if (done == threads) break;
    if (done == 0 && at_barrier == threads) {
      for (int t = 0; t < threads; ++t) {
        run.threads[static_cast<size_t>(t)].state = ThreadState::kReady;
        ready.push_back(t);
      }
      at_barrier = 0;
      continue;
    }
    report_deadlock(run);
  }
  current_block = nullptr;
  return run.fault;
}

void execute(KernelLaunch& launch) {
  if (!launch.fault.empty()) {
    fault(cudaErrorIllegalAddress, launch.fault);
    return;
  }
  const unsigned int threads = launch.block.x * launch.block.y * launch.block.z;
  for (unsigned int t = 0; t < threads; ++t) launch.thread_indices.push_back(thread_index(static_cast<int>(t), launch.block));
  const Schedule schedule = schedule_from_environment();
  std::mt19937_64 random(schedule.seed * 0x9E3779B97F4A7C15ull + launches_executed++);
  gridDim = launch.grid;
  blockDim = launch.block;
  const dim3& grid = launch.grid;
  std::vector<int> blocks(static_cast<size_t>(grid.x) * grid.y * grid.z);
  std::iota(blocks.begin(), blocks.end(), 0);
  order_by(blocks, schedule, random);
  const std::unique_ptr<std::byte, FreeMemory> dynamic_shared = allocate_dynamic_shared(launch.dynamic_shared_bytes);
  for (const int block : blocks) {
    const auto b = static_cast<unsigned int>(block);
    const KernelFault stopped = run_block(launch, {b % grid.x, b / grid.x % grid.y, b / (grid.x * grid.y)},
                                          {dynamic_shared.get(), launch.dynamic_shared_bytes}, schedule, random);
    if (stopped.error != cudaSuccess) {
      fault(stopped.error, stopped.report);
      return;
    }
  }
}

// The driver's limits on a launch's shape (compute capability 9.0).
bool shape_is_valid(const dim3& grid, const dim3& block) {
  const uint64_t threads = uint64_t{block.x} * block.y * block.z;
  return block.x >= 1 && block.y >= 1 && block.z >= 1 && block.x <= 1024 && block.y <= 1024 && block.z <= 64 &&
         threads <= 1024 && grid.x >= 1 && grid.y >= 1 && grid.z >= 1 && grid.x <= 0x7FFFFFFFu && grid.y <= 65535 &&
         grid.z <= 65535;
}

}  // namespace

cudaError_t launch_kernel(const cudaLaunchConfig_t& config, const void* kernel,
                          std::vector<PointerArgument> pointer_arguments, std::function<void()> run_thread) {
  const std::lock_guard lock(device_mutex());
  if (sticky_error() != cudaSuccess) return record(sticky_error());
  CUstream_st* stream = resolve(config.stream);
  if (stream == nullptr) return record(cudaErrorInvalidResourceHandle);
  if (kernel == nullptr) return record(cudaErrorInvalidDeviceFunction);
  if (!shape_is_valid(config.gridDim, config.blockDim)) return record(cudaErrorInvalidConfiguration);
  // More dynamic shared memory than the kernel may have (48 KiB, unless it opted in to more) is
  // refused as the driver refuses it. Launch attributes are not implemented: no kernel here uses
  // them.
  if (config.dynamicSmemBytes > max_dynamic_shared(kernel)) return record(cudaErrorInvalidValue);
  if (config.numAttrs != 0) return record(cudaErrorNotSupported);
  auto launch = std::make_shared<KernelLaunch>(KernelLaunch{
      kernel, config.gridDim, config.blockDim, config.dynamicSmemBytes, std::move(run_thread), std::string(), {}});
  for (const PointerArgument& argument : pointer_arguments) {
    if (argument.pointer == nullptr || find_allocation(argument.pointer, 0) != nullptr) continue;
    char address[32];
    std::snprintf(address, sizeof(address), "%p", argument.pointer);
    launch->fault = "launch of " + kernel_name(*launch) + ": argument " + std::to_string(argument.index) + " (" +
                    address + ") is not device memory (neither from cudaMalloc nor registered host memory)";
    break;
  }
  enqueue(stream, [launch] { execute(*launch); });
  std::vector<const void*> pointers;
  for (const PointerArgument& argument : pointer_arguments) pointers.push_back(argument.pointer);
  log_queued(stream, "kernel", pointers);
  ++counts().kernel_launches;
  return cudaSuccess;
}

namespace {

// The block whose fiber calls `intrinsic`.
BlockRun& running_block(const char* intrinsic) {
  if (current_block == nullptr) misuse(std::string(intrinsic) + " called outside a kernel");
  return *current_block;
}

FiberThread& running_thread(BlockRun& run) { return run.threads[static_cast<size_t>(run.running)]; }

void suspend_running_fiber(const BlockRun& run) { fiber_pool(0)[static_cast<size_t>(run.running)]->suspend(); }

// The running fiber's access at `site` that a GPU would fault on: the block stops, and this fiber
// is never resumed.
[[noreturn]] void fault_at(BlockRun& run, const void* site, cudaError_t error, const std::string& what) {
  stop_block(run, error,
             describe_thread(run.running) + " in " + describe_code(site, CodeAddress::kReturnAddress) + ": " + what);
  suspend_running_fiber(run);
  std::abort();
}

// The running fiber arrives at the warp operation `op` (called at `site` as `intrinsic`) with its
// operands, and waits there until the operation has put its share in `results`.
void wait_at_warp_op(const void* site, const char* intrinsic, const WarpOp& op, const void* operands, void* results) {
  BlockRun& run = running_block(intrinsic);
  FiberThread& thread = running_thread(run);
  thread.state = ThreadState::kAtWarpOp;
  thread.site = site;
  thread.op = op;
  thread.operands = operands;
  thread.results = results;
  suspend_running_fiber(run);
}

}  // namespace

void sync_block() {
  const void* site = __builtin_extract_return_addr(__builtin_return_address(0));
  BlockRun& run = running_block("__syncthreads()");
  FiberThread& thread = running_thread(run);
  thread.state = ThreadState::kAtBarrier;
  thread.site = site;
  suspend_running_fiber(run);
}

uint64_t shuffle_xor(unsigned mask, uint64_t bits, int lane_mask, int width) {
  const void* site = __builtin_extract_return_addr(__builtin_return_address(0));
  uint64_t result = 0;
  wait_at_warp_op(site, "__shfl_xor_sync()",
                  {.kind = WarpOpKind::kShuffleXor, .mask = mask, .lane_mask = lane_mask, .width = width}, &bits,
                  &result);
  return result;
}

void mma_m16n8k16_bf16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], const float (&c)[4]) {
  const void* site = __builtin_extract_return_addr(__builtin_return_address(0));
  const MmaFragments operands{{a[0], a[1], a[2], a[3]}, {b[0], b[1]}, {c[0], c[1], c[2], c[3]}};
  wait_at_warp_op(site, "mma.sync", {.kind = WarpOpKind::kMma, .mask = kFullWarp}, &operands, d);
}

void load_matrices(uint32_t* fragments, int matrices, bool transposed, const void* row_address) {
  const void* site = __builtin_extract_return_addr(__builtin_return_address(0));
  if (matrices != 1 && matrices != 2 && matrices != 4) misuse(fmt::format("ldmatrix of {} matrices", matrices));
  wait_at_warp_op(site, "ldmatrix",
                  {.kind = WarpOpKind::kLoadMatrices, .mask = kFullWarp, .matrices = matrices, .transposed = transposed},
                  &row_address, fragments);
}

void copy_async(void* shared_destination, const void* global_source, int copy_bytes, int source_bytes) {
  const void* site = __builtin_extract_return_addr(__builtin_return_address(0));
  BlockRun& run = running_block("cp.async");
  if ((copy_bytes != 4 && copy_bytes != 8 && copy_bytes != 16) || source_bytes < 0 || source_bytes > copy_bytes)
    misuse(fmt::format("cp.async of {} bytes, {} of them from the source", copy_bytes, source_bytes));
  const auto size = static_cast<size_t>(copy_bytes);
  if (reinterpret_cast<uintptr_t>(shared_destination) % size != 0 ||
      reinterpret_cast<uintptr_t>(global_source) % size != 0)
    fault_at(run, site, cudaErrorMisalignedAddress,
             fmt::format("cp.async of {} bytes from {} to {}, which are not both {}-byte aligned", copy_bytes,
                         global_source, shared_destination, copy_bytes));
  if (!in_shared_memory(run, shared_destination, size))
    fault_at(run, site, cudaErrorIllegalAddress,
             fmt::format("cp.async of {} bytes to {}, which is not in the block's shared memory", copy_bytes,
                         shared_destination));
  if (source_bytes != 0 && find_allocation(global_source, static_cast<size_t>(source_bytes)) == nullptr)
    fault_at(run, site, cudaErrorIllegalAddress,
             fmt::format("cp.async of {} bytes from {}, which is not device memory", source_bytes, global_source));
  FiberThread& thread = running_thread(run);
  thread.async_copies.push_back({shared_destination, global_source, copy_bytes, source_bytes, thread.committed_groups});
}

void commit_async_copies() { ++running_thread(running_block("cp.async.commit_group")).committed_groups; }

void wait_async_copies(int pending_groups) {
  FiberThread& thread = running_thread(running_block("cp.async.wait_group"));
  if (pending_groups < 0) misuse(fmt::format("cp.async.wait_group {}", pending_groups));
  std::vector<AsyncCopy>& copies = thread.async_copies;
  // A committed group is done when more than pending_groups groups were committed after it.
  const auto done = [&](const AsyncCopy& copy) {
    return copy.group + static_cast<uint64_t>(pending_groups) < thread.committed_groups;
  };
  auto next = copies.begin();
  for (; next != copies.end() && done(*next); ++next) {
    auto* destination = static_cast<std::byte*>(next->destination);
    std::memcpy(destination, next->source, static_cast<size_t>(next->source_bytes));
    std::memset(destination + next->source_bytes, 0, static_cast<size_t>(next->copy_bytes - next->source_bytes));
  }
  copies.erase(copies.begin(), next);
}

void* dynamic_shared_memory() {
  const BlockRun& run = running_block("dynamic shared memory");
  return run.dynamic_shared.empty() ? nullptr : run.dynamic_shared.data();
}

}  // namespace cuda_on_cpu
