// The CPU implementation's device: see device_state.h.
#include "device_state.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

namespace cuda_on_cpu {

namespace {

// Device memory is aligned as cudaMalloc's is, so that alignment-dependent paths take the same
// branches as on a GPU.
constexpr size_t kDeviceAlignment = 256;
constexpr int kDefaultMachineGpus = 8;

// What CUDA keeps per host thread. Not thread_local: the module's thread-local storage is the
// kernels' shared memory alone (kernel_api.h), filled with poison before every block.
struct HostThread {
  cudaError_t last_error = cudaSuccess;
  int device = 0;
};

// Never destroyed: buffers and streams may still be released by other objects' destructors at
// exit.
struct DeviceState {
  std::map<uintptr_t, Allocation> allocations;  // by base address
  std::set<CUstream_st*> streams;
  std::set<CUevent_st*> events;
  CUstream_st legacy_stream;
  cudaError_t sticky = cudaSuccess;
  std::map<std::thread::id, HostThread> host_threads;
  std::map<const void*, size_t> max_dynamic_shared;  // by kernel, those that opted in
  int64_t device_bytes = 0;  // held now (cudaMalloc)
  Activity activity;
  uint64_t allocations_made = 0;
  int streams_made = 0;
  std::FILE* queue_log = nullptr;  // opened on first use
  bool queue_log_opened = false;
};

DeviceState& state() {
  static DeviceState* const instance = new DeviceState;
  return *instance;
}

HostThread& this_host_thread() { return state().host_threads[std::this_thread::get_id()]; }

// TRAINCTL_CUDA_ON_CPU_QUEUE_LOG's file, PREFIX.<pid> (each rank a file of its own), or null.
std::FILE* queue_log() {
  DeviceState& device = state();
  if (device.queue_log_opened) return device.queue_log;
  device.queue_log_opened = true;
  const char* prefix = std::getenv("TRAINCTL_CUDA_ON_CPU_QUEUE_LOG");
  if (prefix == nullptr || *prefix == '\0') return nullptr;
  const std::string path = std::string(prefix) + "." + std::to_string(getpid());
  device.queue_log = std::fopen(path.c_str(), "w");
  if (device.queue_log == nullptr) {
    std::fprintf(stderr, "cuda_on_cpu: cannot write the queue log %s\n", path.c_str());
    std::abort();
  }
  return device.queue_log;
}

int environment_int(const char* name, int fallback) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return fallback;
  char* end = nullptr;
  const long parsed = std::strtol(value, &end, 10);
  return *end == '\0' && parsed >= 0 && parsed <= 1024 ? static_cast<int>(parsed) : fallback;
}

// CUDA_VISIBLE_DEVICES as the driver reads it: comma-separated device indices, up to the first
// entry that names no device of the machine.
std::vector<int> visible_devices() {
  const int machine = environment_int("TRAINCTL_CUDA_ON_CPU_GPUS", kDefaultMachineGpus);
  std::vector<int> devices;
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  if (visible == nullptr) {
    for (int d = 0; d < machine; ++d) devices.push_back(d);
    return devices;
  }
  std::stringstream entries(visible);
  for (std::string entry; std::getline(entries, entry, ',');) {
    char* end = nullptr;
    const long index = std::strtol(entry.c_str(), &end, 10);
    if (entry.empty() || *end != '\0' || index < 0 || index >= machine) break;
    devices.push_back(static_cast<int>(index));
  }
  return devices;
}

}  // namespace

std::recursive_mutex& device_mutex() {
  static std::recursive_mutex* const mutex = new std::recursive_mutex;
  return *mutex;
}

// --- memory -------------------------------------------------------------------------------

const Allocation* find_allocation(const void* address, size_t bytes) {
  const auto& allocations = state().allocations;
  const auto start = reinterpret_cast<uintptr_t>(address);
  auto after = allocations.upper_bound(start);
  if (after == allocations.begin()) return nullptr;
  const Allocation& allocation = std::prev(after)->second;
  const auto base = reinterpret_cast<uintptr_t>(allocation.base);
  const uintptr_t end = base + allocation.bytes;
  if (bytes == 0) return start <= end ? &allocation : nullptr;
  return start + bytes <= end && start + bytes > start ? &allocation : nullptr;
}

// Read at each call, as CUDA_VISIBLE_DEVICES is: allocations are few.
size_t device_memory_bytes() {
  constexpr size_t kDefaultMebibytes = size_t{80} << 10;
  const char* value = std::getenv("TRAINCTL_CUDA_ON_CPU_MEMORY_MIB");
  if (value == nullptr || *value == '\0') return kDefaultMebibytes << 20;
  char* end = nullptr;
  const unsigned long long mebibytes = std::strtoull(value, &end, 10);
  if (*end != '\0' || mebibytes == 0 || mebibytes > (size_t{1} << 24)) {
    std::fprintf(stderr, "cuda_on_cpu: TRAINCTL_CUDA_ON_CPU_MEMORY_MIB=\"%s\" is not a size in MiB (1 to 2^24)\n", value);
    std::abort();
  }
  return static_cast<size_t>(mebibytes) << 20;
}

void* allocate_device(size_t bytes) {
  DeviceState& device = state();
  if (bytes > device_memory_bytes() - static_cast<size_t>(device.device_bytes)) return nullptr;
  // Exactly `bytes`, not rounded up: AddressSanitizer's red zone starts right after the last
  // byte, so a kernel's store one past the end is reported.
  void* pointer = nullptr;
  if (posix_memalign(&pointer, kDeviceAlignment, bytes) != 0) return nullptr;
  const uint64_t id = ++device.allocations_made;
  device.allocations.emplace(reinterpret_cast<uintptr_t>(pointer),
                             Allocation{static_cast<const char*>(pointer), bytes, MemoryKind::kDevice, id});
  if (std::FILE* log = queue_log()) std::fprintf(log, "alloc a%llu %zu\n", static_cast<unsigned long long>(id), bytes);
  device.device_bytes += static_cast<int64_t>(bytes);
  device.activity.peak_device_bytes = std::max(device.activity.peak_device_bytes, device.device_bytes);
  return pointer;
}

size_t device_bytes_held() { return static_cast<size_t>(state().device_bytes); }

bool release_device(void* pointer) {
  DeviceState& device = state();
  const auto found = device.allocations.find(reinterpret_cast<uintptr_t>(pointer));
  if (found == device.allocations.end() || found->second.kind != MemoryKind::kDevice) return false;
  device.device_bytes -= static_cast<int64_t>(found->second.bytes);
  if (std::FILE* log = queue_log())
    std::fprintf(log, "free a%llu\n", static_cast<unsigned long long>(found->second.id));
  device.allocations.erase(found);
  std::free(pointer);
  return true;
}

cudaError_t register_host(void* host, size_t bytes) {
  auto& allocations = state().allocations;
  if (host == nullptr || bytes == 0) return cudaErrorInvalidValue;
  if (find_allocation(host, 1) != nullptr || find_allocation(static_cast<char*>(host) + bytes - 1, 1) != nullptr)
    return cudaErrorHostMemoryAlreadyRegistered;
  allocations.emplace(reinterpret_cast<uintptr_t>(host),
                      Allocation{static_cast<const char*>(host), bytes, MemoryKind::kPinnedHost,
                                 ++state().allocations_made});
  return cudaSuccess;
}

cudaError_t unregister_host(void* host) {
  auto& allocations = state().allocations;
  const auto found = allocations.find(reinterpret_cast<uintptr_t>(host));
  if (found == allocations.end() || found->second.kind != MemoryKind::kPinnedHost)
    return cudaErrorHostMemoryNotRegistered;
  allocations.erase(found);
  return cudaSuccess;
}

// --- kernels' shared memory ------------------------------------------------------------------

size_t max_dynamic_shared(const void* kernel) {
  const auto& allowances = state().max_dynamic_shared;
  const auto found = allowances.find(kernel);
  return found != allowances.end() ? found->second : kDefaultMaxDynamicShared;
}

void set_max_dynamic_shared(const void* kernel, size_t bytes) { state().max_dynamic_shared[kernel] = bytes; }

// --- devices --------------------------------------------------------------------------------

int visible_device_count() { return static_cast<int>(visible_devices().size()); }

int physical_device(int device) { return visible_devices().at(static_cast<size_t>(device)); }

int& current_device() { return this_host_thread().device; }

// --- errors ---------------------------------------------------------------------------------

cudaError_t sticky_error() { return state().sticky; }

void fault(cudaError_t error, const std::string& why) {
  DeviceState& device = state();
  std::fprintf(stderr, "cuda_on_cpu: %s: %s\n", cudaGetErrorName(error), why.c_str());
  if (device.sticky == cudaSuccess) device.sticky = error;
  // The context is lost: nothing queued runs any more.
  for (CUstream_st* stream : device.streams) stream->queue.clear();
  device.legacy_stream.queue.clear();
}

cudaError_t record(cudaError_t error) {
  if (error != cudaSuccess) this_host_thread().last_error = error;
  return error;
}

cudaError_t take_last_error() {
  cudaError_t& last = this_host_thread().last_error;
  const cudaError_t error = state().sticky != cudaSuccess ? state().sticky : last;
  last = cudaSuccess;
  return error;
}

// --- streams --------------------------------------------------------------------------------

CUstream_st* resolve(cudaStream_t stream) {
  DeviceState& device = state();
  if (stream == nullptr || stream == cudaStreamLegacy) return &device.legacy_stream;
  return device.streams.contains(stream) ? stream : nullptr;
}

CUstream_st* create_stream(bool blocking) {
  auto* stream = new CUstream_st;
  stream->id = ++state().streams_made;
  stream->blocking = blocking;
  state().streams.insert(stream);
  return stream;
}

bool is_live(const CUstream_st* stream) {
  DeviceState& device = state();
  return stream == &device.legacy_stream || device.streams.contains(const_cast<CUstream_st*>(stream));
}

void destroy_stream(CUstream_st* stream) {
  drain(stream);
  DeviceState& device = state();
  for (CUevent_st* event : device.events)
    if (event->stream == stream) event->stream = nullptr;
  device.streams.erase(stream);
  delete stream;
}

void enqueue(CUstream_st* stream, std::function<void()> work) {
  DeviceState& device = state();
  if (device.sticky != cudaSuccess) return;
  // The legacy default stream waits for the blocking streams' work so far, and a blocking
  // stream for the legacy stream's.
  std::vector<std::pair<CUstream_st*, uint64_t>> waits;
  if (stream == &device.legacy_stream) {
    for (CUstream_st* other : device.streams)
      if (other->blocking) waits.emplace_back(other, other->enqueued);
  } else if (stream->blocking) {
    waits.emplace_back(&device.legacy_stream, device.legacy_stream.enqueued);
  }
  if (waits.empty()) {
    stream->queue.push_back(std::move(work));
  } else {
    stream->queue.push_back([waits = std::move(waits), work = std::move(work)] {
      for (const auto& [other, position] : waits) drain_to(other, position);
      work();
    });
  }
  ++stream->enqueued;
}

void drain_to(CUstream_st* stream, uint64_t position) {
  DeviceState& device = state();
  while (stream->executed < position && device.sticky == cudaSuccess) {
    if (stream->executing) {
      std::fprintf(stderr,
                   "cuda_on_cpu: deadlock: work on a stream waits for that stream's own work in progress "
                   "(an event recorded after it, waited for before it)\n");
      std::abort();
    }
    std::function<void()> work = std::move(stream->queue.front());
    stream->queue.pop_front();
    stream->executing = true;
    work();
    stream->executing = false;
    ++stream->executed;
  }
  // After a fault, the dropped work counts as done.
  if (device.sticky != cudaSuccess) stream->executed = stream->enqueued;
}

// The legacy default stream's work so far includes, implicitly, the blocking streams' work so
// far; the host waiting for it waits for theirs too.
void drain(CUstream_st* stream) {
  DeviceState& device = state();
  if (stream == &device.legacy_stream) {
    const std::vector<CUstream_st*> streams(device.streams.begin(), device.streams.end());
    for (CUstream_st* other : streams)
      if (other->blocking) drain_to(other, other->enqueued);
  }
  drain_to(stream, stream->enqueued);
}

void drain_all() {
  DeviceState& device = state();
  drain(&device.legacy_stream);
  // A stream's work may queue nothing new, so one pass over a snapshot is enough.
  const std::vector<CUstream_st*> streams(device.streams.begin(), device.streams.end());
  for (CUstream_st* stream : streams) drain(stream);
}

void record_event(CUevent_st* event, CUstream_st* stream) {
  state().events.insert(event);
  event->stream = stream;
  event->position = stream->enqueued;
  event->after_upload = stream->last_queued_is_upload();
}

void forget_event(CUevent_st* event) { state().events.erase(event); }

// --- activity -------------------------------------------------------------------------------

Activity& counts() { return state().activity; }

void count_wait(bool after_upload) { ++(after_upload ? counts().upload_waits : counts().host_syncs); }

void log_queued(const CUstream_st* stream, const char* kind, const std::vector<const void*>& pointers) {
  std::FILE* log = queue_log();
  if (log == nullptr) return;
  std::fprintf(log, "%s s%d", kind, stream->id);
  for (const void* pointer : pointers)
    if (const Allocation* allocation = pointer != nullptr ? find_allocation(pointer, 0) : nullptr)
      std::fprintf(log, " a%llu", static_cast<unsigned long long>(allocation->id));
  std::fputc('\n', log);
}

Activity activity() {
  const std::lock_guard lock(device_mutex());
  return counts();
}

// --- reports --------------------------------------------------------------------------------

std::string describe_code(const void* address, CodeAddress kind) {
  Dl_info info{};
  if (dladdr(address, &info) == 0 || info.dli_fname == nullptr) return "an unknown address";
  const auto offset = reinterpret_cast<uintptr_t>(address) - reinterpret_cast<uintptr_t>(info.dli_fbase);
  char where[64];
  std::snprintf(where, sizeof(where), "0x%zx", static_cast<size_t>(kind == CodeAddress::kReturnAddress ? offset - 1 : offset));
  std::string described = std::string(info.dli_fname) + "+" + where;
  const std::string command = std::string("addr2line -f -C -i -e '") + info.dli_fname + "' " + where + " 2>/dev/null";
  if (FILE* pipe = popen(command.c_str(), "r")) {
    std::string lines;
    char buffer[512];
    while (std::fgets(buffer, sizeof(buffer), pipe) != nullptr) lines += buffer;
    pclose(pipe);
    // Pairs of lines (function, file:line), innermost first: the call's place is the first that
    // is not inside an intrinsic, which kernels inline: kernel_api.h's, or the tensor-core
    // instructions' of kernels/cuda/tensor_cores.cuh.
    std::istringstream pairs(lines);
    for (std::string function, location; std::getline(pairs, function) && std::getline(pairs, location);) {
      if (function == "??") break;
      if (location.find("cuda_on_cpu/kernel_api.h") != std::string::npos ||
          location.find("cuda/tensor_cores.cuh") != std::string::npos)
        continue;
      described = function + " (" + location + ")";
      break;
    }
  }
  return described;
}

}  // namespace cuda_on_cpu
