// Flat JSON objects on one line, the format of metrics.jsonl and the checkpoint sidecars:
// a writer, and a reader for the number and string fields that tools (trainctl status) need.
// Values are numbers, strings and objects of them, so no general JSON library is needed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace trainctl {

class JsonLine {
 public:
  JsonLine& add(std::string_view key, double value);  // non-finite numbers become null
  JsonLine& add(std::string_view key, int64_t value);
  JsonLine& add(std::string_view key, std::string_view value);
  JsonLine& add(std::string_view key, const JsonLine& object);  // a nested object
  std::string str() const { return "{" + body_ + "}"; }

 private:
  void add_key(std::string_view key);
  std::string body_;
};

// The value of a top-level number field of a JSON object line written by JsonLine.
std::optional<double> json_number(std::string_view line, std::string_view key);
std::optional<std::string> json_string(std::string_view line, std::string_view key);

}  // namespace trainctl
