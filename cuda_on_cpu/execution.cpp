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
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cuda_on_cpu/kernel_api.h"
#include "device_state.h"
#include "fiber.h"

// glibc's resolver of a module's thread-local storage (the x86-64 TLS ABI), which allocates the
// calling thread's block of the module on first use.
struct TlsIndex {
  unsigned long module;
  unsigned long offset;
};
extern "C" void* __tls_get_addr(TlsIndex* index);

namespace cuda_on_cpu {

namespace {

constexpr int kWarpLanes = 32;
constexpr size_t kDefaultMaxDynamicShared = 48 << 10;

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
  std::vector<uint3> thread_indices;  // threadIdx of each linear thread index, set when it runs
};

// The block that runs now: what the intrinsics, called on its fibers, act on. Its vectors keep
// their capacity from block to block.
struct BlockRun {
  const KernelLaunch* launch = nullptr;
  uint3 index{};
  std::vector<FiberThread> threads;
  std::vector<uint32_t> at_warp_op;  // per warp, the lanes waiting at a warp operation
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

// Lane `arriving` has reached a warp operation: once every lane of its mask has, each gets its
// value (PTX's shfl.sync.bfly: from lane ^ lane_mask within its segment of `width` lanes, or its
// own value where that lane lies in a later segment) and becomes ready.
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
    misuse(fmt::format("in {}: a warp operation's mask 0x{:08x} names lanes that warp {} of a block of {} threads "
                       "does not have",
                       where_is(run), mask, warp, run.threads.size()));
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
  const int width = thread.op.width;
  if (width < 1 || width > kWarpLanes || (width & (width - 1)) != 0)
    misuse("in " + where_is(run) + ": __shfl_xor_sync with width " + std::to_string(width) +
           ", not a power of two up to 32");
  const int segment_mask = kWarpLanes - width;
  for (uint32_t lanes = mask; lanes != 0; lanes &= lanes - 1) {
    const int lane = std::countr_zero(lanes);
    const int max_lane = (lane & segment_mask) | ((kWarpLanes - 1) & ~segment_mask);
    int source = lane ^ thread.op.lane_mask;
    if (source > max_lane || source < 0) source = lane;
    if ((mask >> source & 1u) == 0)
      misuse("in " + where_is(run) + ": lane " + std::to_string(lane) + " of warp " + std::to_string(warp) +
             " reads lane " + std::to_string(source) + ", which is not in the shuffle's mask");
    run.threads[static_cast<size_t>(first + lane)].result = run.threads[static_cast<size_t>(first + source)].bits;
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
struct SharedMemory {
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
  if (tls != nullptr) *static_cast<SharedMemory*>(found) = {info->dlpi_tls_modid, tls->p_memsz};
  return 1;
}

void poison_shared_memory() {
  static const SharedMemory shared = [] {
    SharedMemory found;
    dl_iterate_phdr(find_own_tls, &found);
    return found;
  }();
  if (shared.tls_module == 0) return;
  TlsIndex index{shared.tls_module, 0};
  std::memset(__tls_get_addr(&index), 0xFF, shared.bytes);
}

void run_block(const KernelLaunch& launch, const uint3& index, const Schedule& schedule, std::mt19937_64& random) {
  const auto threads = static_cast<int>(launch.block.x * launch.block.y * launch.block.z);
  std::vector<std::unique_ptr<Fiber>>& fibers = fiber_pool(static_cast<size_t>(threads));
  poison_shared_memory();
  blockIdx = index;
  static BlockRun run;
  static std::vector<int> ready, next;
  run.launch = &launch;
  run.index = index;
  run.threads.assign(static_cast<size_t>(threads), FiberThread{});
  run.at_warp_op.assign(static_cast<size_t>((threads + kWarpLanes - 1) / kWarpLanes), 0);
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
  // More dynamic shared memory than a kernel gets without opting in is refused as the driver
  // refuses it. Less, and launch attributes, are not implemented: no kernel here uses them.
  if (config.dynamicSmemBytes > kDefaultMaxDynamicShared) return record(cudaErrorInvalidValue);
  if (config.dynamicSmemBytes != 0 || config.numAttrs != 0) return record(cudaErrorNotSupported);
  auto launch = std::make_shared<KernelLaunch>(KernelLaunch{kernel, config.gridDim, config.blockDim,
                                                            std::move(run_thread), std::string(), {}});
  for (const PointerArgument& argument : pointer_arguments) {
    if (argument.pointer == nullptr || find_allocation(argument.pointer, 0) != nullptr) continue;
    char address[32];
    std::snprintf(address, sizeof(address), "%p", argument.pointer);
    launch->fault = "launch of " + kernel_name(*launch) + ": argument " + std::to_string(argument.index) + " (" +
                    address + ") is not device memory (neither from cudaMalloc nor registered host memory)";
    break;
  }
  enqueue(stream, [launch] { execute(*launch); });
  ++counts().kernel_launches;
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
