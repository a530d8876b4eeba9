// Config reader: typed, checked access to one TOML table, shared by every schema
// ([job] in slurm/, [model] [data] [train] [checkpoint] in runtime/).
// Every error carries the source region (file:line:col) and the dotted key; keys nobody read
// are reported as unknown with the nearest known key as a suggestion. Whatever the file holds,
// reading cannot crash: numbers are finite, strings hold no NUL, and error text is printable.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <toml++/toml.h>

namespace trainctl {

struct SourcePosition {
  std::string file;
  uint32_t line = 0;
  uint32_t column = 0;
};

// A config the user must fix. The CLI maps it to exit code 2; what() is
// "file:line:col: key: message" with control characters escaped (see printable), so a key or
// value holding them can neither cut the text short nor reach a terminal raw.
class ConfigError : public std::runtime_error {
 public:
  ConfigError(SourcePosition where, std::string key, std::string message);
  const SourcePosition& where() const { return where_; }
  const std::string& key() const { return key_; }
  const std::string& message() const { return message_; }

 private:
  SourcePosition where_;
  std::string key_;
  std::string message_;
};

// `text` with control characters (C0, DEL, C1) written as escapes: "\x00", "\x07", "\u009b".
std::string printable(std::string_view text);

// Parses a TOML file; a syntax error becomes a ConfigError at its position. A path that is
// missing, a directory, not a regular file (a FIFO is never opened, regular_file.h) or over 16 MB
// is BadInput, "config PATH does not exist" / "is a directory, not a config file" / "is a FIFO,
// not a regular file".
toml::table parse_config_file(const std::string& path);
// The text of the config file at `path`, refused as parse_config_file refuses it.
std::string read_config_text(const std::string& path);
toml::table parse_config_text(std::string_view text, const std::string& file_name);

// The known key closest to `unknown` by edit distance, when it is close enough to be a typo.
std::optional<std::string> nearest_key(std::string_view unknown, const std::vector<std::string>& known);

SourcePosition position_of(const toml::node& node, const std::string& file);

// A TOML integer or float as a double, nullopt for any other type. (toml++'s value<double>()
// gives nullopt for an integer beyond 2^53, which it cannot represent exactly.)
std::optional<double> number_value(const toml::node& node);

class TableReader {
 public:
  // `path` is the table's dotted name ("train"); `table` may be null when the table is absent,
  // in which case every key reads as missing.
  TableReader(const toml::table* table, std::string path, std::string file, SourcePosition table_position);
  // Reads table `name` of `root`, or an empty reader positioned at the file start.
  static TableReader child(const toml::table& root, std::string_view name, const std::string& file);

  bool present() const { return table_ != nullptr; }
  bool has(std::string_view key) const;

  int64_t integer(std::string_view key, std::optional<int64_t> fallback = std::nullopt, int64_t min = INT64_MIN,
                  int64_t max = INT64_MAX);
  // Numbers and their lists are finite: nan and inf, valid TOML, are refused for every key.
  double number(std::string_view key, std::optional<double> fallback = std::nullopt);
  bool boolean(std::string_view key, std::optional<bool> fallback = std::nullopt);
  // Strings, their lists and tables hold no NUL: C paths and environments would cut them there.
  std::string string(std::string_view key, std::optional<std::string> fallback = std::nullopt);
  std::optional<std::string> optional_string(std::string_view key);
  // A string that must be one of `choices`; the error lists them.
  std::string choice(std::string_view key, const std::vector<std::string>& choices,
                     std::optional<std::string> fallback = std::nullopt);
  std::vector<int64_t> integer_list(std::string_view key, std::optional<std::vector<int64_t>> fallback = std::nullopt,
                                    int64_t min = INT64_MIN, int64_t max = INT64_MAX);
  std::vector<double> number_list(std::string_view key, std::optional<std::vector<double>> fallback = std::nullopt);
  std::vector<std::string> string_list(std::string_view key,
                                       std::optional<std::vector<std::string>> fallback = std::nullopt);
  // A table of string values (e.g. [job.env]), in file order of keys sorted by name.
  std::map<std::string, std::string> string_table(std::string_view key);
  // The table (inline or not) at `key` as a reader of its own, dotted below this one; a reader of
  // nothing when the key is absent.
  TableReader table(std::string_view key);

  // Throws for the first key (in file order) that no getter read.
  void reject_unknown() const;
  [[noreturn]] void fail(std::string_view key, const std::string& message) const;

  std::string dotted(std::string_view key) const;
  SourcePosition position(std::string_view key) const;

 private:
  const toml::node* find(std::string_view key);
  const toml::node& expect(std::string_view key, bool ok, const toml::node* node, const char* wanted) const;

  const toml::table* table_;
  std::string path_;
  std::string file_;
  SourcePosition table_position_;
  std::set<std::string, std::less<>> read_;
};

}  // namespace trainctl
