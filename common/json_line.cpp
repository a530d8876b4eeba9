// Flat JSON lines: see json_line.h.
#include "json_line.h"

#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

namespace trainctl {

namespace {
std::string escaped(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) out += fmt::format("\\u{:04x}", c);
        else out += c;
    }
  }
  return out;
}

// Position just after `"key":` in `line`, or npos.
size_t value_start(std::string_view line, std::string_view key) {
  std::string needle = fmt::format("\"{}\":", escaped(key));
  size_t at = line.find(needle);
  return at == std::string_view::npos ? at : at + needle.size();
}
}  // namespace

void JsonLine::add_key(std::string_view key) {
  if (!body_.empty()) body_ += ",";
  body_ += fmt::format("\"{}\":", escaped(key));
}

JsonLine& JsonLine::add(std::string_view key, double value) {
  add_key(key);
  body_ += std::isfinite(value) ? fmt::format("{}", value) : "null";
  return *this;
}

JsonLine& JsonLine::add(std::string_view key, int64_t value) {
  add_key(key);
  body_ += fmt::format("{}", value);
  return *this;
}

JsonLine& JsonLine::add(std::string_view key, std::string_view value) {
  add_key(key);
  body_ += fmt::format("\"{}\"", escaped(value));
  return *this;
}

JsonLine& JsonLine::add(std::string_view key, const JsonLine& object) {
  add_key(key);
  body_ += object.str();
  return *this;
}

std::optional<double> json_number(std::string_view line, std::string_view key) {
  size_t start = value_start(line, key);
  if (start == std::string_view::npos) return std::nullopt;
  std::string rest(line.substr(start, 64));
  char* end = nullptr;
  double value = std::strtod(rest.c_str(), &end);
  if (end == rest.c_str()) return std::nullopt;
  return value;
}

std::optional<std::string> json_string(std::string_view line, std::string_view key) {
  size_t start = value_start(line, key);
  if (start == std::string_view::npos || start >= line.size() || line[start] != '"') return std::nullopt;
  std::string value;
  for (size_t i = start + 1; i < line.size(); ++i) {
    if (line[i] == '"') return value;
    if (line[i] == '\\' && i + 1 < line.size()) {
      char next = line[++i];
      value += next == 'n' ? '\n' : next == 't' ? '\t' : next;
    } else {
      value += line[i];
    }
  }
  return std::nullopt;
}

}  // namespace trainctl
