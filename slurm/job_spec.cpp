// The job-spec schema: see job_spec.h.
// Values that end up in #SBATCH lines are held to small charsets here, because sbatch reads
// those lines itself and nothing in them can be quoted (render.cpp relies on this).
#include "job_spec.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "config_reader.h"

namespace trainctl {

namespace {

constexpr int64_t kMaxSignalGraceSeconds = 65535;  // the largest delay sbatch --signal accepts
constexpr int64_t kMaxTimeLimitDays = 365;
constexpr int64_t kMaxTimeLimitSeconds = kMaxTimeLimitDays * 86400;
// One exported variable is one string of the environment, which execve caps at 128 KiB.
constexpr size_t kMaxEnvValueLength = 65536;
constexpr size_t kMaxSetupLineLength = 65536;
// Below this, a slow start-up or a long save would read as a hang.
constexpr int64_t kMinHangTimeoutSeconds = 10;

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_letter(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }
bool is_digits(std::string_view text) { return !text.empty() && std::all_of(text.begin(), text.end(), is_digit); }

// Letters, digits and `punctuation` only.
bool only(std::string_view text, std::string_view punctuation) {
  return std::all_of(text.begin(), text.end(), [&](char c) {
    return is_letter(c) || is_digit(c) || punctuation.find(c) != std::string_view::npos;
  });
}

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> fields;
  for (size_t begin = 0;;) {
    const size_t end = text.find(separator, begin);
    fields.push_back(text.substr(begin, end == std::string_view::npos ? std::string_view::npos : end - begin));
    if (end == std::string_view::npos) return fields;
    begin = end + 1;
  }
}


// What a value may hold, checked by plain loops (a regex would recurse per character and can
// overflow the stack on a long value), after its length.
struct Rule {
  size_t max_length;
  bool (*matches)(std::string_view);
  const char* allowed;  // completes "may contain only ..." / "must be ..."
};

constexpr const char* kSlurmNameChars = "may contain only letters, digits, '.', '_' and '-'";
const Rule kJobName{64, [](std::string_view v) { return only(v, "._-"); }, kSlurmNameChars};
const Rule kSlurmName{128, [](std::string_view v) { return only(v, "._-"); }, kSlurmNameChars};
const Rule kConstraint{4096, [](std::string_view v) { return only(v, "_.&|!()[]*,:-"); },
                       "may contain only letters, digits and the characters _.&|!()[]*,:-"};
const Rule kHostList{4096, [](std::string_view v) { return only(v, "_.,[]-"); },
                     "may contain only letters, digits and the characters _.,[]- (a host list such as "
                     "\"n[1-4],gpu7\")"};
const Rule kMemory{32,
                   [](std::string_view v) {
                     const bool unit = std::string_view("KMGT").find(v.back()) != std::string_view::npos;
                     return is_digits(unit ? v.substr(0, v.size() - 1) : v);
                   },
                   "must be a number with an optional unit K, M, G or T, such as \"4000\" or \"16G\""};
const Rule kSlurmTime{32, [](std::string_view v) { return time_limit_seconds(v).has_value(); },
                      "must be a SLURM time \"M\", \"M:S\", \"H:M:S\", \"D-H\", \"D-H:M\" or \"D-H:M:S\" "
                      "(digits only), or an integer number of minutes"};
const Rule kShellIdentifier{256,
                            [](std::string_view v) { return !is_digit(v.front()) && only(v, "_"); },
                            "must be a shell variable name: a letter or '_', then letters, digits or '_'"};

std::string too_long(size_t max_length, size_t length) {
  return fmt::format("must be at most {} characters (got {})", max_length, length);
}

// Empty values get their own message: "may contain only ..." would not say what is wrong.
void require(TableReader& reader, std::string_view key, const std::string& value, const Rule& rule) {
  if (value.empty()) reader.fail(key, "must not be empty");
  if (value.size() > rule.max_length) reader.fail(key, too_long(rule.max_length, value.size()));
  if (!rule.matches(value)) reader.fail(key, fmt::format("{} (got {:?})", rule.allowed, value));
}

std::optional<std::string> optional_matching(TableReader& reader, std::string_view key, const Rule& rule) {
  std::optional<std::string> value = reader.optional_string(key);
  if (value) require(reader, key, *value, rule);
  return value;
}

// slurmctld sends the --signal warning once now + grace + its periodic check interval (30 s)
// reaches the end time, so a grace that long relative to the limit can signal a run as it starts.
constexpr int64_t kSlurmTimeLimitCheckSeconds = 30;

void check_signal_fits_time(TableReader& reader, const JobSpec& job) {
  if (!job.time) return;
  const int64_t limit = *time_limit_seconds(*job.time);
  if (job.signal_grace + kSlurmTimeLimitCheckSeconds < limit) return;
  reader.fail(reader.has("signal_grace") ? "signal_grace" : "time",
              fmt::format("signal_grace ({} s) plus SLURM's {} s time-limit check must be less than job.time ({} s), "
                          "or every run may be signalled as it starts; lower signal_grace or raise time",
                          job.signal_grace, kSlurmTimeLimitCheckSeconds, limit));
}

// SLURM takes a bare number as minutes, so an integer is accepted and kept as its decimal text.
std::optional<std::string> parse_time(TableReader& reader, const toml::table& job_table) {
  const toml::node* node = job_table.get("time");
  if (node != nullptr && node->is_integer())
    return std::to_string(reader.integer("time", std::nullopt, 1, kMaxTimeLimitSeconds / 60));
  if (node != nullptr && !node->is_string())
    reader.fail("time", "expected a SLURM time string such as \"1:00:00\" or an integer number of minutes");
  std::optional<std::string> time = optional_matching(reader, "time", kSlurmTime);
  if (time && *time_limit_seconds(*time) > kMaxTimeLimitSeconds)
    reader.fail("time", fmt::format("must be at most {} days (got {:?})", kMaxTimeLimitDays, *time));
  return time;
}

std::map<std::string, std::string> parse_env(TableReader& reader, const toml::table& job_table,
                                             const std::string& file) {
  std::map<std::string, std::string> env = reader.string_table("env");
  if (env.empty()) return env;
  const toml::node& env_node = *job_table.get("env");
  TableReader env_reader(env_node.as_table(), reader.dotted("env"), file, position_of(env_node, file));
  for (const auto& [name, value] : env) {
    if (name.empty() || name.size() > kShellIdentifier.max_length || !kShellIdentifier.matches(name))
      env_reader.fail(name, kShellIdentifier.allowed);
    if (name.starts_with("SLURM_"))
      env_reader.fail(name, "names starting with SLURM_ are reserved: SLURM sets them for the job");
    if (name.starts_with("TRAINCTL_"))
      env_reader.fail(name, "names starting with TRAINCTL_ are reserved: the batch script sets them");
    if (value.size() > kMaxEnvValueLength) env_reader.fail(name, too_long(kMaxEnvValueLength, value.size()));
  }
  return env;
}

int64_t parse_hang_timeout(TableReader& reader, int64_t default_seconds) {
  const int64_t seconds = reader.integer("hang_timeout", default_seconds, 0, kMaxTimeLimitSeconds);
  if (seconds != 0 && seconds < kMinHangTimeoutSeconds)
    reader.fail("hang_timeout", fmt::format("must be 0 (no watchdog) or at least {} seconds (got {})",
                                            kMinHangTimeoutSeconds, seconds));
  return seconds;
}

std::vector<std::string> parse_setup(TableReader& reader) {
  std::vector<std::string> setup = reader.string_list("setup", std::vector<std::string>{});
  for (size_t index = 0; index < setup.size(); ++index) {
    if (setup[index].find('\n') != std::string::npos)
      reader.fail("setup",
                  fmt::format("element {} contains a newline; write each shell line as its own element", index));
    if (setup[index].size() > kMaxSetupLineLength)
      reader.fail("setup", fmt::format("element {} {}", index, too_long(kMaxSetupLineLength, setup[index].size())));
  }
  return setup;
}

}  // namespace

std::optional<int64_t> time_limit_seconds(std::string_view time) {
  const size_t dash = time.find('-');
  const bool has_days = dash != std::string_view::npos;
  const std::vector<std::string_view> fields = split(has_days ? time.substr(dash + 1) : time, ':');
  if (fields.size() > 3 || !std::all_of(fields.begin(), fields.end(), is_digits)) return std::nullopt;
  if (has_days && !is_digits(time.substr(0, dash))) return std::nullopt;
  constexpr int64_t kCap = kMaxTimeLimitSeconds + 1;
  int64_t seconds = 0;
  auto add = [&](std::string_view digits, int64_t unit) {
    int64_t value = kCap;
    if (std::from_chars(digits.data(), digits.data() + digits.size(), value).ec != std::errc{}) value = kCap;
    seconds = std::min(kCap, seconds + std::min(value, kCap) * unit);
  };
  if (has_days) add(time.substr(0, dash), 86400);
  // Without days the fields are [M], [M, S] or [H, M, S]; with days, [H], [H, M] or [H, M, S].
  static constexpr int64_t kUnitsWithoutDays[3][3] = {{60}, {60, 1}, {3600, 60, 1}};
  static constexpr int64_t kUnitsWithDays[3][3] = {{3600}, {3600, 60}, {3600, 60, 1}};
  const auto& units = has_days ? kUnitsWithDays[fields.size() - 1] : kUnitsWithoutDays[fields.size() - 1];
  for (size_t i = 0; i < fields.size(); ++i) add(fields[i], units[i]);
  return seconds;
}

JobSpec parse_job_spec(const toml::table& root, const std::string& file) {
  TableReader reader = TableReader::child(root, "job", file);
  if (!reader.present()) reader.fail("name", "required table [job] is missing");
  const toml::table& job_table = *root.get("job")->as_table();

  JobSpec job;
  job.name = reader.string("name");
  require(reader, "name", job.name, kJobName);
  job.partition = optional_matching(reader, "partition", kSlurmName);
  job.account = optional_matching(reader, "account", kSlurmName);
  job.qos = optional_matching(reader, "qos", kSlurmName);
  job.nodes = reader.integer("nodes", job.nodes, 1, kMaxNodes);
  job.ranks_per_node = reader.integer("ranks_per_node", job.ranks_per_node, 1, kMaxRanksPerNode);
  job.cpus_per_rank = reader.integer("cpus_per_rank", job.cpus_per_rank, 1, kMaxCpusPerRank);
  job.gpus_per_node = reader.integer("gpus_per_node", job.gpus_per_node, 0, kMaxGpusPerNode);
  job.mem = optional_matching(reader, "mem", kMemory);
  job.gpu_memory = optional_matching(reader, "gpu_memory", kMemory);
  if (job.gpu_memory && job.gpus_per_node == 0)
    reader.fail("gpu_memory", "states the memory of one of the job's GPUs, and job.gpus_per_node asks for none");
  job.time = parse_time(reader, job_table);
  job.signal = reader.choice("signal", {"TERM", "USR1", "USR2"}, job.signal);
  job.signal_grace = reader.integer("signal_grace", job.signal_grace, 1, kMaxSignalGraceSeconds);
  check_signal_fits_time(reader, job);
  job.max_requeues = reader.integer("max_requeues", job.max_requeues, 0, kMaxRequeues);
  // The watchdog reads heartbeat.step, which trainctl-runtime writes; a [program] need not, so
  // its watchdog is off unless the user turns it on (docs/programs.md).
  job.hang_timeout = parse_hang_timeout(reader, root.contains("program") ? 0 : job.hang_timeout);
  job.check_nodes = reader.boolean("check_nodes", job.check_nodes);
  job.check_nodes_timeout = reader.integer("check_nodes_timeout", job.check_nodes_timeout, 1, kMaxTimeLimitSeconds);
  job.max_excluded_nodes = reader.integer("max_excluded_nodes", job.max_excluded_nodes, 0, kMaxExcludedNodes);
  job.constraint = optional_matching(reader, "constraint", kConstraint);
  job.exclude = optional_matching(reader, "exclude", kHostList);
  job.env = parse_env(reader, job_table, file);
  job.setup = parse_setup(reader);
  reader.reject_unknown();
  return job;
}

int64_t memory_bytes(std::string_view mem) {
  const size_t unit_index = std::string_view("KMGT").find(mem.back());
  const bool has_unit = unit_index != std::string_view::npos;
  const std::string_view digits = has_unit ? mem.substr(0, mem.size() - 1) : mem;
  constexpr int64_t kMebibyte = int64_t{1} << 20;
  const int64_t unit = has_unit ? int64_t{1} << (10 * (unit_index + 1)) : kMebibyte;
  int64_t count = 0;
  int64_t bytes = 0;
  if (std::from_chars(digits.data(), digits.data() + digits.size(), count).ec != std::errc{} ||
      __builtin_mul_overflow(count, unit, &bytes))
    return std::numeric_limits<int64_t>::max();
  return bytes;
}

std::string slurm_time(int64_t seconds) {
  const int64_t days = seconds / 86400, hours = seconds % 86400 / 3600, minutes = seconds % 3600 / 60;
  if (days > 0) return fmt::format("{}-{:02}:{:02}:{:02}", days, hours, minutes, seconds % 60);
  return fmt::format("{}:{:02}:{:02}", hours, minutes, seconds % 60);
}

}  // namespace trainctl
