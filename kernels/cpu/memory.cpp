// The CPU's memory, info and streams families: host memory is device memory, so copies are
// memcpy, binding and pinning do nothing and there is no separate device peak, nor free device
// memory, nor anything to count; peak_flops estimates the dense fp32 FMA peak from /proc/cpuinfo. Every op completes
// before it returns, so there is nothing to queue: every stream is Stream{}. Also the typed
// tensors' widening into float scratch that the other families share (cpu_ops.h).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <new>
#include <set>
#include <sstream>
#include <string>

#include "cpu_ops.h"

namespace trainctl::cpu {

namespace {

// The threads OpenBLAS computes with, as it decides: OPENBLAS_NUM_THREADS, else
// OMP_NUM_THREADS, else 1 (what the runtime sets for one rank per core).
int blas_threads() {
  for (const char* variable : {"OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"}) {
    const char* value = std::getenv(variable);
    if (value == nullptr) continue;
    const int threads = std::atoi(value);
    if (threads > 0) return threads;
  }
  return 1;
}

// Single-precision FLOPs per cycle of one core: two FMA pipes of 8 (AVX2) or 16 (AVX-512)
// lanes, each FMA two FLOPs; without them, a conservative 8.
double flops_per_cycle(const std::set<std::string>& flags) {
  if (flags.contains("avx512f")) return 64.0;
  if (flags.contains("avx2") && flags.contains("fma")) return 32.0;
  return 8.0;
}

// threads x clock x FLOPs per cycle, from the first processor's "cpu MHz" and "flags" lines;
// 0 when /proc/cpuinfo does not say (another OS, an architecture that reports no clock).
double estimate_peak_flops() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  double megahertz = 0.0;
  std::set<std::string> flags;
  std::string line;
  while (std::getline(cpuinfo, line) && (megahertz == 0.0 || flags.empty())) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = line.substr(0, line.find_last_not_of(" \t", colon - 1) + 1);
    std::istringstream value(line.substr(colon + 1));
    if (key == "cpu MHz" && megahertz == 0.0) {
      value >> megahertz;
    } else if (key == "flags" && flags.empty()) {
      for (std::string flag; value >> flag;) flags.insert(flag);
    }
  }
  return blas_threads() * megahertz * 1e6 * flops_per_cycle(flags);
}

}  // namespace

std::string bind_local(int, int) { return "the host's CPU"; }

void* alloc(size_t bytes) {
  // 64-byte alignment keeps OpenBLAS on its aligned paths; aligned_alloc needs a multiple of it.
  void* pointer = std::aligned_alloc(64, std::max<size_t>(64, (bytes + 63) / 64 * 64));
  if (pointer == nullptr) throw std::bad_alloc();
  return pointer;
}

void release(void* pointer) { std::free(pointer); }

void upload(Stream, void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }
void download(Stream, void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }
void copy(Stream, void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }

void fill_zero(Stream, void* x, size_t bytes) { std::memset(x, 0, bytes); }

void convert(Stream, TypedPtr dst, ConstTypedPtr src, int64_t n) {
  if (dst.type == src.type) {
    std::memcpy(dst.data, src.data, static_cast<size_t>(n) * element_bytes(dst.type));
    return;
  }
  for (int64_t i = 0; i < n; ++i) store(dst, i, load(src, i));
}

const float* as_floats(ConstTypedPtr x, int64_t n, int slot) {
  if (x.type == ElementType::kF32) return x.f32();
  float* floats = scratch<float>(slot, n);
  for (int64_t i = 0; i < n; ++i) floats[i] = to_float(x.bf16()[i]);
  return floats;
}

float* floats_for(TypedPtr x, int64_t n, int slot) {
  return x.type == ElementType::kF32 ? x.f32() : scratch<float>(slot, n);
}

void store_floats(TypedPtr x, const float* values, int64_t n) {
  if (x.type == ElementType::kF32) {
    if (x.f32() != values) std::memcpy(x.f32(), values, static_cast<size_t>(n) * sizeof(float));
    return;
  }
  for (int64_t i = 0; i < n; ++i) x.bf16()[i] = to_bf16(values[i]);
}

void pin_host(void*, size_t) {}
void unpin_host(void*) {}

// An estimate of the dense fp32 FMA peak of the threads this rank computes with (the clock
// read is the current one, not a turbo maximum). bf16 is the same: the CPU's bf16 GEMM widens
// its operands and multiplies in fp32, using no bf16 units.
double peak_flops(bool) {
  static const double peak = estimate_peak_flops();
  return peak;
}

int64_t peak_allocated_bytes() { return 0; }

std::optional<DeviceActivity> activity() { return std::nullopt; }

// Host memory is shared with everything else on the node; the job's memory request, which
// `trainctl validate` holds to the estimate, is what bounds a rank's share of it.
std::optional<int64_t> free_memory_bytes() { return std::nullopt; }

// The ops' scratch is thread_local, released with the thread.
void unbind() {}

Stream create_stream() { return Stream{}; }
void destroy_stream(Stream) {}

}  // namespace trainctl::cpu
