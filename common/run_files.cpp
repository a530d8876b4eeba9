// Reading back a run directory's files: see run_files.h.
#include "run_files.h"

#include <algorithm>
#include <array>
#include <ostream>

#include <fmt/format.h>

#include "config_reader.h"
#include "regular_file.h"

namespace trainctl {

DamagedRunFile::DamagedRunFile(const std::string& path, std::string_view problem)
    : BadInput(printable(fmt::format("{}: {}", path, problem))) {}

namespace {

[[noreturn]] void refuse_run_file(const std::string& path, const RegularFileError& error) {
  throw DamagedRunFile(path, error.what());
}

bool is_missing(const RegularFileError& error) { return error.reason() == RegularFileError::Reason::kMissing; }

// Reads the lines of `path` until `line` returns false.
void read_run_file_lines(const std::string& path, size_t max_line_bytes,
                const std::function<bool(std::string_view text, int64_t number)>& line) {
  std::string pending;
  int64_t number = 0;
  const auto take = [&](std::string_view part) {
    if (pending.size() + part.size() > max_line_bytes)
      throw DamagedRunFile(path, fmt::format("line {} is longer than {} bytes", number + 1, max_line_bytes));
    pending.append(part);
  };
  try {
    RegularFile file(path);
    std::array<char, 65536> buffer;
    while (const size_t count = file.read(buffer)) {
      std::string_view chunk(buffer.data(), count);
      for (size_t newline; (newline = chunk.find('\n')) != std::string_view::npos; chunk.remove_prefix(newline + 1)) {
        take(chunk.substr(0, newline));
        if (!line(pending, ++number)) return;
        pending.clear();
      }
      take(chunk);
    }
  } catch (const RegularFileError& error) {
    if (is_missing(error)) return;
    refuse_run_file(path, error);
  }
  if (!pending.empty()) line(pending, ++number);
}

}  // namespace

std::optional<int64_t> copy_run_file_from(const std::string& path, int64_t offset, std::ostream& out) {
  try {
    RegularFile file(path);
    file.seek(offset);
    std::array<char, 65536> buffer;
    int64_t copied = 0;
    while (const size_t count = file.read(buffer)) {
      out.write(buffer.data(), static_cast<std::streamsize>(count));
      copied += static_cast<int64_t>(count);
    }
    out.flush();
    return copied;
  } catch (const RegularFileError& error) {
    if (is_missing(error)) return std::nullopt;
    refuse_run_file(path, error);
  }
}

std::optional<std::string> read_run_file(const std::string& path, size_t max_bytes) {
  try {
    return read_regular_file(path, max_bytes);
  } catch (const RegularFileError& error) {
    if (is_missing(error)) return std::nullopt;
    refuse_run_file(path, error);
  }
}

std::optional<std::string> read_run_file_line(const std::string& path) {
  std::optional<std::string> first;
  read_run_file_lines(path, run_file_limit::kLine, [&](std::string_view text, int64_t) {
    first = std::string(text);
    return false;
  });
  if (first && first->empty()) return std::nullopt;
  return first;
}

void for_each_run_file_line(const std::string& path, size_t max_line_bytes,
                            const std::function<void(std::string_view text, int64_t number)>& line) {
  read_run_file_lines(path, max_line_bytes, [&](std::string_view text, int64_t number) {
    line(text, number);
    return true;
  });
}

std::optional<int64_t> read_run_file_count(const std::string& path, int64_t max) {
  const std::optional<std::string> text = read_run_file_line(path);
  if (!text) return std::nullopt;
  const bool digits = std::all_of(text->begin(), text->end(), [](char c) { return c >= '0' && c <= '9'; });
  // More than 18 digits may not fit int64; a count never has them.
  if (!digits || text->size() > 18 || std::stoll(*text) > max)
    throw DamagedRunFile(path, fmt::format("holds {:?}, not a count from 0 to {}", text->substr(0, 64), max));
  return std::stoll(*text);
}

}  // namespace trainctl
