// What a kernel sees when kernels/cuda/ builds with the host compiler: the built-in variables,
// the qualifiers, the device intrinsics the project's kernels use, cudaLaunchKernelEx, which
// queues a launch on its stream for the CPU implementation to run (execution.cpp): each block
// after the other, the threads of a block as fibers that switch only at __syncthreads and at
// warp operations; and cudaFuncSetAttribute's template. Only what the kernels use is here; a
// kernel using more fails to compile under the host compiler, which is the signal to add it.
// (The tensor-core instructions are kernels/cuda/tensor_cores.cuh's, on tensor_cores.h.)
#pragma once

// __shared__ storage: one per kernel variable, shared by the fibers of the running block (blocks
// run one at a time, on the host thread that waits for them). It is thread-local storage because
// that is where all of it can be found: the module that holds the kernels (a backend library) has
// no thread-local variable besides them, so its TLS block is the kernels' shared memory, which
// execution.cpp fills with 0xFF bytes (NaN as float or double, -1 as an integer, an invalid bool)
// before each block: a read of shared memory that no thread of the block wrote then shows. (GCC
// ignores a section attribute on the static locals of template instantiations, so a section of
// their own cannot collect them.) The toolkit's host_defines.h would make __shared__ empty
// (per-thread storage), so it is defined first.
#undef __shared__
#define __shared__ static thread_local
#undef __launch_bounds__
#define __launch_bounds__(...)

#include <cuda_runtime_api.h>
#include <vector_functions.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

// The running fiber's indices and its launch's shape. Plain variables, not per host thread: one
// kernel runs at a time in a process, and the scheduler sets them whenever it switches fibers.
inline uint3 threadIdx{};
inline uint3 blockIdx{};
inline dim3 blockDim{};
inline dim3 gridDim{};
inline constexpr int warpSize = 32;

namespace cuda_on_cpu {

// A pointer argument of a launch, which must point into device memory (or be null).
struct PointerArgument {
  int index;
  const void* pointer;
};

// Queues a launch of `kernel` as `config` says; `run_thread` runs the kernel body for the current
// fiber. Returns the error the driver would give for a bad configuration (the launch is then
// dropped); a pointer argument outside device memory makes the launch fault when it runs
// (cudaErrorIllegalAddress, sticky), as on a GPU.
cudaError_t launch_kernel(const cudaLaunchConfig_t& config, const void* kernel,
                          std::vector<PointerArgument> pointer_arguments, std::function<void()> run_thread);

// The engine's side of the intrinsics below. Each takes the code address it returns to, in the
// kernel that calls it, for reports of where a fiber waits.
void sync_block();
uint64_t shuffle_xor(unsigned mask, uint64_t bits, int lane_mask, int width);

template <typename T>
uint64_t to_bits(T value) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= sizeof(uint64_t));
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  return bits;
}

template <typename T>
T from_bits(uint64_t bits) {
  T value;
  std::memcpy(&value, &bits, sizeof(T));
  return value;
}

template <typename Params, std::size_t... I>
std::vector<PointerArgument> pointer_arguments_of(const Params& params, std::index_sequence<I...>) {
  std::vector<PointerArgument> pointers;
  (..., [&] {
    using Param = std::tuple_element_t<I, Params>;
    if constexpr (std::is_pointer_v<Param>)
      pointers.push_back({static_cast<int>(I), static_cast<const void*>(std::get<I>(params))});
  }());
  return pointers;
}

}  // namespace cuda_on_cpu

// CUDA's variadic launch (cuda_runtime.h): each argument converted to its parameter's type, as
// the toolkit's template does, then copied into the launch, which every fiber calls the kernel
// with.
template <typename... ExpTypes, typename... ActTypes>
cudaError_t cudaLaunchKernelEx(const cudaLaunchConfig_t* config, void (*kernel)(ExpTypes...), ActTypes&&... args) {
  using Params = std::tuple<std::decay_t<ExpTypes>...>;
  Params params(static_cast<ExpTypes>(std::forward<ActTypes>(args))...);
  std::vector<cuda_on_cpu::PointerArgument> pointers =
      cuda_on_cpu::pointer_arguments_of(params, std::index_sequence_for<ExpTypes...>{});
  return cuda_on_cpu::launch_kernel(*config, reinterpret_cast<const void*>(kernel), std::move(pointers),
                                    [kernel, params = std::move(params)] { std::apply(kernel, params); });
}

// CUDA's templated cudaFuncSetAttribute (cuda_runtime.h), which takes the kernel itself.
template <typename... Params>
cudaError_t cudaFuncSetAttribute(void (*kernel)(Params...), cudaFuncAttribute attribute, int value) {
  return cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel), attribute, value);
}

// Device intrinsics. The wrappers are always inlined, so that the engine's functions return
// into the kernel, at its call site.

// The block's barrier: every thread of the block must reach it (the CPU implementation reports
// one that some thread leaves by returning as a deadlock).
[[gnu::always_inline]] inline void __syncthreads() { cuda_on_cpu::sync_block(); }

// value from lane (lane ^ lane_mask) of the warp; every lane named in `mask` must reach it.
template <typename T>
[[gnu::always_inline]] inline T __shfl_xor_sync(unsigned mask, T value, int lane_mask, int width = warpSize) {
  return cuda_on_cpu::from_bits<T>(cuda_on_cpu::shuffle_xor(mask, cuda_on_cpu::to_bits(value), lane_mask, width));
}

// Blocks run one after another and fibers switch only at barriers and warp operations, so every
// write is already visible to every later reader, and a read-modify-write is atomic.
inline void __threadfence() {}
inline unsigned int atomicAdd(unsigned int* address, unsigned int value) {
  const unsigned int old = *address;
  *address = old + value;
  return old;
}
template <typename T>
inline T __ldcg(const T* address) {
  return *address;
}

// CUDA's device-side overloads that the host's <cmath> does not have in the global namespace.
template <typename A, typename B>
constexpr std::common_type_t<A, B> min(A a, B b) {
  using Common = std::common_type_t<A, B>;
  return static_cast<Common>(b) < static_cast<Common>(a) ? static_cast<Common>(b) : static_cast<Common>(a);
}
template <typename A, typename B>
constexpr std::common_type_t<A, B> max(A a, B b) {
  using Common = std::common_type_t<A, B>;
  return static_cast<Common>(a) < static_cast<Common>(b) ? static_cast<Common>(b) : static_cast<Common>(a);
}
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
