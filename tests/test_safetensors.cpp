// Tests for the safetensors writer (storage/safetensors.cpp), read back byte by byte: the
// little-endian header length, a JSON header with each tensor's dtype, shape and data offsets
// and "__metadata__", space padding to a multiple of 8, and the tensors' float32 bytes at
// their offsets, in the order given. And for the reader: the writer's files round trip bitwise,
// BF16 and F16 widen exactly, and malformed files are refused with their problem.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "safetensors.h"

using trainctl::Tensor;

namespace {

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

std::string temporary_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("trainctl-test-" + name + "-" + std::to_string(getpid()))).string();
}

// A safetensors file of `header` (JSON text) and `data`, as another writer may lay it out.
std::string write_raw(const std::string& name, const std::string& header, const std::string& data) {
  const std::string path = temporary_path(name);
  std::string bytes(8, '\0');
  for (size_t i = 0; i < 8; ++i) bytes[i] = static_cast<char>(header.size() >> (8 * i) & 0xFF);
  std::ofstream(path, std::ios::binary) << bytes << header << data;
  return path;
}

}  // namespace

TEST_CASE("safetensors: header length, JSON header, alignment and tensor bytes") {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("trainctl-test-safetensors-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "model.safetensors").string();
  const std::vector<Tensor> tensors = {
      {"transformer.wte.weight", {2, 3}, {0.5f, -1.0f, 2.0f, 3.25f, -0.0f, 1e-30f}},
      {"transformer.ln_f.bias", {3}, {7.0f, 8.0f, -9.5f}},
      {"empty", {0, 4}, {}},
  };
  trainctl::write_safetensors(path, tensors);
  const std::string bytes = read_bytes(path);
  CHECK(std::distance(std::filesystem::directory_iterator(dir), {}) == 1);  // no temporary left
  std::filesystem::remove_all(dir);

  REQUIRE(bytes.size() >= 8);
  uint64_t header_length = 0;
  for (int i = 7; i >= 0; --i) header_length = header_length << 8 | static_cast<unsigned char>(bytes[static_cast<size_t>(i)]);
  CHECK(header_length % 8 == 0);
  const size_t data_start = 8 + header_length;
  REQUIRE(bytes.size() == data_start + 9 * sizeof(float));

  const std::string header_text = bytes.substr(8, header_length);
  CHECK(header_text.front() == '{');
  const size_t last = header_text.find_last_not_of(' ');
  CHECK(header_text[last] == '}');
  CHECK(header_length - (last + 1) < 8);  // the padding is spaces, fewer than 8
  const nlohmann::json header = nlohmann::json::parse(header_text);
  CHECK(header.size() == 4);
  CHECK(header["__metadata__"] == nlohmann::json{{"format", "pt"}});

  size_t expected_begin = 0;
  for (const Tensor& tensor : tensors) {
    CAPTURE(tensor.name);
    const nlohmann::json& entry = header.at(tensor.name);
    CHECK(entry.size() == 3);
    CHECK(entry["dtype"] == "F32");
    CHECK(entry["shape"].get<std::vector<int64_t>>() == tensor.shape);
    const auto offsets = entry["data_offsets"].get<std::vector<size_t>>();
    const size_t byte_count = tensor.values.size() * sizeof(float);
    CHECK(offsets == std::vector<size_t>{expected_begin, expected_begin + byte_count});
    const char* stored = bytes.data() + data_start + expected_begin;
    CHECK(std::equal(stored, stored + byte_count, reinterpret_cast<const char*>(tensor.values.data())));
    expected_begin += byte_count;
  }
}

TEST_CASE("safetensors: a name given twice is refused") {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("trainctl-test-twice-" + std::to_string(getpid()))).string();
  CHECK_THROWS_WITH_AS(trainctl::write_safetensors(path, {{"a", {1}, {1.0f}}, {"a", {1}, {2.0f}}}),
                       (path + ": tensor a is given twice").c_str(), std::invalid_argument);
  CHECK_FALSE(std::filesystem::exists(path));
}

TEST_CASE("safetensors: what the writer writes reads back bitwise, in data order") {
  const std::string path = temporary_path("round-trip");
  const std::vector<Tensor> tensors = {{"z.first", {2, 2}, {0.5f, -1.0f, 1e-40f, -0.0f}}, {"a.second", {1}, {3.0f}}};
  trainctl::write_safetensors(path, tensors);
  const std::vector<Tensor> read = trainctl::read_safetensors(path);
  std::filesystem::remove(path);
  REQUIRE(read.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    CHECK(read[i].name == tensors[i].name);
    CHECK(read[i].shape == tensors[i].shape);
    CHECK(std::memcmp(read[i].values.data(), tensors[i].values.data(), tensors[i].values.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("safetensors: BF16 and F16 widen to float exactly") {
  // BF16 0x3FC0 = 1.5, 0xC020 = -2.5; F16 0x3C00 = 1, 0xC500 = -5, 0x0001 = 2^-24 (subnormal),
  // 0x7BFF = 65504 (the largest), 0xFC00 = -infinity.
  const std::string data("\xC0\x3F\x20\xC0\x00\x3C\x00\xC5\x01\x00\xFF\x7B\x00\xFC", 14);
  const std::string path = write_raw(
      "halves", R"({"b":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]},"h":{"dtype":"F16","shape":[5],"data_offsets":[4,14]}})",
      data);
  const std::vector<Tensor> read = trainctl::read_safetensors(path);
  std::filesystem::remove(path);
  REQUIRE(read.size() == 2);
  CHECK(read[0].values == std::vector<float>{1.5f, -2.5f});
  CHECK(read[1].values == std::vector<float>{1.0f, -5.0f, std::ldexp(1.0f, -24), 65504.0f, -INFINITY});
}

TEST_CASE("safetensors: malformed files are refused, naming the file and the problem") {
  const auto refused = [](const std::string& path) {
    std::string message;
    try {
      trainctl::read_safetensors(path);
    } catch (const trainctl::SafetensorsError& error) {
      message = error.what();
    }
    std::filesystem::remove(path);
    return message;
  };
  const std::string entry = R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  std::string path = write_raw("short-data", entry, std::string(4, '\0'));
  CHECK(refused(path) == path + ": tensor t ends at byte 8 of the data, which has 4 (truncated)");
  path = write_raw("long-header", entry, "");
  std::filesystem::resize_file(path, 20);
  CHECK(refused(path) == path + ": its header length 54 does not fit its 20 bytes (truncated, or not a safetensors file)");
  path = write_raw("not-json", "{nope", "");
  CHECK(refused(path) == path + ": its header is not a JSON object");
  path = write_raw("i64", R"({"t":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})", std::string(8, '\0'));
  CHECK(refused(path) == path + ": tensor t: dtype I64 is not one of F32, BF16, F16");
  path = write_raw("mismatch", R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", std::string(8, '\0'));
  CHECK(refused(path) == path + ": tensor t: data_offsets [0, 8] do not hold 3 values of F32");
  CHECK(refused(temporary_path("absent")) == "cannot read " + temporary_path("absent") + ": No such file or directory");
}
