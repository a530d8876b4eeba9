// Tests for the safetensors writer (storage/safetensors.cpp), read back byte by byte: the
// little-endian header length, a JSON header with each tensor's dtype, shape and data offsets
// and "__metadata__", space padding to a multiple of 8, and the tensors' float32 bytes at
// their offsets, in the order given.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
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
