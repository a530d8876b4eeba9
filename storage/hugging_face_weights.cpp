// A Hugging Face model directory's weights: see hugging_face_weights.h.
#include "hugging_face_weights.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "atomic_file.h"

namespace trainctl {

namespace {

std::string trimmed(const std::string& text) {
  const auto is_space = [](unsigned char c) { return std::isspace(c) != 0; };
  const auto first = std::find_if_not(text.begin(), text.end(), is_space);
  const auto last = std::find_if_not(text.rbegin(), text.rend(), is_space).base();
  return first < last ? std::string(first, last) : std::string();
}

// Python's float() of a decimal number, as parse_size_to_int reads the part before the unit.
std::optional<double> decimal_number(const std::string& text) {
  if (text.empty() || text.find_first_not_of("0123456789.eE+-") != std::string::npos) return std::nullopt;
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || !std::isfinite(value)) return std::nullopt;
  return value;
}

}  // namespace

uint64_t parse_shard_size(const std::string& text) {
  const std::string size = trimmed(text);
  const auto fail = [&](const std::string& problem) {
    return std::invalid_argument(fmt::format("\"{}\" {}", text, problem));
  };
  if (!size.empty() && std::all_of(size.begin(), size.end(), [](unsigned char c) { return std::isdigit(c) != 0; })) {
    errno = 0;
    const uint64_t bytes = std::strtoull(size.c_str(), nullptr, 10);
    if (errno == ERANGE) throw fail("is too large");
    if (bytes == 0) throw fail("is not a positive size");
    return bytes;
  }
  static const std::map<std::string, double> kUnits{{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}};
  std::string unit = size.size() >= 2 ? size.substr(size.size() - 2) : size;
  std::transform(unit.begin(), unit.end(), unit.begin(), [](unsigned char c) { return std::toupper(c); });
  const auto multiplier = kUnits.find(unit);
  if (multiplier == kUnits.end())
    throw fail("is not a size: a number of bytes, or a number and a unit KB, MB, GB or TB (as \"5GB\")");
  const std::optional<double> value = decimal_number(trimmed(size.substr(0, size.size() - 2)));
  if (!value) throw fail("is not a size: the part before the unit is not a number");
  // int(value * multiplier), as Python computes it: the product in double, truncated.
  const double bytes = *value * multiplier->second;
  if (bytes < 1.0) throw fail("is not a positive size");
  if (bytes >= 0x1p64) throw fail("is too large");
  return static_cast<uint64_t>(bytes);
}

std::vector<std::vector<size_t>> plan_shards(const std::vector<uint64_t>& tensor_bytes, uint64_t max_shard_size) {
  std::vector<std::vector<size_t>> shards;
  std::vector<size_t> filling;
  uint64_t filled = 0;
  for (size_t i = 0; i < tensor_bytes.size(); ++i) {
    if (tensor_bytes[i] > max_shard_size) {
      shards.push_back({i});
      continue;
    }
    if (filled + tensor_bytes[i] > max_shard_size) {
      shards.push_back(std::move(filling));
      filling.clear();
      filled = 0;
    }
    filling.push_back(i);
    filled += tensor_bytes[i];
  }
  if (!filling.empty()) shards.push_back(std::move(filling));
  return shards;
}

std::string shard_file_name(size_t shard, size_t shards) {
  return shards == 1 ? std::string(kSafetensorsName) : fmt::format("model-{:05d}-of-{:05d}.safetensors", shard + 1, shards);
}

std::vector<std::string> write_hugging_face_weights(const std::string& directory, const std::vector<Tensor>& tensors,
                                                    SafetensorsDtype dtype, uint64_t max_shard_size) {
  std::vector<uint64_t> bytes;
  uint64_t total_size = 0, total_parameters = 0;
  for (const Tensor& tensor : tensors) {
    bytes.push_back(tensor.values.size() * safetensors_dtype_bytes(dtype));
    total_size += bytes.back();
    total_parameters += tensor.values.size();
  }
  const std::vector<std::vector<size_t>> shards = plan_shards(bytes, max_shard_size);
  std::vector<std::string> files;
  nlohmann::json weight_map = nlohmann::json::object();
  for (size_t shard = 0; shard < shards.size(); ++shard) {
    files.push_back(shard_file_name(shard, shards.size()));
    std::vector<const Tensor*> members;
    for (size_t i : shards[shard]) {
      members.push_back(&tensors[i]);
      weight_map[tensors[i].name] = files.back();
    }
    write_safetensors(directory + "/" + files.back(), members, dtype);
  }
  if (shards.size() > 1) {
    const nlohmann::json index{{"metadata", {{"total_parameters", total_parameters}, {"total_size", total_size}}},
                               {"weight_map", weight_map}};
    // Python's json.dumps(index, indent=2, sort_keys=True) + "\n", as save_pretrained writes it.
    write_file_atomically(directory + "/" + kSafetensorsIndexName, index.dump(2, ' ', true) + "\n");
    files.push_back(kSafetensorsIndexName);
  }
  return files;
}

std::vector<SafetensorsFile> open_hugging_face_weights(const std::string& directory) {
  const std::string single = directory + "/" + kSafetensorsName;
  const std::string index_path = directory + "/" + kSafetensorsIndexName;
  std::error_code ignored;
  if (std::filesystem::exists(single, ignored)) return {SafetensorsFile(single)};
  if (!std::filesystem::exists(index_path, ignored))
    throw SafetensorsError(fmt::format("{} holds neither {} nor {}", directory, kSafetensorsName, kSafetensorsIndexName));

  std::ifstream in(index_path);
  if (!in) throw SafetensorsError(fmt::format("cannot read {}: {}", index_path, std::strerror(errno)));
  const nlohmann::json index = nlohmann::json::parse(std::istreambuf_iterator<char>(in), {}, nullptr, false);
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
    throw SafetensorsError(fmt::format("{} is not a JSON object with a weight_map", index_path));
  // Each tensor's file, and each file's first tensor (for the message of a missing one).
  std::map<std::string, std::string> file_of;
  std::map<std::string, std::string> first_tensor_of;
  for (const auto& [tensor, file] : index["weight_map"].items()) {
    if (!file.is_string())
      throw SafetensorsError(fmt::format("{}: the weight_map's entry of {} is not a file name", index_path, tensor));
    file_of[tensor] = file.get<std::string>();
    first_tensor_of.emplace(file.get<std::string>(), tensor);
  }

  std::vector<SafetensorsFile> files;
  for (const auto& [file, first_tensor] : first_tensor_of) {
    const std::string path = directory + "/" + file;
    if (!std::filesystem::exists(path, ignored))
      throw SafetensorsError(
          fmt::format("{} places {} in {}, which is missing: no file {}", index_path, first_tensor, file, path));
    files.emplace_back(path);
    std::set<std::string> held;
    for (const SafetensorsEntry& entry : files.back().entries()) {
      const auto placed = file_of.find(entry.name);
      if (placed == file_of.end())
        throw SafetensorsError(fmt::format("{} holds {}, which {} does not name", path, entry.name, index_path));
      if (placed->second != file)
        throw SafetensorsError(
            fmt::format("{} holds {}, which {} places in {}", path, entry.name, index_path, placed->second));
      held.insert(entry.name);
    }
    for (const auto& [tensor, its_file] : file_of)
      if (its_file == file && !held.contains(tensor))
        throw SafetensorsError(fmt::format("{} places {} in {}, which has no tensor {}", index_path, tensor, file, tensor));
  }
  return files;
}

}  // namespace trainctl
