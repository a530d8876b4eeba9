// The safetensors writer and reader: see safetensors.h.
#include "safetensors.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "atomic_file.h"

namespace trainctl {

// The length and the tensors are written as the host's own bytes.
static_assert(std::endian::native == std::endian::little, "safetensors files are little-endian");

namespace {
// Readers map the data right after the header; aligned offsets let them view it in place.
constexpr size_t kHeaderAlignment = 8;
// The format's own limit on the header (safetensors refuses larger ones as hostile).
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

float widen(const char* bytes, const std::string& dtype) {
  if (dtype == "F32") {
    float value;
    std::memcpy(&value, bytes, sizeof(value));
    return value;
  }
  uint16_t half_bits;
  std::memcpy(&half_bits, bytes, sizeof(half_bits));
  if (dtype == "BF16") return std::bit_cast<float>(static_cast<uint32_t>(half_bits) << 16);
  // F16 by its fields (_Float16 is not in every compiler the project builds with, clang 14 among
  // them): each value is a small integer times a power of two, which float holds exactly.
  const float sign = half_bits >> 15 != 0 ? -1.0f : 1.0f;
  const int exponent = half_bits >> 10 & 0x1F;
  const auto mantissa = static_cast<float>(half_bits & 0x3FF);
  if (exponent == 0x1F) return mantissa != 0.0f ? std::numeric_limits<float>::quiet_NaN() : sign * INFINITY;
  if (exponent == 0) return sign * std::ldexp(mantissa, -24);  // subnormal
  return sign * std::ldexp(mantissa + 1024.0f, exponent - 25);
}

size_t dtype_bytes(const std::string& dtype) { return dtype == "F32" ? 4 : dtype == "BF16" || dtype == "F16" ? 2 : 0; }

struct Entry {
  std::string name, dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};

Entry parse_entry(const std::string& path, const std::string& name, const nlohmann::json& fields) {
  auto fail = [&](const std::string& problem) {
    return SafetensorsError(fmt::format("{}: tensor {}: {}", path, name, problem));
  };
  Entry entry{name, {}, {}, 0, 0};
  if (!fields.is_object() || !fields.contains("dtype") || !fields.contains("shape") || !fields.contains("data_offsets"))
    throw fail("the header entry lacks dtype, shape or data_offsets");
  if (!fields["dtype"].is_string()) throw fail("dtype is not a string");
  entry.dtype = fields["dtype"].get<std::string>();
  if (dtype_bytes(entry.dtype) == 0)
    throw fail(fmt::format("dtype {} is not one of F32, BF16, F16", entry.dtype));
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
  if (entry.end < entry.begin || entry.end - entry.begin != elements * dtype_bytes(entry.dtype))
    throw fail(fmt::format("data_offsets [{}, {}] do not hold {} values of {}", entry.begin, entry.end, elements,
                           entry.dtype));
  return entry;
}
}  // namespace

void write_safetensors(const std::string& path, const std::vector<Tensor>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  size_t data_bytes = 0;
  for (const Tensor& tensor : tensors) {
    if (header.contains(tensor.name))
      throw std::invalid_argument(fmt::format("{}: tensor {} is given twice", path, tensor.name));
    const size_t bytes = tensor.values.size() * sizeof(float);
    header[tensor.name] = {{"dtype", "F32"}, {"shape", tensor.shape}, {"data_offsets", {data_bytes, data_bytes + bytes}}};
    data_bytes += bytes;
  }
  header["__metadata__"] = {{"format", "pt"}};

  std::string header_text = header.dump();
  header_text.append((kHeaderAlignment - header_text.size() % kHeaderAlignment) % kHeaderAlignment, ' ');
  const uint64_t header_length = header_text.size();
  std::string bytes(reinterpret_cast<const char*>(&header_length), sizeof(header_length));
  bytes.reserve(bytes.size() + header_text.size() + data_bytes);
  bytes += header_text;
  for (const Tensor& tensor : tensors)
    bytes.append(reinterpret_cast<const char*>(tensor.values.data()), tensor.values.size() * sizeof(float));
  write_file_atomically(path, bytes);
}

std::vector<Tensor> read_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw SafetensorsError(fmt::format("cannot read {}: {}", path, std::strerror(errno)));
  const std::string bytes(std::istreambuf_iterator<char>(in), {});
  uint64_t header_length = 0;
  if (bytes.size() < sizeof(header_length))
    throw SafetensorsError(fmt::format("{}: {} bytes is too short for a safetensors file", path, bytes.size()));
  std::memcpy(&header_length, bytes.data(), sizeof(header_length));
  if (header_length > kMaxHeaderBytes || header_length > bytes.size() - sizeof(header_length))
    throw SafetensorsError(fmt::format("{}: its header length {} does not fit its {} bytes (truncated, or not a "
                                       "safetensors file)", path, header_length, bytes.size()));
  const nlohmann::json header =
      nlohmann::json::parse(bytes.begin() + sizeof(header_length),
                            bytes.begin() + static_cast<std::ptrdiff_t>(sizeof(header_length) + header_length),
                            nullptr, false);
  if (!header.is_object()) throw SafetensorsError(fmt::format("{}: its header is not a JSON object", path));
  const uint64_t data_start = sizeof(header_length) + header_length;
  const uint64_t data_bytes = bytes.size() - data_start;

  std::vector<Entry> entries;
  for (const auto& [name, fields] : header.items())
    if (name != "__metadata__") entries.push_back(parse_entry(path, name, fields));
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.begin < b.begin; });
  std::vector<Tensor> tensors;
  for (const Entry& entry : entries) {
    if (entry.end > data_bytes)
      throw SafetensorsError(fmt::format("{}: tensor {} ends at byte {} of the data, which has {} (truncated)", path,
                                         entry.name, entry.end, data_bytes));
    Tensor tensor{entry.name, entry.shape, {}};
    const size_t width = dtype_bytes(entry.dtype);
    tensor.values.resize((entry.end - entry.begin) / width);
    const char* source = bytes.data() + data_start + entry.begin;
    for (size_t i = 0; i < tensor.values.size(); ++i) tensor.values[i] = widen(source + i * width, entry.dtype);
    tensors.push_back(std::move(tensor));
  }
  return tensors;
}

}  // namespace trainctl
