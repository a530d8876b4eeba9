// Config reader: see config_reader.h.
#include "config_reader.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "bad_input.h"
#include "regular_file.h"

namespace trainctl {

namespace {

std::string format_error(const SourcePosition& where, const std::string& key, const std::string& message) {
  std::string prefix = fmt::format("{}:{}:{}: ", where.file, where.line, where.column);
  return printable(key.empty() ? prefix + message : prefix + key + ": " + message);
}

const char* type_name(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::array: return "an array";
    case toml::node_type::table: return "a table";
    default: return "a date or time";
  }
}

std::string quoted_list(const std::vector<std::string>& items) {
  std::vector<std::string> quoted;
  for (const auto& item : items) quoted.push_back("\"" + item + "\"");
  return fmt::format("{}", fmt::join(quoted, ", "));
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// A value as an error shows it: quoted, or only its length when it is too long to repeat.
std::string echoed(std::string_view value) {
  constexpr size_t kLongest = 256;
  return value.size() <= kLongest ? fmt::format("{:?}", value) : fmt::format("a string of {} characters", value.size());
}

constexpr std::string_view kNulMessage = "must not contain a NUL character";

bool has_nul(std::string_view text) { return text.find('\0') != std::string_view::npos; }

std::string finite_message(double value) { return fmt::format("must be a finite number (got {})", value); }

[[noreturn]] void refuse_config_file(const std::string& path, std::string_view problem) {
  throw BadInput(printable(fmt::format("config {} {}", path, problem)));
}

}  // namespace

std::string printable(std::string_view text) {
  std::string result;
  result.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    const auto next = i + 1 < text.size() ? static_cast<unsigned char>(text[i + 1]) : 0;
    if (byte < 0x20 || byte == 0x7f) {
      result += fmt::format("\\x{:02x}", byte);
    } else if (byte == 0xc2 && next >= 0x80 && next <= 0x9f) {  // U+0080..U+009F in UTF-8
      result += fmt::format("\\u{:04x}", next);
      ++i;
    } else {
      result += text[i];
    }
  }
  return result;
}

ConfigError::ConfigError(SourcePosition where, std::string key, std::string message)
    : std::runtime_error(format_error(where, key, message)),
      where_(std::move(where)),
      key_(std::move(key)),
      message_(std::move(message)) {}

toml::table parse_config_text(std::string_view text, const std::string& file_name) {
  try {
    return toml::parse(text, file_name);
  } catch (const toml::parse_error& error) {
    SourcePosition where{file_name, error.source().begin.line, error.source().begin.column};
    throw ConfigError(where, "", fmt::format("invalid TOML: {}", error.description()));
  }
}

// A config is a page of text: anything near this size is not one.
constexpr size_t kMaxConfigBytes = 16 << 20;

std::string read_config_text(const std::string& path) {
  try {
    return read_regular_file(path, kMaxConfigBytes);
  } catch (const RegularFileError& error) {
    refuse_config_file(path, error.reason() == RegularFileError::Reason::kDirectory
                                 ? "is a directory, not a config file"
                                 : error.what());
  }
}

toml::table parse_config_file(const std::string& path) { return parse_config_text(read_config_text(path), path); }

std::optional<std::string> nearest_key(std::string_view unknown, const std::vector<std::string>& known) {
  std::optional<std::string> best;
  // Up to max(2, length/3) edits, but fewer than the key's length: "x" is no typo of "lr".
  size_t best_distance = std::min(std::max<size_t>(2, unknown.size() / 3), unknown.size() - 1) + 1;
  for (const auto& candidate : known) {
    size_t distance = edit_distance(unknown, candidate);
    if (distance < best_distance) {
      best_distance = distance;
      best = candidate;
    }
  }
  return best;
}

SourcePosition position_of(const toml::node& node, const std::string& file) {
  return {file, node.source().begin.line, node.source().begin.column};
}

std::optional<double> number_value(const toml::node& node) {
  if (const auto* integer = node.as_integer()) return static_cast<double>(integer->get());
  if (const auto* floating = node.as_floating_point()) return floating->get();
  return std::nullopt;
}

TableReader::TableReader(const toml::table* table, std::string path, std::string file,
                         SourcePosition table_position)
    : table_(table), path_(std::move(path)), file_(std::move(file)), table_position_(std::move(table_position)) {}

TableReader TableReader::child(const toml::table& root, std::string_view name, const std::string& file) {
  const toml::node* node = root.get(name);
  if (node == nullptr) return TableReader(nullptr, std::string(name), file, {file, 1, 1});
  if (!node->is_table())
    throw ConfigError(position_of(*node, file), std::string(name),
                      fmt::format("expected a table, got {}", type_name(*node)));
  return TableReader(node->as_table(), std::string(name), file, position_of(*node, file));
}

bool TableReader::has(std::string_view key) const { return table_ != nullptr && table_->get(key) != nullptr; }

std::string TableReader::dotted(std::string_view key) const { return path_ + "." + std::string(key); }

SourcePosition TableReader::position(std::string_view key) const {
  const toml::node* node = table_ ? table_->get(key) : nullptr;
  return node ? position_of(*node, file_) : table_position_;
}

void TableReader::fail(std::string_view key, const std::string& message) const {
  throw ConfigError(position(key), dotted(key), message);
}

const toml::node* TableReader::find(std::string_view key) {
  read_.emplace(key);
  return table_ ? table_->get(key) : nullptr;
}

const toml::node& TableReader::expect(std::string_view key, bool ok, const toml::node* node,
                                      const char* wanted) const {
  if (!ok) fail(key, fmt::format("expected {}, got {}", wanted, type_name(*node)));
  return *node;
}

int64_t TableReader::integer(std::string_view key, std::optional<int64_t> fallback, int64_t min, int64_t max) {
  const toml::node* node = find(key);
  if (node == nullptr) {
    if (!fallback) fail(key, "required key is missing");
    return *fallback;
  }
  int64_t value = expect(key, node->is_integer(), node, "an integer").as_integer()->get();
  if (value < min) fail(key, fmt::format("must be at least {} (got {})", min, value));
  if (value > max) fail(key, fmt::format("must be at most {} (got {})", max, value));
  return value;
}

double TableReader::number(std::string_view key, std::optional<double> fallback) {
  const toml::node* node = find(key);
  if (node == nullptr) {
    if (!fallback) fail(key, "required key is missing");
    return *fallback;
  }
  expect(key, node->is_number(), node, "a number");
  const double value = *number_value(*node);
  if (!std::isfinite(value)) fail(key, finite_message(value));
  return value;
}

bool TableReader::boolean(std::string_view key, std::optional<bool> fallback) {
  const toml::node* node = find(key);
  if (node == nullptr) {
    if (!fallback) fail(key, "required key is missing");
    return *fallback;
  }
  return expect(key, node->is_boolean(), node, "a boolean").as_boolean()->get();
}

std::optional<std::string> TableReader::optional_string(std::string_view key) {
  const toml::node* node = find(key);
  if (node == nullptr) return std::nullopt;
  const std::string& value = expect(key, node->is_string(), node, "a string").as_string()->get();
  if (has_nul(value)) fail(key, std::string(kNulMessage));
  return value;
}

std::string TableReader::string(std::string_view key, std::optional<std::string> fallback) {
  std::optional<std::string> value = optional_string(key);
  if (!value && !fallback) fail(key, "required key is missing");
  return value ? *value : *fallback;
}

std::string TableReader::choice(std::string_view key, const std::vector<std::string>& choices,
                                std::optional<std::string> fallback) {
  std::string value = string(key, std::move(fallback));
  if (std::find(choices.begin(), choices.end(), value) == choices.end())
    fail(key, fmt::format("must be one of {} (got {})", quoted_list(choices), echoed(value)));
  return value;
}

namespace {
template <typename T, typename Convert>
std::vector<T> read_list(TableReader& reader, std::string_view key, const toml::node* node,
                         std::optional<std::vector<T>> fallback, const char* wanted, Convert convert) {
  if (node == nullptr) {
    if (!fallback) reader.fail(key, "required key is missing");
    return *fallback;
  }
  if (!node->is_array()) reader.fail(key, fmt::format("expected an array of {}, got {}", wanted, type_name(*node)));
  std::vector<T> values;
  for (const toml::node& element : *node->as_array()) {
    std::optional<T> value = convert(element);
    if (!value)
      throw ConfigError(position_of(element, reader.position(key).file), reader.dotted(key),
                        fmt::format("expected an array of {}, but element {} is {}", wanted, values.size(),
                                    type_name(element)));
    values.push_back(*value);
  }
  return values;
}
}  // namespace

std::vector<int64_t> TableReader::integer_list(std::string_view key, std::optional<std::vector<int64_t>> fallback,
                                               int64_t min, int64_t max) {
  auto values = read_list<int64_t>(*this, key, find(key), std::move(fallback), "integers",
                                   [](const toml::node& n) { return n.value_exact<int64_t>(); });
  for (int64_t value : values) {
    if (value < min) fail(key, fmt::format("every element must be at least {} (got {})", min, value));
    if (value > max) fail(key, fmt::format("every element must be at most {} (got {})", max, value));
  }
  return values;
}

std::vector<double> TableReader::number_list(std::string_view key, std::optional<std::vector<double>> fallback) {
  auto values = read_list<double>(*this, key, find(key), std::move(fallback), "numbers",
                                  [](const toml::node& n) { return number_value(n); });
  for (size_t index = 0; index < values.size(); ++index)
    if (!std::isfinite(values[index])) fail(key, fmt::format("element {} {}", index, finite_message(values[index])));
  return values;
}

std::vector<std::string> TableReader::string_list(std::string_view key,
                                                  std::optional<std::vector<std::string>> fallback) {
  auto values = read_list<std::string>(*this, key, find(key), std::move(fallback), "strings",
                                       [](const toml::node& n) { return n.value_exact<std::string>(); });
  for (size_t index = 0; index < values.size(); ++index)
    if (has_nul(values[index])) fail(key, fmt::format("element {} contains a NUL character", index));
  return values;
}

TableReader TableReader::table(std::string_view key) {
  const toml::node* node = find(key);
  if (node == nullptr) return TableReader(nullptr, dotted(key), file_, table_position_);
  if (!node->is_table()) fail(key, fmt::format("expected a table, got {}", type_name(*node)));
  return TableReader(node->as_table(), dotted(key), file_, position_of(*node, file_));
}

std::map<std::string, std::string> TableReader::string_table(std::string_view key) {
  const toml::node* node = find(key);
  std::map<std::string, std::string> values;
  if (node == nullptr) return values;
  if (!node->is_table()) fail(key, fmt::format("expected a table, got {}", type_name(*node)));
  // Not structured bindings: clang 14 (the fuzzing build) cannot capture them in a lambda.
  for (const auto& entry : *node->as_table()) {
    const toml::key& name = entry.first;
    const toml::node& value = entry.second;
    auto fail_at_value = [&](const std::string& message) {
      throw ConfigError(position_of(value, file_), dotted(key) + "." + std::string(name.str()), message);
    };
    if (!value.is_string()) fail_at_value(fmt::format("expected a string, got {}", type_name(value)));
    if (has_nul(value.as_string()->get())) fail_at_value(std::string(kNulMessage));
    values.emplace(std::string(name.str()), value.as_string()->get());
  }
  return values;
}

void TableReader::reject_unknown() const {
  if (table_ == nullptr) return;
  // toml::table iterates in key order; report the unknown key that comes first in the file.
  const toml::node* first = nullptr;
  std::string first_name;
  for (const auto& [name, value] : *table_) {
    if (read_.count(name.str())) continue;
    auto begin = value.source().begin;
    if (first == nullptr || begin < first->source().begin) {
      first = &value;
      first_name = std::string(name.str());
    }
  }
  if (first == nullptr) return;
  std::vector<std::string> known(read_.begin(), read_.end());
  std::string message = "unknown key";
  if (auto suggestion = nearest_key(first_name, known)) message += fmt::format(" (did you mean \"{}\"?)", *suggestion);
  throw ConfigError(position_of(*first, file_), dotted(first_name), message);
}

}  // namespace trainctl
