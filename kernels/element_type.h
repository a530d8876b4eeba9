// The element types of the tensors the device seam's ops read and write: f32, and bf16 (the top
// half of an f32: 8 exponent bits, 7 mantissa bits), in which train.precision = "bf16" stores the
// activations and their gradients and the compute copy of the parameters. A pointer an op takes
// carries the type of what it points to (TypedPtr), so one op serves both and the type is checked
// where it is used, not assumed.
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>

namespace trainctl {

enum class ElementType : uint8_t { kF32, kBf16 };

inline size_t element_bytes(ElementType type) { return type == ElementType::kBf16 ? 2 : 4; }
inline const char* element_type_name(ElementType type) { return type == ElementType::kBf16 ? "bf16" : "f32"; }

// A bf16 value on the host: its bits, as __nv_bfloat16 holds them on a GPU.
struct Bf16 {
  uint16_t bits;
};

inline float to_float(Bf16 value) { return std::bit_cast<float>(static_cast<uint32_t>(value.bits) << 16); }

// Rounds to nearest, ties to even, as __float2bfloat16_rn does; NaN stays NaN (quieted) instead of
// rounding into infinity.
inline Bf16 to_bf16(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  if (std::isnan(x)) return {static_cast<uint16_t>((bits | 0x00400000u) >> 16)};
  return {static_cast<uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16)};
}

// fp32 -> bf16 -> fp32.
inline float round_to_bf16(float x) { return to_float(to_bf16(x)); }

struct TypedPtr {
  void* data = nullptr;
  ElementType type = ElementType::kF32;

  TypedPtr() = default;
  TypedPtr(void* data, ElementType type) : data(data), type(type) {}
  TypedPtr(float* f32) : data(f32) {}  // NOLINT: a float* is an f32 tensor
  TypedPtr(Bf16* bf16) : data(bf16), type(ElementType::kBf16) {}  // NOLINT

  explicit operator bool() const { return data != nullptr; }
  // The pointer `elements` further on.
  TypedPtr operator+(int64_t elements) const {
    return {static_cast<std::byte*>(data) + elements * static_cast<int64_t>(element_bytes(type)), type};
  }
  float* f32() const { return static_cast<float*>(data); }
  Bf16* bf16() const { return static_cast<Bf16*>(data); }
};

struct ConstTypedPtr {
  const void* data = nullptr;
  ElementType type = ElementType::kF32;

  ConstTypedPtr() = default;
  ConstTypedPtr(const void* data, ElementType type) : data(data), type(type) {}
  ConstTypedPtr(TypedPtr typed) : data(typed.data), type(typed.type) {}  // NOLINT
  ConstTypedPtr(const float* f32) : data(f32) {}  // NOLINT
  ConstTypedPtr(const Bf16* bf16) : data(bf16), type(ElementType::kBf16) {}  // NOLINT

  explicit operator bool() const { return data != nullptr; }
  ConstTypedPtr operator+(int64_t elements) const {
    return {static_cast<const std::byte*>(data) + elements * static_cast<int64_t>(element_bytes(type)), type};
  }
  const float* f32() const { return static_cast<const float*>(data); }
  const Bf16* bf16() const { return static_cast<const Bf16*>(data); }
};

}  // namespace trainctl
