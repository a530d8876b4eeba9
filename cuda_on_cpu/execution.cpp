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
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cuda_on_cpu/kernel_api.h"
#include "device_state.h"
#include "fiber.h"

// The bounds of the __shared__ section (kernel_api.h), which the linker defines where some
// kernel has shared memory, and leaves null otherwise.
extern "C" __attribute__((weak, visibility("hidden"))) char __start_cuda_on_cpu_shared[];
extern "C" __attribute__((weak, visibility("hidden"))) char __stop_cuda_on_cpu_shared[];

namespace cuda_on_cpu {

namespace {

constexpr int kWarpLanes = 32;

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

// A warp operation as one lane called it; the lanes of a mask must all call the same.
struct WarpOp {
  unsigned mask = 0;
  int lane_mask = 0;
  int width = 0;
  bool operator==(const WarpOp&) const = default;
};

struct FiberThread {
  ThreadState state = ThreadState::kReady;
  const void* site = nullptr;  // where it waits
  WarpOp op;
  uint64_t bits = 0;    // the value it gives to the warp operation
  uint64_t result = 0;  // the value it gets
};

struct KernelLaunch {
  const void* kernel;
  dim3 grid, block;
  std::function<void()> run_thread;
  std::string fault;  // why it faults when it runs; empty when it does not
};

// The block that runs now: what the intrinsics, called on its fibers, act on.
struct BlockRun {
  const KernelLaunch* launch = nullptr;
  uint3 index{};
  std::vector<FiberThread> threads;
  int running = -1;
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

std::string describe_wait(const FiberThread& thread) {
  char mask[32];
  switch (thread.state) {
    case ThreadState::kDone: return "returned from the kernel";
    case ThreadState::kReady: return "ready";
    case ThreadState::kAtBarrier: return "waits at __syncthreads() in " + describe_code(thread.site, CodeAddress::kReturnAddress);
    case ThreadState::kAtWarpOp:
      std::snprintf(mask, sizeof(mask), "0x%08x", thread.op.mask);
      return std::string("waits at __shfl_xor_sync(mask ") + mask + ") in " +
             describe_code(thread.site, CodeAddress::kReturnAddress);
  }
  return "";
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

// The lanes of `mask`, as thread indices of warp `warp` in a block of `threads` threads.
std::vector<int> mask_lanes(unsigned mask, int warp, int threads, const BlockRun& run) {
  std::vector<int> lanes;
  for (int lane = 0; lane < kWarpLanes; ++lane) {
    if ((mask >> lane & 1u) == 0) continue;
    const int thread = warp * kWarpLanes + lane;
    if (thread >= threads)
      misuse("in " + where_is(run) + ": a warp operation's mask names lane " + std::to_string(lane) + " of warp " +
             std::to_string(warp) + ", which a block of " + std::to_string(threads) + " threads does not have");
    lanes.push_back(thread);
  }
  return lanes;
}

// Lane `arriving` has reached a warp operation: once every lane of its mask has, each gets its
// value (PTX's shfl.sync.bfly: from lane ^ lane_mask within its segment of `width` lanes, or its
// own value where that lane lies in a later segment) and becomes ready.
void arrive_at_warp_op(BlockRun& run, int arriving, std::vector<int>& ready) {
  const FiberThread& thread = run.threads[static_cast<size_t>(arriving)];
  const int warp = arriving / kWarpLanes, own_lane = arriving % kWarpLanes;
  const auto threads = static_cast<int>(run.threads.size());
  if ((thread.op.mask >> own_lane & 1u) == 0)
    misuse("in " + where_is(run) + ": thread " + std::to_string(arriving) +
           " calls a warp operation whose mask leaves out its own lane");
  const std::vector<int> lanes = mask_lanes(thread.op.mask, warp, threads, run);
  for (const int lane : lanes)
    if (run.threads[static_cast<size_t>(lane)].state != ThreadState::kAtWarpOp) return;
  for (const int lane : lanes)
    if (!(run.threads[static_cast<size_t>(lane)].op == thread.op))
      misuse("in " + where_is(run) + ": the lanes of warp " + std::to_string(warp) +
             " reached different warp operations (" + describe_wait(thread) + "; thread " + std::to_string(lane) +
             " " + describe_wait(run.threads[static_cast<size_t>(lane)]) + ")");
  const int width = thread.op.width;
  if (width < 1 || width > kWarpLanes || (width & (width - 1)) != 0)
    misuse("in " + where_is(run) + ": __shfl_xor_sync with width " + std::to_string(width) +
           ", not a power of two up to 32");
  const int segment_mask = kWarpLanes - width;
  for (const int lane : lanes) {
    const int own = lane % kWarpLanes;
    const int max_lane = (own & segment_mask) | ((kWarpLanes - 1) & ~segment_mask);
    int source = own ^ thread.op.lane_mask;
    if (source > max_lane || source < 0) source = own;
    if ((thread.op.mask >> source & 1u) == 0)
      misuse("in " + where_is(run) + ": lane " + std::to_string(own) + " of warp " + std::to_string(warp) +
             " reads lane " + std::to_string(source) + ", which is not in the shuffle's mask");
    run.threads[static_cast<size_t>(lane)].result = run.threads[static_cast<size_t>(warp * kWarpLanes + source)].bits;
  }
  for (const int lane : lanes) {
    run.threads[static_cast<size_t>(lane)].state = ThreadState::kReady;
    ready.push_back(lane);
  }
}

void order_by(std::vector<int>& items, const Schedule& schedule, std::mt19937_64& random) {
  switch (schedule.order) {
    case Order::kInOrder: std::sort(items.begin(), items.end()); break;
    case Order::kReversed: std::sort(items.begin(), items.end(), std::greater<>()); break;
    case Order::kShuffled: std::shuffle(items.begin(), items.end(), random); break;
  }
}

void run_fiber_thread(void*) {
  BlockRun& run = *current_block;
  run.launch->run_thread();
  run.threads[static_cast<size_t>(run.running)].state = ThreadState::kDone;
}

void poison_shared_memory() {
  if (__start_cuda_on_cpu_shared != nullptr && __stop_cuda_on_cpu_shared != nullptr)
    std::memset(__start_cuda_on_cpu_shared, 0xFF,
                static_cast<size_t>(__stop_cuda_on_cpu_shared - __start_cuda_on_cpu_shared));
}

void run_block(const KernelLaunch& launch, const uint3& index, const Schedule& schedule, std::mt19937_64& random) {
  const auto threads = static_cast<int>(launch.block.x * launch.block.y * launch.block.z);
  std::vector<std::unique_ptr<Fiber>>& fibers = fiber_pool(static_cast<size_t>(threads));
  poison_shared_memory();
  blockIdx = index;
  BlockRun run{&launch, index, std::vector<FiberThread>(static_cast<size_t>(threads)), -1};
  current_block = &run;
  std::vector<int> ready(static_cast<size_t>(threads)), next;
  std::iota(ready.begin(), ready.end(), 0);
  for (int t = 0; t < threads; ++t) fibers[static_cast<size_t>(t)]->prepare(run_fiber_thread, nullptr);
  int done = 0, at_barrier = 0;
  for (;;) {
    order_by(ready, schedule, random);
    next.clear();
    for (const int t : ready) {
      run.running = t;
      threadIdx = thread_index(t, launch.block);
      fibers[static_cast<size_t>(t)]->resume();
      switch (run.threads[static_cast<size_t>(t)].state) {
        case ThreadState::kDone: ++done; break;
        case ThreadState::kAtBarrier: ++at_barrier; break;
        case ThreadState::kAtWarpOp: arrive_at_warp_op(run, t, next); break;
        case ThreadState::kReady: break;
      }
    }
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
}

void execute(const KernelLaunch& launch) {
  if (!launch.fault.empty()) {
    fault(cudaErrorIllegalAddress, launch.fault);
    return;
  }
  const Schedule schedule = schedule_from_environment();
  std::mt19937_64 random(schedule.seed * 0x9E3779B97F4A7C15ull + launches_executed++);
  gridDim = launch.grid;
  blockDim = launch.block;
  const dim3& grid = launch.grid;
  std::vector<int> blocks(static_cast<size_t>(grid.x) * grid.y * grid.z);
  std::iota(blocks.begin(), blocks.end(), 0);
  order_by(blocks, schedule, random);
  for (const int block : blocks) {
    const auto b = static_cast<unsigned int>(block);
    run_block(launch, {b % grid.x, b / grid.x % grid.y, b / (grid.x * grid.y)}, schedule, random);
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
  // Static shared memory only, and no launch attributes: nothing here uses more.
  if (config.dynamicSmemBytes != 0 || config.numAttrs != 0) return record(cudaErrorInvalidValue);
  auto launch = std::make_shared<KernelLaunch>(KernelLaunch{kernel, config.gridDim, config.blockDim,
                                                            std::move(run_thread), std::string()});
  for (const PointerArgument& argument : pointer_arguments) {
    if (argument.pointer == nullptr || find_allocation(argument.pointer, 0) != nullptr) continue;
    char address[32];
    std::snprintf(address, sizeof(address), "%p", argument.pointer);
    launch->fault = "launch of " + kernel_name(*launch) + ": argument " + std::to_string(argument.index) + " (" +
                    address + ") is not device memory (neither from cudaMalloc nor registered host memory)";
    break;
  }
  enqueue(stream, [launch] { execute(*launch); });
  return cudaSuccess;
}

void sync_block() {
  const void* site = __builtin_extract_return_addr(__builtin_return_address(0));
  if (current_block == nullptr) misuse("__syncthreads() called outside a kernel");
  BlockRun& run = *current_block;
  FiberThread& thread = run.threads[static_cast<size_t>(run.running)];
  thread.state = ThreadState::kAtBarrier;
  thread.site = site;
  fiber_pool(0)[static_cast<size_t>(run.running)]->suspend();
}

uint64_t shuffle_xor(unsigned mask, uint64_t bits, int lane_mask, int width) {
  const void* site = __builtin_extract_return_addr(__builtin_return_address(0));
  if (current_block == nullptr) misuse("__shfl_xor_sync() called outside a kernel");
  BlockRun& run = *current_block;
  const int me = run.running;
  FiberThread& thread = run.threads[static_cast<size_t>(me)];
  thread.state = ThreadState::kAtWarpOp;
  thread.site = site;
  thread.op = {mask, lane_mask, width};
  thread.bits = bits;
  fiber_pool(0)[static_cast<size_t>(me)]->suspend();
  return run.threads[static_cast<size_t>(me)].result;
}

}  // namespace cuda_on_cpu
