// Memory owned on one device of the seam (kernels/device.h), released when it goes away: of one
// C++ type (DeviceBuffer<T>), or of an element type chosen at run time (TypedBuffer: activations,
// f32 or bf16 as train.precision stores them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

#include "device.h"

namespace trainctl {

template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const Device& device, int64_t count)
      : device_(&device), data_(static_cast<T*>(device.memory.alloc(static_cast<size_t>(count) * sizeof(T)))), count_(count) {}
  DeviceBuffer(DeviceBuffer&& other) noexcept { swap(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    swap(other);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (data_ != nullptr) device_->memory.release(data_);
  }

  T* get() const { return data_; }
  int64_t size() const { return count_; }
  // Copies ordered on the legacy default stream; complete when they return.
  void upload(const T* host, int64_t count) {
    device_->memory.upload(Stream{}, data_, host, static_cast<size_t>(count) * sizeof(T));
  }
  void download(T* host, int64_t count) const {
    device_->memory.download(Stream{}, host, data_, static_cast<size_t>(count) * sizeof(T));
  }

 private:
  void swap(DeviceBuffer& other) noexcept {
    std::swap(device_, other.device_);
    std::swap(data_, other.data_);
    std::swap(count_, other.count_);
  }

  const Device* device_ = nullptr;
  T* data_ = nullptr;
  int64_t count_ = 0;
};

class TypedBuffer {
 public:
  TypedBuffer() = default;
  TypedBuffer(const Device& device, ElementType type, int64_t count)
      : bytes_(device, count * static_cast<int64_t>(element_bytes(type))), type_(type), count_(count) {}

  TypedPtr get() const { return {bytes_.get(), type_}; }
  ElementType type() const { return type_; }
  int64_t size() const { return count_; }

 private:
  DeviceBuffer<std::byte> bytes_;
  ElementType type_ = ElementType::kF32;
  int64_t count_ = 0;
};

}  // namespace trainctl
