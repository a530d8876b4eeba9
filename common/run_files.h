// Reading back a run directory's files (run_layout.h), which the batch script, the ranks, a
// user's program, a crash or the user may each have left in any state. Every reader of them goes
// through here: what is not a regular file is refused before it is opened (regular_file.h), what
// is read is bounded, counts are range-checked before they are converted, and a damaged file is
// reported by its path and what is wrong with it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>

#include "bad_input.h"

namespace trainctl {

// "PATH: what is wrong with it": bad input, exit 2.
class DamagedRunFile : public BadInput {
 public:
  DamagedRunFile(const std::string& path, std::string_view problem);
};

// What a reader takes of one file at most: more is damage, not a record.
namespace run_file_limit {
inline constexpr size_t kLine = 4096;             // a one-line file: job_id, requeue.count, then/N.outcome
inline constexpr size_t kLines = size_t{1} << 20;  // job.outcome, bad.nodes; one line of metrics.jsonl
inline constexpr size_t kRecord = size_t{16} << 20;  // run.json
}  // namespace run_file_limit

// The file's bytes, or nothing when it does not exist.
std::optional<std::string> read_run_file(const std::string& path, size_t max_bytes);

// The first line of a one-line file, at most run_file_limit::kLine bytes, or nothing when the file
// does not exist or is empty.
std::optional<std::string> read_run_file_line(const std::string& path);

// Calls `line` with each line of the file (without its newline) and its number from 1, as the file
// is read: it may be long and still growing. Nothing when the file does not exist.
void for_each_run_file_line(const std::string& path, size_t max_line_bytes,
                            const std::function<void(std::string_view text, int64_t number)>& line);

// Writes the file from byte `offset` on to `out` (a job's log, which may be long and still
// growing) and returns how many bytes that was; nothing when the file does not exist.
std::optional<int64_t> copy_run_file_from(const std::string& path, int64_t offset, std::ostream& out);

// A count written in decimal digits (requeue.count, progress.step), at most `max`; nothing when
// the file does not exist or is empty (a writer has just created it).
std::optional<int64_t> read_run_file_count(const std::string& path, int64_t max);

}  // namespace trainctl
