// SLURM command wrappers: see slurm_client.h.
#include "slurm_client.h"

#include <algorithm>
#include <charconv>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "run_record.h"

namespace trainctl {

namespace {

std::string_view trim(std::string_view text) {
  constexpr std::string_view kSpace = " \t\r\n";
  size_t begin = text.find_first_not_of(kSpace);
  if (begin == std::string_view::npos) return {};
  return text.substr(begin, text.find_last_not_of(kSpace) - begin + 1);
}

std::string_view first_line(std::string_view text) { return trim(text.substr(0, text.find('\n'))); }

std::vector<std::string_view> lines_of(std::string_view text) {
  std::vector<std::string_view> lines;
  for (size_t begin = 0; begin < text.size();) {
    size_t end = std::min(text.find('\n', begin), text.size());
    lines.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  return lines;
}

std::optional<int> parse_int(std::string_view text) {
  int value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

SlurmError command_error(const std::vector<std::string>& argv, const CommandResult& result) {
  std::string_view detail = trim(result.err).empty() ? trim(result.out) : trim(result.err);
  return SlurmError(fmt::format("{} failed (exit {}){}{}", fmt::join(argv, " "), result.exit_code,
                                detail.empty() ? "" : ": ", detail));
}

CommandResult run_checked(CommandRunner& runner, const std::vector<std::string>& argv) {
  CommandResult result = runner.run(argv);
  if (result.exit_code != 0) throw command_error(argv, result);
  return result;
}

// scontrol and squeue both say "slurm_load_jobs error: Invalid job id specified" for a job the
// controller does not know (never existed, or purged MinJobAge after it ended).
bool is_unknown_job(const CommandResult& result) { return result.err.find("Invalid job id") != std::string::npos; }

// The value of `key` in a `scontrol show -o` line, up to the next space. Free-text values may
// contain spaces (Command=/path with/space), so the line cannot be split into pairs; the first
// match wins because every key read here comes before those fields, except JobName, which
// trainctl limits to [A-Za-z0-9._-].
std::optional<std::string_view> scontrol_field(std::string_view line, std::string_view key) {
  std::string needle = fmt::format("{}=", key);
  for (size_t at = line.find(needle); at != std::string_view::npos; at = line.find(needle, at + 1)) {
    if (at != 0 && line[at - 1] != ' ') continue;  // ReqNodeList= is not NodeList=
    size_t begin = at + needle.size();
    return line.substr(begin, line.find(' ', begin) - begin);
  }
  return std::nullopt;
}

JobInfo parse_scontrol_job(std::string_view line) {
  auto unexpected = [&](std::string_view what) {
    return SlurmError(fmt::format("scontrol show job: {} in its output: {}", what, line));
  };
  std::optional<std::string_view> job_id = scontrol_field(line, "JobId");
  if (!job_id) throw unexpected("no JobId");
  JobInfo info;
  info.job_id = *job_id;
  info.state = scontrol_field(line, "JobState").value_or("");
  info.reason = scontrol_field(line, "Reason").value_or("");
  if (std::optional<std::string_view> restarts = scontrol_field(line, "Restarts")) {
    std::optional<int> count = parse_int(*restarts);
    if (!count) throw unexpected("a Restarts value that is not an integer");
    info.restart_count = *count;
  }
  info.run_time = scontrol_field(line, "RunTime").value_or("");
  info.node_list = scontrol_field(line, "NodeList").value_or("");
  if (info.node_list == "(null)") info.node_list.clear();  // squeue shows a pending job's nodes as ""
  info.exit_code = scontrol_field(line, "ExitCode").value_or("");
  return info;
}

std::vector<std::string> squeue_fields(std::string_view line, size_t expected) {
  std::vector<std::string> fields;
  for (size_t begin = 0;;) {
    size_t end = line.find('|', begin);
    fields.emplace_back(trim(line.substr(begin, end - begin)));
    if (end == std::string_view::npos) break;
    begin = end + 1;
  }
  if (fields.size() != expected)
    throw SlurmError(fmt::format("squeue: expected {} '|'-separated fields, got: {}", expected, line));
  return fields;
}

// One line of squeue -o "%i|%T|%r|%M|%N".
JobInfo parse_squeue_job(std::string_view line) {
  std::vector<std::string> fields = squeue_fields(line, 5);
  JobInfo info;
  info.job_id = fields[0];
  info.state = fields[1];
  info.reason = fields[2];
  info.run_time = fields[3];
  info.node_list = fields[4];
  return info;
}

}  // namespace

SlurmClient::SlurmClient(CommandRunner& runner) : runner_(runner) {}

std::string SlurmClient::submit(const std::string& script_path, const std::vector<std::string>& options) {
  std::vector<std::string> argv{"sbatch", "--parsable"};
  argv.insert(argv.end(), options.begin(), options.end());
  argv.push_back(script_path);
  CommandResult result = run_checked(runner_, argv);
  std::string_view line = first_line(result.out);
  std::string_view job_id = line.substr(0, line.find(';'));
  if (job_id.empty()) throw SlurmError(fmt::format("sbatch --parsable {} printed no job id", script_path));
  // It becomes the run's job_id file and other jobs' --dependency: nothing but a job id may.
  if (!is_job_id(job_id))
    throw SlurmError(fmt::format("sbatch --parsable {} printed {:?}, not a job id", script_path, line.substr(0, 64)));
  return std::string(job_id);
}

std::optional<JobInfo> SlurmClient::job(const std::string& job_id) {
  std::vector<std::string> show = {"scontrol", "show", "job", "-o", job_id};
  CommandResult shown = runner_.run(show);
  if (shown.exit_code == 0 && !first_line(shown.out).empty()) return parse_scontrol_job(first_line(shown.out));
  if (shown.exit_code != 0 && !is_unknown_job(shown)) throw command_error(show, shown);

  // squeue has the last word on an id scontrol does not show; it reports fewer fields.
  std::vector<std::string> queue = {"squeue", "-h", "-j", job_id, "-o", "%i|%T|%r|%M|%N"};
  CommandResult queued = runner_.run(queue);
  if (queued.exit_code != 0 && !is_unknown_job(queued)) throw command_error(queue, queued);
  if (queued.exit_code != 0 || first_line(queued.out).empty()) return std::nullopt;
  return parse_squeue_job(first_line(queued.out));
}

std::vector<ArrayTaskInfo> SlurmClient::array_tasks(const std::vector<std::string>& array_job_ids) {
  if (array_job_ids.empty()) return {};
  // -O pads each field to its width; '|' ends a field. -o has no restart count.
  std::vector<std::string> argv = {"squeue", "-h", "-r", "-t", "all", "-j", fmt::format("{}", fmt::join(array_job_ids, ",")),
                                   "-O", "JobArrayID:40|,State:24|,RestartCnt:8|,Reason:80"};
  CommandResult result = runner_.run(argv);
  if (result.exit_code != 0 && is_unknown_job(result)) return {};
  if (result.exit_code != 0) throw command_error(argv, result);
  std::vector<ArrayTaskInfo> tasks;
  for (std::string_view line : lines_of(result.out)) {
    line = trim(line);
    if (line.empty()) continue;
    std::vector<std::string> fields = squeue_fields(line, 4);
    const size_t underscore = fields[0].find('_');
    if (underscore == std::string::npos) continue;  // not an array task
    ArrayTaskInfo task;
    task.array_job_id = fields[0].substr(0, underscore);
    std::optional<int> index = parse_int(std::string_view(fields[0]).substr(underscore + 1));
    std::optional<int> restarts = parse_int(fields[2]);
    if (!index || !restarts) throw SlurmError(fmt::format("squeue: unexpected array task line: {}", line));
    task.array_index = *index;
    task.state = fields[1];
    task.reason = fields[3];
    task.restart_count = *restarts;
    tasks.push_back(std::move(task));
  }
  return tasks;
}

void SlurmClient::cancel(const std::string& job_id) { run_checked(runner_, {"scancel", job_id}); }

std::map<std::string, std::string> SlurmClient::config() {
  CommandResult result = run_checked(runner_, {"scontrol", "show", "config"});
  std::map<std::string, std::string> values;
  for (std::string_view line : lines_of(result.out)) {
    // Headings ("Configuration data as of ...", "MPI Plugins Configuration:") have no '='.
    size_t equals = line.find('=');
    if (equals == std::string_view::npos || trim(line.substr(0, equals)).empty()) continue;
    values.emplace(trim(line.substr(0, equals)), trim(line.substr(equals + 1)));
  }
  return values;
}

int SlurmClient::max_array_size() {
  std::map<std::string, std::string> values = config();
  auto found = values.find("MaxArraySize");
  if (found == values.end()) return kSlurmDefaultMaxArraySize;
  std::optional<int> size = parse_int(found->second);
  if (!size) throw SlurmError(fmt::format("scontrol show config: MaxArraySize is not an integer: {}", found->second));
  return *size;
}

}  // namespace trainctl
