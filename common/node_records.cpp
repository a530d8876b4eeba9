// What the ranks tell the batch script about their nodes: see node_records.h.
#include "node_records.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <system_error>

#include <fmt/format.h>

#include "atomic_file.h"
#include "bad_input.h"
#include "count_text.h"

namespace trainctl {

std::optional<int64_t> node_check_timeout_seconds() {
  const char* text = std::getenv("TRAINCTL_NODE_CHECK_TIMEOUT");
  if (text == nullptr || *text == '\0') return std::nullopt;
  const std::optional<int64_t> seconds = parse_count(text);
  if (!seconds) throw BadInput(fmt::format("TRAINCTL_NODE_CHECK_TIMEOUT=\"{}\" is not a count of seconds", text));
  if (*seconds == 0) return std::nullopt;
  return seconds;
}

void record_rank_node(const RunLayout& run, int64_t rank, const std::string& node) {
  // Not the run directory: one that is missing is a mistake to report, not to create.
  std::filesystem::create_directory(run.rank_nodes());
  write_file_atomically(fmt::format("{}/{}", run.rank_nodes(), rank), node + "\n");
}

void blame_node(const RunLayout& run, std::string_view node, std::string_view reason) {
  std::string line = fmt::format("{}\t{}", node, reason);
  std::replace_if(line.begin() + static_cast<std::ptrdiff_t>(node.size()) + 1, line.end(),
                  [](char c) { return c == '\t' || c == '\n' || c == '\r'; }, ' ');
  line += '\n';
  const std::string path = run.bad_nodes();
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), fmt::format("cannot write {}", path));
  const ssize_t written = write(fd, line.data(), line.size());
  const int write_error = errno;
  close(fd);
  if (written != static_cast<ssize_t>(line.size()))
    throw std::system_error(written < 0 ? write_error : ENOSPC, std::generic_category(),
                            fmt::format("cannot write {}", path));
}

bool test_fails_node_check(std::string_view node) {
  const char* list = std::getenv("TRAINCTL_TEST_FAIL_NODE_CHECK");
  if (list == nullptr) return false;
  for (std::string_view rest(list); !rest.empty();) {
    const size_t comma = rest.find(',');
    if (rest.substr(0, comma) == node) return true;
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
  }
  return false;
}

}  // namespace trainctl
