// The job-spec schema: see job_spec.h.
// Values that end up in #SBATCH lines are held to small charsets here, because sbatch reads
// those lines itself and nothing in them can be quoted (render.cpp relies on this).
#include "job_spec.h"

#include <regex>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "config_reader.h"

namespace trainctl {

namespace {

constexpr size_t kMaxJobNameLength = 64;
constexpr int64_t kMaxSignalGraceSeconds = 65535;  // the largest delay sbatch --signal accepts

struct Pattern {
  std::regex regex;
  const char* allowed;  // completes "may contain only ..." / "must be ..."
};

const Pattern kSlurmName{std::regex("[A-Za-z0-9._-]+"), "may contain only letters, digits, '.', '_' and '-'"};
const Pattern kConstraint{std::regex(R"([A-Za-z0-9_.&|!()\[\]*,:-]+)"),
                          "may contain only letters, digits and the characters _.&|!()[]*,:-"};
const Pattern kHostList{std::regex(R"([A-Za-z0-9_.,\[\]-]+)"),
                        "may contain only letters, digits and the characters _.,[]- (a host list such as "
                        "\"n[1-4],gpu7\")"};
const Pattern kMemory{std::regex("[0-9]+[KMGT]?"),
                      "must be a number with an optional unit K, M, G or T, such as \"4000\" or \"16G\""};
const Pattern kSlurmTime{std::regex("[0-9]+(:[0-9]+){0,2}|[0-9]+-[0-9]+(:[0-9]+){0,2}"),
                         "must be a SLURM time \"M\", \"M:S\", \"H:M:S\", \"D-H\", \"D-H:M\" or \"D-H:M:S\" "
                         "(digits only), or an integer number of minutes"};
const Pattern kShellIdentifier{std::regex("[A-Za-z_][A-Za-z0-9_]*"),
                               "must be a shell variable name: a letter or '_', then letters, digits or '_'"};

// Empty values get their own message: "may contain only ..." would not say what is wrong.
void require(TableReader& reader, std::string_view key, const std::string& value, const Pattern& pattern) {
  if (value.empty()) reader.fail(key, "must not be empty");
  if (!std::regex_match(value, pattern.regex)) reader.fail(key, fmt::format("{} (got {:?})", pattern.allowed, value));
}

std::optional<std::string> optional_matching(TableReader& reader, std::string_view key, const Pattern& pattern) {
  std::optional<std::string> value = reader.optional_string(key);
  if (value) require(reader, key, *value, pattern);
  return value;
}

// SLURM takes a bare number as minutes, so an integer is accepted and kept as its decimal text.
// A SLURM time limit in seconds: M, M:S, H:M:S, D-H, D-H:M or D-H:M:S (already validated).
int64_t time_limit_seconds(const std::string& time) {
  const size_t dash = time.find('-');
  const int64_t days = dash == std::string::npos ? 0 : std::stoll(time.substr(0, dash));
  std::vector<int64_t> fields;
  std::stringstream rest(dash == std::string::npos ? time : time.substr(dash + 1));
  for (std::string field; std::getline(rest, field, ':');) fields.push_back(std::stoll(field));
  // Without days the fields are [M], [M, S] or [H, M, S]; with days, [H], [H, M] or [H, M, S].
  static constexpr int64_t kUnitsWithoutDays[3][3] = {{60}, {60, 1}, {3600, 60, 1}};
  static constexpr int64_t kUnitsWithDays[3][3] = {{3600}, {3600, 60}, {3600, 60, 1}};
  const auto& units = dash == std::string::npos ? kUnitsWithoutDays[fields.size() - 1] : kUnitsWithDays[fields.size() - 1];
  int64_t seconds = days * 86400;
  for (size_t i = 0; i < fields.size(); ++i) seconds += fields[i] * units[i];
  return seconds;
}

// slurmctld sends the --signal warning once now + grace + its periodic check interval (30 s)
// reaches the end time, so a grace that long relative to the limit can signal a run as it starts.
constexpr int64_t kSlurmTimeLimitCheckSeconds = 30;

void check_signal_fits_time(TableReader& reader, const JobSpec& job) {
  if (!job.time) return;
  const int64_t limit = time_limit_seconds(*job.time);
  if (job.signal_grace + kSlurmTimeLimitCheckSeconds < limit) return;
  reader.fail(reader.has("signal_grace") ? "signal_grace" : "time",
              fmt::format("signal_grace ({} s) plus SLURM's {} s time-limit check must be less than job.time ({} s), "
                          "or every run may be signalled as it starts; lower signal_grace or raise time",
                          job.signal_grace, kSlurmTimeLimitCheckSeconds, limit));
}

std::optional<std::string> parse_time(TableReader& reader, const toml::table& job_table) {
  const toml::node* node = job_table.get("time");
  if (node != nullptr && node->is_integer()) return std::to_string(reader.integer("time", std::nullopt, 1));
  if (node != nullptr && !node->is_string())
    reader.fail("time", "expected a SLURM time string such as \"1:00:00\" or an integer number of minutes");
  return optional_matching(reader, "time", kSlurmTime);
}

std::map<std::string, std::string> parse_env(TableReader& reader, const toml::table& job_table,
                                             const std::string& file) {
  std::map<std::string, std::string> env = reader.string_table("env");
  if (env.empty()) return env;
  const toml::node& env_node = *job_table.get("env");
  TableReader env_reader(env_node.as_table(), reader.dotted("env"), file, position_of(env_node, file));
  for (const auto& [name, value] : env) {
    if (!std::regex_match(name, kShellIdentifier.regex)) env_reader.fail(name, kShellIdentifier.allowed);
    if (name.starts_with("SLURM_"))
      env_reader.fail(name, "names starting with SLURM_ are reserved: SLURM sets them for the job");
    if (name.starts_with("TRAINCTL_"))
      env_reader.fail(name, "names starting with TRAINCTL_ are reserved: the batch script sets them");
    // The environment of a process is a list of C strings.
    if (value.find('\0') != std::string::npos) env_reader.fail(name, "must not contain a NUL character");
  }
  return env;
}

std::vector<std::string> parse_setup(TableReader& reader) {
  std::vector<std::string> setup = reader.string_list("setup", std::vector<std::string>{});
  for (size_t index = 0; index < setup.size(); ++index) {
    if (setup[index].find('\n') != std::string::npos)
      reader.fail("setup",
                  fmt::format("element {} contains a newline; write each shell line as its own element", index));
    if (setup[index].find('\0') != std::string::npos)
      reader.fail("setup", fmt::format("element {} contains a NUL character", index));
  }
  return setup;
}

}  // namespace

JobSpec parse_job_spec(const toml::table& root, const std::string& file) {
  TableReader reader = TableReader::child(root, "job", file);
  if (!reader.present()) reader.fail("name", "required table [job] is missing");
  const toml::table& job_table = *root.get("job")->as_table();

  JobSpec job;
  job.name = reader.string("name");
  require(reader, "name", job.name, kSlurmName);
  if (job.name.size() > kMaxJobNameLength)
    reader.fail("name", fmt::format("must be at most {} characters (got {})", kMaxJobNameLength, job.name.size()));
  job.partition = optional_matching(reader, "partition", kSlurmName);
  job.account = optional_matching(reader, "account", kSlurmName);
  job.qos = optional_matching(reader, "qos", kSlurmName);
  job.nodes = reader.integer("nodes", job.nodes, 1);
  job.ranks_per_node = reader.integer("ranks_per_node", job.ranks_per_node, 1);
  job.cpus_per_rank = reader.integer("cpus_per_rank", job.cpus_per_rank, 1);
  job.gpus_per_node = reader.integer("gpus_per_node", job.gpus_per_node, 0);
  job.mem = optional_matching(reader, "mem", kMemory);
  job.time = parse_time(reader, job_table);
  job.signal = reader.choice("signal", {"TERM", "USR1", "USR2"}, job.signal);
  job.signal_grace = reader.integer("signal_grace", job.signal_grace, 1, kMaxSignalGraceSeconds);
  check_signal_fits_time(reader, job);
  job.max_requeues = reader.integer("max_requeues", job.max_requeues, 0);
  job.constraint = optional_matching(reader, "constraint", kConstraint);
  job.exclude = optional_matching(reader, "exclude", kHostList);
  job.env = parse_env(reader, job_table, file);
  job.setup = parse_setup(reader);
  reader.reject_unknown();
  return job;
}

}  // namespace trainctl
