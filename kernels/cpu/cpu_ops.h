// The CPU reference ops, declared from the op list for cpu_device.cpp, which assembles them into
// the table, and what their files share. Private to kernels/cpu/: everything else reaches them
// through cpu_device().
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "device.h"

// glibc's libmvec (x86-64, glibc >= 2.35) has vector variants of erff, expf and tanhf, but
// <math.h> declares them only under -ffast-math, which would also license reassociation
// everywhere. Declaring them here lets the activation and softmax loops vectorize, with IEEE
// semantics kept elsewhere.
#if defined(__x86_64__) && defined(__GLIBC__) && __GLIBC_PREREQ(2, 35)
extern "C" __attribute__((simd("notinbranch"))) float erff(float) noexcept;
extern "C" __attribute__((simd("notinbranch"))) float expf(float) noexcept;
extern "C" __attribute__((simd("notinbranch"))) float tanhf(float) noexcept;
#endif

namespace trainctl::cpu {

// Reduces term(0), ..., term(n - 1) with `combine` in a fixed order that vectorizes: kLanes
// interleaved partial results, combined at the end. One running result would be a chain of
// dependent operations that IEEE semantics forbid the compiler to reorder; this order is just
// as fixed (the same result on every call) but has kLanes independent chains.
template <typename Value, typename Term, typename Combine>
Value lane_reduce(int64_t n, Value identity, Term term, Combine combine) {
  constexpr int64_t kLanes = 8;
  Value partial[kLanes];
  std::fill(partial, partial + kLanes, identity);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t lane = 0; lane < kLanes; ++lane) partial[lane] = combine(partial[lane], term(i + lane));
  for (int64_t lane = 0; i < n; ++i, ++lane) partial[lane] = combine(partial[lane], term(i));
  Value total = identity;
  for (const Value value : partial) total = combine(total, value);
  return total;
}

template <typename Value, typename Term>
Value lane_sum(int64_t n, Term term) {
  return lane_reduce(n, Value{0}, term, [](Value a, Value b) { return a + b; });
}

// A parameter gradient summed over a call's rows (a bias, a LayerNorm weight) is collected in
// this zeroed scratch first and added to the gradient once (add_column_sums): each micro-batch
// contributes one partial sum, so 1 rank x grad_accum 2 and 2 ranks x grad_accum 1 sum the same
// partial sums in the same order, and a small sum is never rounded against a large running one.
// `slot` tells apart the scratches one op uses at once.
float* zeroed_column_sums(int slot, int64_t cols);
void add_column_sums(float* gradient, const float* sums, int64_t cols);

// A thread's scratch of `count` values of T, grown as needed and kept: the ops' temporaries (a bf16
// operand widened to float, say) are of the few shapes a training step has. `slot` tells apart
// the scratches one op uses at once.
template <typename T>
T* scratch(int slot, int64_t count) {
  thread_local std::vector<T> buffers[4];
  std::vector<T>& buffer = buffers[slot];
  if (buffer.size() < static_cast<size_t>(count)) buffer.resize(static_cast<size_t>(count));
  return buffer.data();
}

// Element i of a typed tensor as a float, and a float stored into one (rounded to bf16 there).
inline float load(ConstTypedPtr x, int64_t i) {
  return x.type == ElementType::kBf16 ? to_float(x.bf16()[i]) : x.f32()[i];
}
inline void store(TypedPtr x, int64_t i, float value) {
  if (x.type == ElementType::kBf16)
    x.bf16()[i] = to_bf16(value);
  else
    x.f32()[i] = value;
}

// The floats of x[0, n): x itself when it is f32, else widened into scratch `slot`.
const float* as_floats(ConstTypedPtr x, int64_t n, int slot);
// Where an op writes n floats that end up in x: x itself when it is f32, else scratch `slot`,
// which store_floats then rounds into x.
float* floats_for(TypedPtr x, int64_t n, int slot);
void store_floats(TypedPtr x, const float* values, int64_t n);

// The ops of the table (device_ops.def), defined one family per file: memory.cpp (with info and
// streams), blas.cpp, elementwise.cpp, norm.cpp, embedding.cpp, attention.cpp, rope.cpp, loss.cpp,
// optimizer.cpp. The CPU has no collectives (cpu_device.cpp).
#include "device_declarations.inc"

}  // namespace trainctl::cpu
