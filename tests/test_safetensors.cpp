// Tests for the safetensors writer (storage/safetensors.cpp), read back byte by byte: the
// little-endian header length, a JSON header with each tensor's dtype, shape and data offsets
// and "__metadata__", space padding to a multiple of 8, and the tensors' float32 bytes at
// their offsets, in the order given; BF16 rounded to nearest, ties to even. And for the reader:
// the writer's files round trip bitwise, BF16 and F16 widen exactly, and malformed files are
// refused with their problem. And for a Hugging Face directory's weights
// (storage/hugging_face_weights.cpp): save_pretrained's max_shard_size spellings, its shards
// (huggingface_hub's own test case) and file names, the index as it writes it, and every way a
// sharded directory can disagree with its index, refused naming the file and the tensor.
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

#include "hugging_face_weights.h"
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

// Every tensor of the file, values read.
std::vector<Tensor> read_all(const std::string& path) {
  const trainctl::SafetensorsFile file(path);
  std::vector<Tensor> tensors;
  for (const trainctl::SafetensorsEntry& entry : file.entries()) {
    Tensor tensor{entry.name, entry.shape, {}};
    tensor.values.resize((entry.end - entry.begin) / trainctl::safetensors_dtype_bytes(entry.dtype));
    file.read(entry, tensor.values);
    tensors.push_back(std::move(tensor));
  }
  return tensors;
}

std::vector<const Tensor*> pointers(const std::vector<Tensor>& tensors) {
  std::vector<const Tensor*> all;
  for (const Tensor& tensor : tensors) all.push_back(&tensor);
  return all;
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
  trainctl::write_safetensors(path, pointers(tensors));
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
  const std::vector<Tensor> twice{{"a", {1}, {1.0f}}, {"a", {1}, {2.0f}}};
  CHECK_THROWS_WITH_AS(trainctl::write_safetensors(path, pointers(twice)),
                       (path + ": tensor a is given twice").c_str(), std::invalid_argument);
  CHECK_FALSE(std::filesystem::exists(path));
}

TEST_CASE("safetensors: what the writer writes reads back bitwise, in data order") {
  const std::string path = temporary_path("round-trip");
  const std::vector<Tensor> tensors = {{"z.first", {2, 2}, {0.5f, -1.0f, 1e-40f, -0.0f}}, {"a.second", {1}, {3.0f}}};
  trainctl::write_safetensors(path, pointers(tensors));
  const std::vector<Tensor> read = read_all(path);
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
  const std::vector<Tensor> read = read_all(path);
  std::filesystem::remove(path);
  REQUIRE(read.size() == 2);
  CHECK(read[0].values == std::vector<float>{1.5f, -2.5f});
  CHECK(read[1].values == std::vector<float>{1.0f, -5.0f, std::ldexp(1.0f, -24), 65504.0f, -INFINITY});
}

TEST_CASE("safetensors: malformed files are refused, naming the file and the problem") {
  const auto refused = [](const std::string& path) {
    std::string message;
    try {
      trainctl::SafetensorsFile{path};
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

TEST_CASE("safetensors: BF16 is written rounded to nearest, ties to even, and widens back") {
  const std::string path = temporary_path("bf16");
  // 1 + 2^-8 lies halfway between BF16 1 (0x3F80) and 1 + 2^-7 (0x3F81): to the even 0x3F80;
  // 1 + 3 * 2^-8 halfway between 0x3F81 and 0x3F82: to 0x3F82; 1 + 2^-8 + 2^-20 above half: 0x3F81.
  const std::vector<Tensor> tensors = {
      {"w", {2, 2}, {1.0f, 1.00390625f, 1.01171875f, 1.00390625f + 0x1p-20f}}, {"b", {1}, {-2.5f}}};
  trainctl::write_safetensors(path, pointers(tensors), trainctl::SafetensorsDtype::kBf16);
  const std::string bytes = read_bytes(path);
  const std::vector<Tensor> read = read_all(path);
  std::filesystem::remove(path);
  uint64_t header_length = 0;
  std::memcpy(&header_length, bytes.data(), sizeof(header_length));
  const nlohmann::json header = nlohmann::json::parse(bytes.substr(8, header_length));
  CHECK(header["w"]["dtype"] == "BF16");
  CHECK(header["w"]["data_offsets"] == nlohmann::json{0, 8});
  CHECK(header["b"]["data_offsets"] == nlohmann::json{8, 10});
  CHECK(bytes.substr(8 + header_length) == std::string("\x80\x3F\x80\x3F\x82\x3F\x81\x3F\x20\xC0", 10));
  REQUIRE(read.size() == 2);
  CHECK(read[0].values == std::vector<float>{1.0f, 1.0f, 1.015625f, 1.0078125f});
  CHECK(read[1].values == std::vector<float>{-2.5f});
}

TEST_CASE("hugging face weights: max_shard_size as save_pretrained spells it") {
  using trainctl::parse_shard_size;
  CHECK(parse_shard_size("5GB") == 5'000'000'000);
  CHECK(parse_shard_size("5gb") == 5'000'000'000);
  CHECK(parse_shard_size(" 0.5 MB ") == 500'000);
  CHECK(parse_shard_size("10kB") == 10'000);
  CHECK(parse_shard_size("2TB") == 2'000'000'000'000);
  CHECK(parse_shard_size("1e3KB") == 1'000'000);
  CHECK(parse_shard_size("0.1KB") == 100);  // int(0.1 * 1000) = int(100.00000000000001)
  CHECK(parse_shard_size("123456") == 123'456);  // save_pretrained's int: bytes
  for (const char* bad : {"", "GB", "5GiB", "5 G", "five GB", "0KB", "-5GB", "0", "nanGB"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(parse_shard_size(bad), std::invalid_argument);
  }
  CHECK_THROWS_WITH(parse_shard_size("5GiB"),
                    "\"5GiB\" is not a size: a number of bytes, or a number and a unit KB, MB, GB or TB (as \"5GB\")");
}

TEST_CASE("hugging face weights: shards fill in order; a tensor above the size gets its own, put first") {
  // huggingface_hub's own test of split_state_dict_into_shards: sizes 6, 10, 30, 2, 2 at 10.
  using Shards = std::vector<std::vector<size_t>>;
  CHECK(trainctl::plan_shards({6, 10, 30, 2, 2}, 10) == Shards{{0}, {2}, {1}, {3, 4}});
  CHECK(trainctl::plan_shards({6, 10, 30, 2, 2}, 100) == Shards{{0, 1, 2, 3, 4}});
  CHECK(trainctl::plan_shards({4, 4, 4}, 8) == Shards{{0, 1}, {2}});
  CHECK(trainctl::shard_file_name(0, 1) == "model.safetensors");
  CHECK(trainctl::shard_file_name(1, 3) == "model-00002-of-00003.safetensors");
}

namespace {

std::string fresh_directory(const std::string& name) {
  const std::string directory = temporary_path(name);
  std::filesystem::remove_all(directory);
  std::filesystem::create_directories(directory);
  return directory;
}

// Three tensors of 4 values: at 32 bytes, F32 shards of 2 and 1 tensors.
const std::vector<Tensor> kThree = {
    {"a.weight", {2, 2}, {1.0f, 2.0f, 3.0f, 4.0f}}, {"b.weight", {4}, {5.0f, 6.0f, 7.0f, 8.0f}}, {"c.bias", {4}, {9.0f, 10.0f, 11.0f, 12.0f}}};

std::string refusal(const std::string& directory) {
  try {
    trainctl::open_hugging_face_weights(directory);
  } catch (const trainctl::SafetensorsError& error) {
    return error.what();
  }
  return "(opened)";
}

}  // namespace

TEST_CASE("hugging face weights: shards and their index as save_pretrained writes them, read back") {
  const std::string directory = fresh_directory("hf-written");
  const std::vector<std::string> files =
      trainctl::write_hugging_face_weights(directory, kThree, trainctl::SafetensorsDtype::kF32, 32);
  CHECK(files == std::vector<std::string>{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
                                          "model.safetensors.index.json"});
  // json.dumps(index, indent=2, sort_keys=True) + "\n"
  CHECK(read_bytes(directory + "/model.safetensors.index.json") == R"({
  "metadata": {
    "total_parameters": 12,
    "total_size": 48
  },
  "weight_map": {
    "a.weight": "model-00001-of-00002.safetensors",
    "b.weight": "model-00001-of-00002.safetensors",
    "c.bias": "model-00002-of-00002.safetensors"
  }
}
)");
  const std::vector<trainctl::SafetensorsFile> opened = trainctl::open_hugging_face_weights(directory);
  REQUIRE(opened.size() == 2);
  CHECK(opened[0].entries().size() == 2);
  CHECK(opened[1].entries()[0].name == "c.bias");
  std::vector<float> values(4);
  opened[1].read(opened[1].entries()[0], values);
  CHECK(values == kThree[2].values);

  // One file when all fit: no index.
  const std::string single = fresh_directory("hf-single");
  CHECK(trainctl::write_hugging_face_weights(single, kThree, trainctl::SafetensorsDtype::kBf16, 24) ==
        std::vector<std::string>{"model.safetensors"});
  CHECK(trainctl::open_hugging_face_weights(single).size() == 1);
  std::filesystem::remove_all(directory);
  std::filesystem::remove_all(single);
}

TEST_CASE("hugging face weights: a directory that disagrees with its index is refused, naming file and tensor") {
  const std::string directory = fresh_directory("hf-refused");
  const std::string index = directory + "/model.safetensors.index.json";
  CHECK(refusal(directory) == directory + " holds neither model.safetensors nor model.safetensors.index.json");
  const auto write_index = [&](const nlohmann::json& weight_map) {
    std::ofstream(index) << nlohmann::json{{"metadata", {{"total_size", 48}}}, {"weight_map", weight_map}}.dump();
  };
  trainctl::write_hugging_face_weights(directory, kThree, trainctl::SafetensorsDtype::kF32, 32);
  const nlohmann::json weight_map{{"a.weight", "model-00001-of-00002.safetensors"},
                                  {"b.weight", "model-00001-of-00002.safetensors"},
                                  {"c.bias", "model-00002-of-00002.safetensors"}};
  CHECK(refusal(directory) == "(opened)");

  nlohmann::json ghost = weight_map;
  ghost["ghost.weight"] = "model-00002-of-00002.safetensors";
  write_index(ghost);
  CHECK(refusal(directory) == index + " places ghost.weight in model-00002-of-00002.safetensors, which has no tensor "
                                      "ghost.weight");

  nlohmann::json unnamed = weight_map;
  unnamed.erase("b.weight");
  write_index(unnamed);
  CHECK(refusal(directory) ==
        directory + "/model-00001-of-00002.safetensors holds b.weight, which " + index + " does not name");

  nlohmann::json elsewhere = weight_map;
  elsewhere["b.weight"] = "model-00002-of-00002.safetensors";
  write_index(elsewhere);
  CHECK(refusal(directory) == directory + "/model-00001-of-00002.safetensors holds b.weight, which " + index +
                                  " places in model-00002-of-00002.safetensors");

  write_index(weight_map);
  std::filesystem::remove(directory + "/model-00002-of-00002.safetensors");
  CHECK(refusal(directory) == index + " places c.bias in model-00002-of-00002.safetensors, which is missing: no file " +
                                  directory + "/model-00002-of-00002.safetensors");

  std::ofstream(index) << R"({"weight_map": ["a.weight"]})";
  CHECK(refusal(directory) == index + " is not a JSON object with a weight_map");
  std::filesystem::remove_all(directory);
}
