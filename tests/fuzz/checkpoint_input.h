// The input format of the checkpoint fuzzer (fuzz_checkpoint.cpp), which the seed maker
// (make_checkpoint_seeds.cpp) writes: one byte string holding a checkpoint's two files,
//   [2 bytes: n, little-endian] [n bytes: the sidecar step-N.json] [the rest: the step-N.h5 file]
// An input shorter than its header, or than n, gives the sidecar what there is and an empty file.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace trainctl::fuzz {

struct CheckpointFiles {
  std::string_view sidecar;
  std::string_view hdf5;
};

inline CheckpointFiles split_checkpoint_input(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  if (bytes.size() < 2) return {bytes, {}};
  const size_t sidecar_size = std::min<size_t>(data[0] | (size_t{data[1]} << 8), bytes.size() - 2);
  return {bytes.substr(2, sidecar_size), bytes.substr(2 + sidecar_size)};
}

inline std::string join_checkpoint_input(std::string_view sidecar, std::string_view hdf5) {
  if (sidecar.size() > 0xffff) throw std::length_error("a fuzz input's sidecar holds at most 65535 bytes");
  std::string input{static_cast<char>(sidecar.size() & 0xff), static_cast<char>(sidecar.size() >> 8)};
  input.append(sidecar);
  input.append(hdf5);
  return input;
}

}  // namespace trainctl::fuzz
