// How an error on some ranks ends a run: see rank_failure.h.
#include "rank_failure.h"

#include <fmt/format.h>

#include "bad_input.h"
#include "config_reader.h"
#include "exit_codes.h"

namespace trainctl {

BadNode::BadNode(const std::string& node, const std::string& failure)
    : std::runtime_error(fmt::format("node check failed on {}: {}", node, failure)) {}

int exit_code_of(const std::exception& error) {
  if (dynamic_cast<const BadNode*>(&error) != nullptr) return exit_code::kBadNode;
  const bool bad_input =
      dynamic_cast<const BadInput*>(&error) != nullptr || dynamic_cast<const ConfigError*>(&error) != nullptr;
  return bad_input ? exit_code::kBadConfig : exit_code::kFailed;
}

FailedOnAnotherRank::FailedOnAnotherRank(int failed_rank, int exit_code)
    : std::runtime_error(fmt::format("rank {} failed (exit code {})", failed_rank, exit_code)), exit_code(exit_code) {}

void all_or_none(Comm& comm, const std::function<void()>& step) {
  std::exception_ptr error;
  int code = exit_code::kDone;
  try {
    step();
  } catch (const std::exception& thrown) {
    error = std::current_exception();
    code = exit_code_of(thrown);
  }
  const int first_failed = comm.lowest_rank_where(error != nullptr);
  if (first_failed == comm.world_size()) return;
  comm.broadcast(&code, sizeof code, first_failed);
  comm.note_failure_on_every_rank();
  if (error) std::rethrow_exception(error);
  throw FailedOnAnotherRank(first_failed, code);
}

}  // namespace trainctl
