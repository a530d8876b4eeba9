// The safetensors writer and reader: see safetensors.h.
#include "safetensors.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "atomic_file.h"
#include "element_type.h"

namespace trainctl {

// The length and the tensors are written as the host's own bytes.
static_assert(std::endian::native == std::endian::little, "safetensors files are little-endian");

namespace {
// Readers map the data right after the header; aligned offsets let them view it in place.
constexpr size_t kHeaderAlignment = 8;
// The format's own limit on the header (safetensors refuses larger ones as hostile).
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
// How many values a reader or a converting writer holds in stored form at once.
constexpr size_t kChunkValues = size_t{1} << 22;
constexpr std::array kDtypes{SafetensorsDtype::kF32, SafetensorsDtype::kBf16, SafetensorsDtype::kF16};

float widen_f16(uint16_t half_bits) {
  // By its fields (_Float16 is not in every compiler the project builds with, clang 14 among
  // them): each value is a small integer times a power of two, which float holds exactly.
  const float sign = half_bits >> 15 != 0 ? -1.0f : 1.0f;
  const int exponent = half_bits >> 10 & 0x1F;
  const auto mantissa = static_cast<float>(half_bits & 0x3FF);
  if (exponent == 0x1F) return mantissa != 0.0f ? std::numeric_limits<float>::quiet_NaN() : sign * INFINITY;
  if (exponent == 0) return sign * std::ldexp(mantissa, -24);  // subnormal
  return sign * std::ldexp(mantissa + 1024.0f, exponent - 25);
}

void widen(const char* bytes, SafetensorsDtype dtype, std::span<float> out) {
  if (dtype == SafetensorsDtype::kF32) {
    std::memcpy(out.data(), bytes, out.size_bytes());
    return;
  }
  for (size_t i = 0; i < out.size(); ++i) {
    uint16_t half_bits;
    std::memcpy(&half_bits, bytes + 2 * i, sizeof(half_bits));
    out[i] = dtype == SafetensorsDtype::kBf16 ? to_float(Bf16{half_bits}) : widen_f16(half_bits);
  }
}

SafetensorsEntry parse_entry(const std::string& path, const std::string& name, const nlohmann::json& fields) {
  auto fail = [&](const std::string& problem) {
    return SafetensorsError(fmt::format("{}: tensor {}: {}", path, name, problem));
  };
  SafetensorsEntry entry{name, SafetensorsDtype::kF32, {}, 0, 0};
  if (!fields.is_object() || !fields.contains("dtype") || !fields.contains("shape") || !fields.contains("data_offsets"))
    throw fail("the header entry lacks dtype, shape or data_offsets");
  if (!fields["dtype"].is_string()) throw fail("dtype is not a string");
  const std::string dtype = fields["dtype"].get<std::string>();
  const auto known = std::find_if(kDtypes.begin(), kDtypes.end(),
                                  [&](SafetensorsDtype candidate) { return dtype == safetensors_dtype_name(candidate); });
  if (known == kDtypes.end()) throw fail(fmt::format("dtype {} is not one of F32, BF16, F16", dtype));
  entry.dtype = *known;
  uint64_t elements = 1;
  for (const nlohmann::json& extent : fields["shape"]) {
    if (!extent.is_number_unsigned()) throw fail("the shape holds something other than a non-negative integer");
    entry.shape.push_back(extent.get<int64_t>());
    elements *= extent.get<uint64_t>();
  }
  const nlohmann::json& offsets = fields["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() || !offsets[1].is_number_unsigned())
    throw fail("data_offsets is not [begin, end]");
  entry.begin = offsets[0].get<uint64_t>();
  entry.end = offsets[1].get<uint64_t>();
  if (entry.end < entry.begin || entry.end - entry.begin != elements * safetensors_dtype_bytes(entry.dtype))
    throw fail(fmt::format("data_offsets [{}, {}] do not hold {} values of {}", entry.begin, entry.end, elements, dtype));
  return entry;
}

[[noreturn]] void fail_to_read(const std::string& path) {
  throw SafetensorsError(fmt::format("cannot read {}: {}", path, std::strerror(errno)));
}
}  // namespace

const char* safetensors_dtype_name(SafetensorsDtype dtype) {
  switch (dtype) {
    case SafetensorsDtype::kF32: return "F32";
    case SafetensorsDtype::kBf16: return "BF16";
    case SafetensorsDtype::kF16: return "F16";
  }
  return "?";
}

uint64_t safetensors_dtype_bytes(SafetensorsDtype dtype) { return dtype == SafetensorsDtype::kF32 ? 4 : 2; }

void write_safetensors(const std::string& path, const std::vector<const Tensor*>& tensors, SafetensorsDtype dtype) {
  if (dtype == SafetensorsDtype::kF16) throw std::logic_error("safetensors: F16 is read, not written");
  const uint64_t width = safetensors_dtype_bytes(dtype);
  nlohmann::json header = nlohmann::json::object();
  uint64_t data_bytes = 0;
  for (const Tensor* tensor : tensors) {
    if (header.contains(tensor->name))
      throw std::invalid_argument(fmt::format("{}: tensor {} is given twice", path, tensor->name));
    const uint64_t bytes = tensor->values.size() * width;
    header[tensor->name] = {{"dtype", safetensors_dtype_name(dtype)},
                            {"shape", tensor->shape},
                            {"data_offsets", {data_bytes, data_bytes + bytes}}};
    data_bytes += bytes;
  }
  header["__metadata__"] = {{"format", "pt"}};

  std::string header_text = header.dump();
  header_text.append((kHeaderAlignment - header_text.size() % kHeaderAlignment) % kHeaderAlignment, ' ');
  const uint64_t header_length = header_text.size();
  AtomicFileWriter file(path);
  file.append({reinterpret_cast<const char*>(&header_length), sizeof(header_length)});
  file.append(header_text);
  std::vector<Bf16> narrowed;
  for (const Tensor* tensor : tensors) {
    const std::vector<float>& values = tensor->values;
    if (dtype == SafetensorsDtype::kF32) {
      file.append({reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)});
      continue;
    }
    for (size_t begin = 0; begin < values.size(); begin += kChunkValues) {
      const size_t count = std::min(kChunkValues, values.size() - begin);
      narrowed.resize(count);
      std::transform(values.begin() + static_cast<std::ptrdiff_t>(begin),
                     values.begin() + static_cast<std::ptrdiff_t>(begin + count), narrowed.begin(), to_bf16);
      file.append({reinterpret_cast<const char*>(narrowed.data()), count * sizeof(Bf16)});
    }
  }
  file.publish();
}

SafetensorsFile::SafetensorsFile(std::string path) : path_(std::move(path)) {
  std::ifstream in(path_, std::ios::binary);
  if (!in) fail_to_read(path_);
  std::error_code error;
  const uint64_t file_bytes = std::filesystem::file_size(path_, error);
  if (error) throw SafetensorsError(fmt::format("cannot read {}: {}", path_, error.message()));
  uint64_t header_length = 0;
  if (file_bytes < sizeof(header_length))
    throw SafetensorsError(fmt::format("{}: {} bytes is too short for a safetensors file", path_, file_bytes));
  if (!in.read(reinterpret_cast<char*>(&header_length), sizeof(header_length))) fail_to_read(path_);
  if (header_length > kMaxHeaderBytes || header_length > file_bytes - sizeof(header_length))
    throw SafetensorsError(fmt::format("{}: its header length {} does not fit its {} bytes (truncated, or not a "
                                       "safetensors file)", path_, header_length, file_bytes));
  std::string header_text(header_length, '\0');
  if (!in.read(header_text.data(), static_cast<std::streamsize>(header_length))) fail_to_read(path_);
  const nlohmann::json header = nlohmann::json::parse(header_text, nullptr, false);
  if (!header.is_object()) throw SafetensorsError(fmt::format("{}: its header is not a JSON object", path_));
  data_start_ = sizeof(header_length) + header_length;
  const uint64_t data_bytes = file_bytes - data_start_;

  for (const auto& [name, fields] : header.items())
    if (name != "__metadata__") entries_.push_back(parse_entry(path_, name, fields));
  std::sort(entries_.begin(), entries_.end(),
            [](const SafetensorsEntry& a, const SafetensorsEntry& b) { return a.begin < b.begin; });
  for (const SafetensorsEntry& entry : entries_)
    if (entry.end > data_bytes)
      throw SafetensorsError(fmt::format("{}: tensor {} ends at byte {} of the data, which has {} (truncated)", path_,
                                         entry.name, entry.end, data_bytes));
}

void SafetensorsFile::read(const SafetensorsEntry& entry, std::span<float> out) const {
  const uint64_t width = safetensors_dtype_bytes(entry.dtype);
  if (out.size() * width != entry.end - entry.begin)
    throw std::logic_error(fmt::format("{}: tensor {} holds {} bytes, read into {} values", path_, entry.name,
                                       entry.end - entry.begin, out.size()));
  std::ifstream in(path_, std::ios::binary);
  if (!in || !in.seekg(static_cast<std::streamoff>(data_start_ + entry.begin))) fail_to_read(path_);
  std::vector<char> stored;
  for (size_t begin = 0; begin < out.size(); begin += kChunkValues) {
    const size_t count = std::min(kChunkValues, out.size() - begin);
    stored.resize(count * width);
    if (!in.read(stored.data(), static_cast<std::streamsize>(stored.size())))
      throw SafetensorsError(fmt::format("{}: tensor {} cannot be read (the file was cut since it was opened?)",
                                         path_, entry.name));
    widen(stored.data(), entry.dtype, out.subspan(begin, count));
  }
}

}  // namespace trainctl
