// The shared failure reporter: see check.h.
#include "check.h"

#include <unistd.h>

#include <cstdlib>

#include <fmt/format.h>

namespace trainctl {

namespace {
constexpr size_t kNameBytes = 256;
int reporting_rank = -1;
}  // namespace

std::string this_host_name() {
  char name[kNameBytes] = {};
  gethostname(name, sizeof(name) - 1);
  return name;
}

std::string this_node_name() {
  const char* node = std::getenv("SLURMD_NODENAME");
  return node != nullptr && *node != '\0' ? std::string(node).substr(0, kNameBytes - 1) : this_host_name();
}

void set_reporting_rank(int rank) { reporting_rank = rank; }

void report_check_failure(const char* statement, const char* file, int line, const std::string& detail) {
  std::string where = reporting_rank >= 0 ? fmt::format("host {} rank {}", this_host_name(), reporting_rank)
                                          : fmt::format("host {}", this_host_name());
  throw CheckFailure(fmt::format("{} failed at {}:{} on {}: {}", statement, file, line, where, detail));
}

}  // namespace trainctl
