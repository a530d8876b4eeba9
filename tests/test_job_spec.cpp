// Tests for the [job] schema (slurm/job_spec.cpp): every field, the defaults, and the exact
// error text, position included, for values that must never reach an #SBATCH line or a shell.
#include <doctest/doctest.h>

#include <string>
#include <string_view>

#include <fmt/format.h>

#include "config_reader.h"
#include "error_message.h"
#include "job_spec.h"

using trainctl::ConfigError;
using trainctl::JobSpec;

namespace {

JobSpec parse(std::string_view text) {
  return trainctl::parse_job_spec(trainctl::parse_config_text(text, "job.toml"), "job.toml");
}

std::string error_of(std::string_view text) {
  return error_message<ConfigError>([&] { (void)parse(text); });
}

}  // namespace

TEST_CASE("a full [job] table sets every field") {
  JobSpec job = parse(R"toml(
[job]
name = "mlp-small.v2_b"
partition = "gpu"
account = "proj_42"
qos = "high"
nodes = 2
ranks_per_node = 4
cpus_per_rank = 8
gpus_per_node = 4
mem = "64G"
time = "1-12:00:00"
signal = "USR1"
signal_grace = 90
max_requeues = 3
check_nodes = false
check_nodes_timeout = 60
max_excluded_nodes = 4
constraint = "a100&(ib|roce)"
exclude = "n[1-3],gpu7"
setup = ["module load cuda", "source /opt/env.sh"]

[job.env]
NCCL_DEBUG = "INFO"
_MESSAGE = "it's $(not run) \"quoted\"\nsecond line"
)toml");
  CHECK(job.name == "mlp-small.v2_b");
  CHECK(job.partition == "gpu");
  CHECK(job.account == "proj_42");
  CHECK(job.qos == "high");
  CHECK(job.nodes == 2);
  CHECK(job.ranks_per_node == 4);
  CHECK(job.cpus_per_rank == 8);
  CHECK(job.gpus_per_node == 4);
  CHECK(job.world_size() == 8);
  CHECK(job.mem == "64G");
  CHECK(job.time == "1-12:00:00");
  CHECK(job.signal == "USR1");
  CHECK(job.signal_grace == 90);
  CHECK(job.max_requeues == 3);
  CHECK_FALSE(job.check_nodes);
  CHECK(job.check_nodes_timeout == 60);
  CHECK(job.max_excluded_nodes == 4);
  CHECK(job.constraint == "a100&(ib|roce)");
  CHECK(job.exclude == "n[1-3],gpu7");
  CHECK(job.setup == std::vector<std::string>{"module load cuda", "source /opt/env.sh"});
  CHECK(job.env == std::map<std::string, std::string>{{"NCCL_DEBUG", "INFO"},
                                                      {"_MESSAGE", "it's $(not run) \"quoted\"\nsecond line"}});
}

TEST_CASE("only the name is required; everything else has a default") {
  JobSpec job = parse("[job]\nname = \"x\"\n");
  CHECK(job.name == "x");
  CHECK_FALSE(job.partition);
  CHECK_FALSE(job.account);
  CHECK_FALSE(job.qos);
  CHECK(job.nodes == 1);
  CHECK(job.ranks_per_node == 1);
  CHECK(job.cpus_per_rank == 1);
  CHECK(job.gpus_per_node == 0);
  CHECK_FALSE(job.mem);
  CHECK_FALSE(job.time);
  CHECK(job.signal == "TERM");
  CHECK(job.signal_grace == 120);
  CHECK(job.max_requeues == 10);
  CHECK(job.hang_timeout == 1800);
  CHECK(job.check_nodes);
  CHECK(job.check_nodes_timeout == 300);
  CHECK(job.max_excluded_nodes == 2);
  CHECK_FALSE(job.constraint);
  CHECK_FALSE(job.exclude);
  CHECK(job.env.empty());
  CHECK(job.setup.empty());
}

TEST_CASE("time accepts every SLURM time format and an integer number of minutes") {
  for (const char* time : {"30", "30:00", "1:00:00", "2-0", "2-12:00", "2-12:00:00"}) {
    CAPTURE(time);
    CHECK(parse(std::string("[job]\nname = \"x\"\ntime = \"") + time + "\"\n").time == time);
  }
  CHECK(parse("[job]\nname = \"x\"\ntime = 90\n").time == "90");
}

TEST_CASE("the limits of the numeric keys are accepted") {
  JobSpec job = parse("[job]\nname = \"x\"\ngpus_per_node = 0\nsignal_grace = 65535\nmax_requeues = 0\n");
  CHECK(job.gpus_per_node == 0);
  CHECK(job.signal_grace == 65535);
  CHECK(job.max_requeues == 0);
  CHECK(parse("[job]\nname = \"" + std::string(64, 'n') + "\"\n").name.size() == 64);
}

TEST_CASE("a missing [job] table or name is reported") {
  CHECK(error_of("[train]\nsteps = 1\n") == "job.toml:1:1: job.name: required table [job] is missing");
  CHECK(error_of("[job]\nnodes = 1\n") == "job.toml:1:1: job.name: required key is missing");
  CHECK(error_of("job = 3\n") == "job.toml:1:7: job: expected a table, got an integer");
}

TEST_CASE("unknown keys and wrong types are reported with their position") {
  CHECK(error_of("[job]\nname = \"x\"\nnodse = 2\n") ==
        "job.toml:3:9: job.nodse: unknown key (did you mean \"nodes\"?)");
  CHECK(error_of("[job]\nname = \"x\"\nnodes = \"2\"\n") ==
        "job.toml:3:9: job.nodes: expected an integer, got a string");
  CHECK(error_of("[job]\nname = \"x\"\nnodes = 0\n") == "job.toml:3:9: job.nodes: must be at least 1 (got 0)");
  CHECK(error_of("[job]\nname = \"x\"\nsetup = \"module load x\"\n") ==
        "job.toml:3:9: job.setup: expected an array of strings, got a string");
}

TEST_CASE("names that sbatch or a shell would read as more than a name are rejected") {
  CHECK(error_of("[job]\nname = \"a b\"\n") ==
        "job.toml:2:8: job.name: may contain only letters, digits, '.', '_' and '-' (got \"a b\")");
  CHECK(error_of("[job]\nname = \"$(reboot)\"\n") ==
        "job.toml:2:8: job.name: may contain only letters, digits, '.', '_' and '-' (got \"$(reboot)\")");
  CHECK(error_of("[job]\nname = \"x\\n#SBATCH --uid=0\"\n") ==
        "job.toml:2:8: job.name: may contain only letters, digits, '.', '_' and '-' (got \"x\\n#SBATCH --uid=0\")");
  CHECK(error_of("[job]\nname = \"\"\n") == "job.toml:2:8: job.name: must not be empty");
  CHECK(error_of("[job]\nname = \"" + std::string(65, 'n') + "\"\n") ==
        "job.toml:2:8: job.name: must be at most 64 characters (got 65)");
  CHECK(error_of("[job]\nname = \"x\"\npartition = \"gpu;reboot\"\n") ==
        "job.toml:3:13: job.partition: may contain only letters, digits, '.', '_' and '-' (got \"gpu;reboot\")");
  CHECK(error_of("[job]\nname = \"x\"\npartition = \"a b\"\n") ==
        "job.toml:3:13: job.partition: may contain only letters, digits, '.', '_' and '-' (got \"a b\")");
  CHECK(error_of("[job]\nname = \"x\"\naccount = \"a'b\"\n") ==
        "job.toml:3:11: job.account: may contain only letters, digits, '.', '_' and '-' (got \"a'b\")");
  CHECK(error_of("[job]\nname = \"x\"\nqos = \"%x\"\n") ==
        "job.toml:3:7: job.qos: may contain only letters, digits, '.', '_' and '-' (got \"%x\")");
}

TEST_CASE("constraint and exclude are limited to their SLURM syntax") {
  CHECK(error_of("[job]\nname = \"x\"\nconstraint = \"a100 && ib\"\n") ==
        "job.toml:3:14: job.constraint: may contain only letters, digits and the characters _.&|!()[]*,:- "
        "(got \"a100 && ib\")");
  CHECK(error_of("[job]\nname = \"x\"\nexclude = \"n1;n2\"\n") ==
        "job.toml:3:11: job.exclude: may contain only letters, digits and the characters _.,[]- "
        "(a host list such as \"n[1-4],gpu7\") (got \"n1;n2\")");
}

TEST_CASE("a signal grace that leaves no time to train before SLURM's warning is rejected") {
  const std::string rule = " s time-limit check must be less than job.time (";
  // time = 1 minute: default grace 120 s, reported at time since signal_grace was not written.
  CHECK(error_of("[job]\nname = \"x\"\ntime = 1\n") ==
        "job.toml:3:8: job.time: signal_grace (120 s) plus SLURM's 30 s time-limit check must be less than "
        "job.time (60 s), or every run may be signalled as it starts; lower signal_grace or raise time");
  CHECK(error_of("[job]\nname = \"x\"\ntime = 1\nsignal_grace = 45\n") ==
        "job.toml:4:16: job.signal_grace: signal_grace (45 s) plus SLURM's 30 s time-limit check must be less "
        "than job.time (60 s), or every run may be signalled as it starts; lower signal_grace or raise time");
  CHECK(parse("[job]\nname = \"x\"\ntime = 1\nsignal_grace = 29\n").signal_grace == 29);
  // Every time format converts to seconds: H:M:S, M:S, D-H, D-H:M.
  CHECK(error_of("[job]\nname = \"x\"\ntime = \"0:02:00\"\nsignal_grace = 90\n").find("job.time (120 s)") !=
        std::string::npos);
  CHECK(error_of("[job]\nname = \"x\"\ntime = \"1:30\"\nsignal_grace = 60\n").find("job.time (90 s)") !=
        std::string::npos);
  CHECK(parse("[job]\nname = \"x\"\ntime = \"0-0:03\"\nsignal_grace = 149\n").signal_grace == 149);
  CHECK(error_of("[job]\nname = \"x\"\ntime = \"0-0:03\"\nsignal_grace = 150\n").find("job.time (180 s)") !=
        std::string::npos);
  CHECK(parse("[job]\nname = \"x\"\ntime = \"1-0\"\nsignal_grace = 65535\n").time == "1-0");
  CHECK(error_of("[job]\nname = \"x\"\ntime = \"0-1\"\nsignal_grace = 3570\n").find(rule + "3600 s)") !=
        std::string::npos);
}

TEST_CASE("bad time and mem values say what SLURM accepts") {
  const std::string time_rule =
      "must be a SLURM time \"M\", \"M:S\", \"H:M:S\", \"D-H\", \"D-H:M\" or \"D-H:M:S\" (digits only), "
      "or an integer number of minutes";
  CHECK(error_of("[job]\nname = \"x\"\ntime = \"1:00:00:00\"\n") ==
        "job.toml:3:8: job.time: " + time_rule + " (got \"1:00:00:00\")");
  CHECK(error_of("[job]\nname = \"x\"\ntime = \"1h\"\n") == "job.toml:3:8: job.time: " + time_rule + " (got \"1h\")");
  CHECK(error_of("[job]\nname = \"x\"\ntime = 0\n") == "job.toml:3:8: job.time: must be at least 1 (got 0)");
  CHECK(error_of("[job]\nname = \"x\"\ntime = 1.5\n") ==
        "job.toml:3:8: job.time: expected a SLURM time string such as \"1:00:00\" or an integer number of minutes");
  CHECK(error_of("[job]\nname = \"x\"\nmem = \"16GB\"\n") ==
        "job.toml:3:7: job.mem: must be a number with an optional unit K, M, G or T, such as \"4000\" or \"16G\" "
        "(got \"16GB\")");
}

TEST_CASE("signal and signal_grace stay within what sbatch --signal takes") {
  CHECK(error_of("[job]\nname = \"x\"\nsignal = \"KILL\"\n") ==
        "job.toml:3:10: job.signal: must be one of \"TERM\", \"USR1\", \"USR2\" (got \"KILL\")");
  CHECK(error_of("[job]\nname = \"x\"\nsignal_grace = 0\n") ==
        "job.toml:3:16: job.signal_grace: must be at least 1 (got 0)");
  CHECK(error_of("[job]\nname = \"x\"\nsignal_grace = 65536\n") ==
        "job.toml:3:16: job.signal_grace: must be at most 65535 (got 65536)");
  CHECK(error_of("[job]\nname = \"x\"\nmax_requeues = -1\n") ==
        "job.toml:3:16: job.max_requeues: must be at least 0 (got -1)");
}

TEST_CASE("the node check's timeout is at least a second, and max_excluded_nodes not negative") {
  CHECK(error_of("[job]\nname = \"x\"\ncheck_nodes_timeout = 0\n") ==
        "job.toml:3:23: job.check_nodes_timeout: must be at least 1 (got 0)");
  CHECK(error_of("[job]\nname = \"x\"\nmax_excluded_nodes = -1\n") ==
        "job.toml:3:22: job.max_excluded_nodes: must be at least 0 (got -1)");
  CHECK(error_of("[job]\nname = \"x\"\ncheck_nodes = \"yes\"\n") ==
        "job.toml:3:15: job.check_nodes: expected a boolean, got a string");
}

TEST_CASE("hang_timeout is 0 (no watchdog) or at least 10 seconds") {
  CHECK(parse("[job]\nname = \"x\"\nhang_timeout = 0\n").hang_timeout == 0);
  CHECK(parse("[job]\nname = \"x\"\nhang_timeout = 10\n").hang_timeout == 10);
  CHECK(error_of("[job]\nname = \"x\"\nhang_timeout = 9\n") ==
        "job.toml:3:16: job.hang_timeout: must be 0 (no watchdog) or at least 10 seconds (got 9)");
  CHECK(error_of("[job]\nname = \"x\"\nhang_timeout = -1\n") ==
        "job.toml:3:16: job.hang_timeout: must be at least 0 (got -1)");
}

TEST_CASE("env keys must be shell variable names outside SLURM's namespace") {
  CHECK(error_of("[job]\nname = \"x\"\n[job.env]\n1BAD = \"v\"\n") ==
        "job.toml:4:8: job.env.1BAD: must be a shell variable name: a letter or '_', then letters, digits or '_'");
  CHECK(error_of("[job]\nname = \"x\"\n[job.env]\n\"A B\" = \"v\"\n") ==
        "job.toml:4:9: job.env.A B: must be a shell variable name: a letter or '_', then letters, digits or '_'");
  CHECK(error_of("[job]\nname = \"x\"\n[job.env]\nSLURM_FOO = \"v\"\n") ==
        "job.toml:4:13: job.env.SLURM_FOO: names starting with SLURM_ are reserved: SLURM sets them for the job");
  CHECK(error_of("[job]\nname = \"x\"\n[job.env]\nTRAINCTL_RUN_DIR = \"/tmp\"\n") ==
        "job.toml:4:20: job.env.TRAINCTL_RUN_DIR: names starting with TRAINCTL_ are reserved: the batch script sets them");
  CHECK(error_of("[job]\nname = \"x\"\n[job.env]\nX = 1\n") ==
        "job.toml:4:5: job.env.X: expected a string, got an integer");
  CHECK(error_of("[job]\nname = \"x\"\n[job.env]\nX = \"a\\u0000b\"\n") ==
        "job.toml:4:5: job.env.X: must not contain a NUL character");
}

TEST_CASE("a setup element is exactly one shell line") {
  CHECK(error_of("[job]\nname = \"x\"\nsetup = [\"module load x\", \"a\\nb\"]\n") ==
        "job.toml:3:9: job.setup: element 1 contains a newline; write each shell line as its own element");
  CHECK(error_of("[job]\nname = \"x\"\nsetup = [\"a\\u0000b\"]\n") ==
        "job.toml:3:9: job.setup: element 0 contains a NUL character");
}

TEST_CASE("a 1 MB value in any [job] string key is refused by its length before anything else reads it") {
  const std::string huge(1 << 20, 'a');
  const struct {
    const char* key;
    const char* message;
  } cases[] = {
      {"name", "must be at most 64 characters (got 1048576)"},
      {"partition", "must be at most 128 characters (got 1048576)"},
      {"account", "must be at most 128 characters (got 1048576)"},
      {"qos", "must be at most 128 characters (got 1048576)"},
      {"mem", "must be at most 32 characters (got 1048576)"},
      {"time", "must be at most 32 characters (got 1048576)"},
      {"constraint", "must be at most 4096 characters (got 1048576)"},
      {"exclude", "must be at most 4096 characters (got 1048576)"},
      {"signal", R"(must be one of "TERM", "USR1", "USR2" (got a string of 1048576 characters))"},
  };
  for (const auto& [key, message] : cases) {
    CAPTURE(key);
    const std::string name_line = std::string_view(key) == "name" ? "" : "name = \"x\"\n";
    CHECK(error_of(fmt::format("[job]\n{} = \"{}\"\n{}", key, huge, name_line)) ==
          fmt::format("job.toml:2:{}: job.{}: {}", std::string_view(key).size() + 4, key, message));
  }
  CHECK(error_of("[job]\nname = \"x\"\n[job.env]\nX = \"" + huge + "\"\n") ==
        "job.toml:4:5: job.env.X: must be at most 65536 characters (got 1048576)");
  CHECK(error_of("[job]\nname = \"x\"\nsetup = [\"true\", \"" + huge + "\"]\n") ==
        "job.toml:3:9: job.setup: element 1 must be at most 65536 characters (got 1048576)");
  // Up to the limits the values are read.
  CHECK(parse("[job]\nname = \"x\"\nexclude = \"" + std::string(4096, 'n') + "\"\n").exclude->size() == 4096);
  CHECK(parse("[job]\nname = \"x\"\n[job.env]\nX = \"" + std::string(65536, 'v') + "\"\n").env["X"].size() == 65536);
}

TEST_CASE("every [job] count has an upper bound: 2^63-1 is refused with it") {
  const struct {
    const char* key;
    const char* message;
  } cases[] = {
      {"nodes", "must be at most 100000 (got 9223372036854775807)"},
      {"ranks_per_node", "must be at most 4096 (got 9223372036854775807)"},
      {"cpus_per_rank", "must be at most 4096 (got 9223372036854775807)"},
      {"gpus_per_node", "must be at most 1024 (got 9223372036854775807)"},
      {"signal_grace", "must be at most 65535 (got 9223372036854775807)"},
      {"max_requeues", "must be at most 1000 (got 9223372036854775807)"},
      {"hang_timeout", "must be at most 31536000 (got 9223372036854775807)"},
      {"time", "must be at most 525600 (got 9223372036854775807)"},
  };
  for (const auto& [key, message] : cases) {
    CAPTURE(key);
    CHECK(error_of(fmt::format("[job]\nname = \"x\"\n{} = 9223372036854775807\n", key)) ==
          fmt::format("job.toml:3:{}: job.{}: {}", std::string_view(key).size() + 4, key, message));
  }
  const JobSpec largest = parse("[job]\nname = \"x\"\nnodes = 100000\nranks_per_node = 4096\n");
  CHECK(largest.world_size() == 409600000);
}

TEST_CASE("a time limit of any length of digits is read without overflow and bounded to 365 days") {
  CHECK(error_of("[job]\nname = \"x\"\ntime = \"99999999999999999999\"\n") ==
        "job.toml:3:8: job.time: must be at most 365 days (got \"99999999999999999999\")");
  CHECK(error_of("[job]\nname = \"x\"\ntime = \"1-99999999999999999999:0\"\n") ==
        "job.toml:3:8: job.time: must be at most 365 days (got \"1-99999999999999999999:0\")");
  CHECK(error_of("[job]\nname = \"x\"\ntime = \"365-0:0:1\"\n") ==
        "job.toml:3:8: job.time: must be at most 365 days (got \"365-0:0:1\")");
  CHECK(parse("[job]\nname = \"x\"\ntime = \"365-0\"\n").time == "365-0");
  CHECK(parse("[job]\nname = \"x\"\ntime = 525600\n").time == "525600");
  const std::string time_rule =
      "must be a SLURM time \"M\", \"M:S\", \"H:M:S\", \"D-H\", \"D-H:M\" or \"D-H:M:S\" (digits only), "
      "or an integer number of minutes";
  for (const char* time : {"-1", "1-", "1:", ":1", "1--1", "1::1", "1-1-1", "+1", " 1"}) {
    CAPTURE(time);
    CHECK(error_of(fmt::format("[job]\nname = \"x\"\ntime = \"{}\"\n", time)) ==
          fmt::format("job.toml:3:8: job.time: {} (got \"{}\")", time_rule, time));
  }
}

TEST_CASE("a NUL or a control character in a [job] string is refused, and shown escaped") {
  CHECK(error_of("[job]\nname = \"x\"\npartition = \"gpu\\u0000x\"\n") ==
        "job.toml:3:13: job.partition: must not contain a NUL character");
  CHECK(error_of("[job]\nname = \"x\\u0007\"\n") ==
        "job.toml:2:8: job.name: may contain only letters, digits, '.', '_' and '-' (got \"x\\x07\")");
  CHECK(error_of("[job]\nname = \"x\"\n[job.env]\n\"A\\u0000B\" = \"v\"\n") ==
        "job.toml:4:14: job.env.A\\x00B: must be a shell variable name: a letter or '_', then letters, digits or '_'");
}
