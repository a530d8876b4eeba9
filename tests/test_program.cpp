// Tests for a user's own program under trainctl (program/): the [program] and [params] schema
// with the exact "FILE:LINE:COL: key: message" of every kind of bad input, placeholders filled
// in per run directory, sweeps over params.*, the rank environment from SLURM's task
// variables, and run_program_rank for real: a program given hostile arguments receives them
// byte for byte and no shell runs them; how each program ended (or trainctl-launch itself
// failed) is recorded for the batch script, and params.json is written with the run directory.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bad_input.h"
#include "child_process.h"
#include "command_runner.h"
#include "config_file.h"
#include "config_files.h"
#include "program_rank.h"
#include "program_spec.h"
#include "rank_environment.h"
#include "sweeps/sweep.h"

using namespace config_files;
using trainctl::BadInput;
using trainctl::ProgramSpec;
using trainctl::RankPlace;
using trainctl::RunLayout;

namespace {

namespace fs = std::filesystem;

// The smallest program config. Line numbers matter: errors point into it.
//   1 [job]    4 [program]    5 command    7 [params]    8 lr    9 layers
constexpr std::string_view kProgramConfig = R"([job]
name = "own"

[program]
command = ["python3", "train.py", "--lr={params.lr}", "--out", "{run_dir}"]

[params]
lr = 3e-4
layers = 4
)";

// kProgramConfig with its command line (line 5) replaced by `command_line`.
std::string with_command(std::string_view command_line) {
  std::string text(kProgramConfig);
  const size_t start = text.find("command = ");
  text.replace(start, text.find('\n', start) - start, command_line);
  return text;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A run directory for `config_text`, as submit makes it.
struct ProgramRun {
  TempDir dir;
  trainctl::RunDir layout{(dir.path() / "run").string()};

  explicit ProgramRun(std::string_view config_text) {
    const std::string config_path = write_temp_config(config_text);
    layout.prepare(trainctl::run_files(trainctl::load_config(config_path).table, config_path), /*resume=*/false);
  }
};

// run_program_rank in a child process, as trainctl-launch runs it; returns its exit code.
int run_rank(const RunLayout& run, const RankPlace& place) {
  const trainctl::ProcessEnd end = trainctl::start_function({}, [&] {
                                     try {
                                       return trainctl::run_program_rank(run, place);
                                     } catch (...) {
                                       return 99;
                                     }
                                   }).wait();
  REQUIRE(end.how == trainctl::ProcessEnd::How::kExited);
  return end.number;
}

// How rank `rank`'s program ended, as rank.exits/<rank> records it, without the time, which is
// checked to be a plausible one.
std::string rank_end(const RunLayout& run, int64_t rank) {
  const std::string text = read_text(run.rank_exits() + "/" + std::to_string(rank));
  const size_t time_at = text.rfind(' ');
  REQUIRE(time_at != std::string::npos);
  const int64_t nanoseconds = std::stoll(text.substr(time_at + 1));
  CHECK(nanoseconds > int64_t{1'700'000'000} * 1'000'000'000);  // after 2023
  CHECK(text.back() == '\n');
  return text.substr(0, time_at);
}

// A TOML basic string holding `text` exactly.
std::string toml_string(const std::string& text) {
  std::string quoted = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\')
      quoted += fmt::format("\\{}", static_cast<char>(c));
    else if (c < 0x20 || c == 0x7f)
      quoted += fmt::format("\\u{:04x}", c);
    else
      quoted += static_cast<char>(c);
  }
  return quoted + "\"";
}

}  // namespace

TEST_CASE("a [program] config loads: its command as written, params free-form, no training tables") {
  const trainctl::Config config = load_text(kProgramConfig);
  REQUIRE(config.program);
  CHECK_FALSE(config.run);
  CHECK(config.program->command ==
        std::vector<std::string>{"python3", "train.py", "--lr={params.lr}", "--out", "{run_dir}"});
  CHECK(config.program->workdir.empty());
  CHECK(config.program->params.size() == 2);
  // The hang watchdog reads a heartbeat the runtime writes and a program need not.
  CHECK(config.job.hang_timeout == 0);
}

TEST_CASE("placeholders are filled in for the run directory: numbers as they read back, braces doubled") {
  const ProgramSpec program = trainctl::parse_program_spec(
      trainctl::parse_config_text(R"([program]
command = ["x", "{params.lr}", "{params.layers}", "{params.on}", "{params.name}", "{run_dir}", "{checkpoint_dir}",
           "--json={{\"a\": {params.layers}}}", "{{run_dir}}"]
[params]
lr = 3e-4
layers = 4
on = true
name = "two words"
)",
                                  "FILE"),
      "FILE");
  CHECK(trainctl::program_argv(program, RunLayout("/scratch/runs/a")) ==
        std::vector<std::string>{"x", "0.0003", "4", "true", "two words", "/scratch/runs/a", "/scratch/runs/a/checkpoints",
                                 "--json={\"a\": 4}", "{run_dir}"});
  CHECK(trainctl::params_json_text(program) == R"({"layers":4,"lr":0.0003,"name":"two words","on":true})" "\n");
}

TEST_CASE("bad [program] input: exact messages naming file, line and key") {
  CHECK(load_error(with_command(R"(command = ["python3", "--lr={params.lrr}"])")) ==
        "FILE:5:23: program.command: element 1 (\"--lr={params.lrr}\"): unknown placeholder {params.lrr} (did you "
        "mean {params.lr}?); the placeholders are {run_dir}, {checkpoint_dir}, {params.NAME} for a key NAME of "
        "[params] and, in a sweep with [sweep.schedule], {budget.steps}; write {{ and }} for literal braces");
  CHECK(load_error(with_command(R"(command = ["python3", "{rundir}"])")) ==
        "FILE:5:23: program.command: element 1 (\"{rundir}\"): unknown placeholder {rundir} (did you mean {run_dir}?); "
        "the placeholders are {run_dir}, {checkpoint_dir}, {params.NAME} for a key NAME of [params] and, in a sweep "
        "with [sweep.schedule], {budget.steps}; write {{ and }} for literal braces");
  CHECK(load_error(with_command(R"(command = ["python3", "--x={oops"])")) ==
        "FILE:5:23: program.command: element 1 (\"--x={oops\"): \"{\" opens a placeholder that is never closed; write "
        "{{ for a literal brace");
  CHECK(load_error(with_command(R"(command = ["a}b"])")) ==
        "FILE:5:12: program.command: element 0 (\"a}b\"): \"}\" closes no placeholder; write }} for a literal brace");
  CHECK(load_error(with_command(R"(command = ["run", "{params.layers_list}"])") + "layers_list = [1, 2]\n") ==
        "FILE:5:19: program.command: element 1 (\"{params.layers_list}\"): {params.layers_list} is an array; only a "
        "string, a number or a boolean can be an argument");
  CHECK(load_error(with_command("command = []")) ==
        "FILE:5:11: program.command: is empty; give the program and its arguments, such as [\"python3\", \"train.py\"]");
  CHECK(load_error(with_command(R"(command = ["python3", 3])")) ==
        "FILE:5:23: program.command: expected an array of strings, but element 1 is an integer");
  CHECK(load_error(with_command(R"(command = "python3 train.py")")) ==
        "FILE:5:11: program.command: expected an array of strings, got a string");
  CHECK(load_error(with_command(R"(command = ["python3", "a\u0000b"])")) ==
        "FILE:5:11: program.command: element 1 contains a NUL character");
  CHECK(load_error(with_command(R"(comand = ["python3"])")) ==
        "FILE:4:1: program.command: required key is missing");
  CHECK(load_error(with_command(R"(command = ["python3"]
workdir = "")")) == "FILE:6:11: program.workdir: is empty; leave it out to run in the config file's directory");
  CHECK(load_error(with_command(R"(command = ["python3"]
cmd = 1)")) == "FILE:6:7: program.cmd: unknown key");
  CHECK(load_error(std::string(kProgramConfig) + "\n[model]\ninputs = 4\n") ==
        "FILE:11:1: model: [program] (line 4) runs your own command instead of trainctl's runtime, which [model] "
        "configures; keep one of them");
  CHECK(load_error(std::string(kMinimalConfig) + "\n[params]\nlr = 1\n") ==
        "FILE:15:1: params: holds the values of a [program]'s placeholders, and this config has no [program]");
  CHECK(load_error("params = 3\n[job]\nname = \"own\"\n[program]\ncommand = [\"x\"]\n") ==
        "FILE:1:10: params: expected a table of values");
}

TEST_CASE("a sweep varies params.* (and [program] keys), each task's placeholders checked") {
  const std::string sweep_text = std::string(kProgramConfig) + R"(
[sweep]
"params.lr" = [1e-4, 3e-4]
"program.workdir" = ["a", "b"]
)";
  const trainctl::Config config = load_text(sweep_text);
  REQUIRE(config.sweep);
  const std::vector<trainctl::SweepTask> tasks = trainctl::expand_sweep(*config.sweep);
  REQUIRE(tasks.size() == 4);
  const toml::table task = trainctl::task_config(config.table, config.sweep->paths(), tasks[1].values);
  const ProgramSpec program = trainctl::parse_program_spec(task, "FILE");
  CHECK(trainctl::program_argv(program, RunLayout("/r"))[2] == "--lr=0.0001");
  CHECK(program.workdir == "b");

  CHECK(load_error(std::string(kProgramConfig) + "\n[sweep]\n\"params.lr\" = [0.1, [2]]\n") ==
        "FILE:12:21: sweep.params.lr: program.command: element 2 (\"--lr={params.lr}\"): {params.lr} is an array; only "
        "a string, a number or a boolean can be an argument");
}

TEST_CASE("the rank's place comes from SLURM's task variables") {
  std::map<std::string, std::string> env{{"SLURM_PROCID", "3"},        {"SLURM_NTASKS", "4"},
                                         {"SLURM_LOCALID", "1"},       {"SLURM_NODEID", "1"},
                                         {"SLURM_STEP_TASKS_PER_NODE", "2(x2)"},
                                         {"SLURM_JOB_ID", "123456"},   {"TRAINCTL_MASTER_ADDR", "10.1.2.7"}};
  const auto lookup = [&](const char* name) -> const char* {
    auto found = env.find(name);
    return found == env.end() ? nullptr : found->second.c_str();
  };
  RankPlace place = trainctl::rank_place_under_slurm(lookup);
  CHECK(place.rank == 3);
  CHECK(place.world_size == 4);
  CHECK(place.local_rank == 1);
  CHECK(place.local_world_size == 2);
  CHECK(place.master_addr == "10.1.2.7");
  CHECK(place.master_port == 10000 + 123456 % 20000);
  CHECK(place.restart == 0);
  env["SLURM_RESTART_COUNT"] = "2";
  CHECK(trainctl::rank_place_under_slurm(lookup).restart == 2);

  env.erase("TRAINCTL_MASTER_ADDR");
  CHECK_THROWS_WITH_AS(trainctl::rank_place_under_slurm(lookup),
                       "TRAINCTL_MASTER_ADDR is not set: trainctl-launch runs as a task of srun, started by the batch "
                       "script",
                       BadInput);
  env["TRAINCTL_MASTER_ADDR"] = "h";
  env["SLURM_PROCID"] = "-1";
  CHECK_THROWS_WITH_AS(trainctl::rank_place_under_slurm(lookup), "SLURM_PROCID=\"-1\" is not a count", BadInput);

  CHECK(trainctl::tasks_on_node("4", 0) == 4);
  CHECK(trainctl::tasks_on_node("2(x3),1", 2) == 2);
  CHECK(trainctl::tasks_on_node("2(x3),1", 3) == 1);
  CHECK_THROWS_WITH_AS(trainctl::tasks_on_node("2(x3),1", 4), "node 4 is beyond SLURM's tasks per node \"2(x3),1\"",
                       BadInput);
  CHECK_THROWS_WITH_AS(trainctl::tasks_on_node("2(x3", 0),
                       "SLURM's tasks per node \"2(x3\" is not a list such as 2(x3),1", BadInput);
  // Ports of concurrent jobs differ, and stay below Linux's ephemeral range.
  CHECK(trainctl::master_port_of_job(184) == 10184);
  CHECK(trainctl::master_port_of_job(184) != trainctl::master_port_of_job(185));
  CHECK(trainctl::master_port_of_job(19999) == 29999);
}

TEST_CASE("the program gets the contract's environment") {
  RankPlace place{1, 4, 1, 2, "10.1.2.7", 12345, 2};
  const auto env = trainctl::rank_environment(place, RunLayout("/r"));
  CHECK(env == std::vector<std::pair<std::string, std::string>>{
                   {"RANK", "1"},
                   {"WORLD_SIZE", "4"},
                   {"LOCAL_RANK", "1"},
                   {"LOCAL_WORLD_SIZE", "2"},
                   {"MASTER_ADDR", "10.1.2.7"},
                   {"MASTER_PORT", "12345"},
                   {"TRAINCTL_RUN_DIR", "/r"},
                   {"TRAINCTL_CHECKPOINT_DIR", "/r/checkpoints"},
                   {"TRAINCTL_RESTART", "2"},
                   {"TRAINCTL_PARAMS", "/r/params.json"},
                   {"TRAINCTL_EXIT_REQUEUE", "75"},
               });
}

TEST_CASE("hostile arguments reach the program byte for byte, and nothing runs them") {
  TempDir scratch;
  const std::string marker = (scratch.path() / "pwned").string();
  const std::vector<std::string> hostile{
      "$(touch " + marker + ")", "`touch " + marker + "`", "'; touch " + marker + "; '", "\"; touch " + marker + "; \"",
      "a\nb; touch " + marker,   "tab\there",           "back\\slash",               "*",
      "~",                       "$HOME",               "--x=y z",                   "",
      "ünïcødé ✓",               "\x1b[31mred",         "#not a comment",           "a\rb",
  };
  // The program writes its arguments NUL-separated: the one byte no argument can hold.
  const std::string out = (scratch.path() / "argv.bin").string();
  std::string command = R"toml(command = ["python3", "-c", "import sys; open(sys.argv[1], 'wb').write(b'\\0'.join(a.encode('utf-8', 'surrogateescape') for a in sys.argv[2:]))", )toml" +
                        toml_string(out);
  for (const std::string& argument : hostile) command += ", " + toml_string(argument);
  ProgramRun run(with_command(command + "]"));
  RankPlace place{0, 1, 0, 1, "127.0.0.1", 1, 0};
  CHECK(run_rank(run.layout, place) == 0);
  std::string expected;
  for (size_t i = 0; i < hostile.size(); ++i) expected += (i ? std::string(1, '\0') : "") + hostile[i];
  CHECK(read_text(out) == expected);
  CHECK_FALSE(fs::exists(marker));
}

TEST_CASE("each rank records how its program ended; rank 0's exit 0 records completion") {
  ProgramRun completes(with_command(R"(command = ["sh", "-c", "echo 7 > \"$TRAINCTL_RUN_DIR/progress.step\"; test \"$RANK\" = 1 || test -f \"$TRAINCTL_PARAMS\""])"));
  CHECK(run_rank(completes.layout, RankPlace{1, 2, 1, 2, "127.0.0.1", 1, 0}) == 0);
  CHECK_FALSE(fs::exists(completes.layout.completed()));
  CHECK(run_rank(completes.layout, RankPlace{0, 2, 0, 2, "127.0.0.1", 1, 0}) == 0);
  CHECK(read_text(completes.layout.completed()) == "7\n");
  CHECK(rank_end(completes.layout, 1) == "exit 0");
  CHECK(rank_end(completes.layout, 0) == "exit 0");
  CHECK(read_text(completes.layout.params()) == "{\"layers\":4,\"lr\":0.0003}\n");

  ProgramRun fails(with_command(R"(command = ["sh", "-c", "exit 3"])"));
  CHECK(run_rank(fails.layout, RankPlace{}) == 3);
  ProgramRun killed(with_command(R"(command = ["sh", "-c", "kill -KILL $$"])"));
  CHECK(run_rank(killed.layout, RankPlace{}) == 137);
  ProgramRun missing(with_command(R"(command = ["no-such-program-here"])"));
  CHECK(run_rank(missing.layout, RankPlace{}) == 127);
  CHECK(rank_end(fails.layout, 0) == "exit 3");
  CHECK(rank_end(killed.layout, 0) == "signal 9");
  CHECK(rank_end(missing.layout, 0) == "exit 127");
  CHECK_FALSE(fs::exists(fails.layout.completed()));
}

TEST_CASE("trainctl-launch records its own failure as its rank's end, so that it is the first") {
  const char* launcher = std::getenv("TRAINCTL_LAUNCH");
  REQUIRE_MESSAGE(launcher != nullptr, "meson passes TRAINCTL_LAUNCH");
  TempDir dir;
  const trainctl::RunDir run((dir.path() / "run").string());
  run.prepare({"[job]\nname = \"x\"\n"}, /*resume=*/false);  // no [program]: it cannot run
  const std::vector<std::string> slurm_task{"SLURM_PROCID=1",      "SLURM_NTASKS=2", "SLURM_LOCALID=1",
                                            "SLURM_NODEID=0",      "SLURM_STEP_TASKS_PER_NODE=2",
                                            "SLURM_JOB_ID=5",      "TRAINCTL_MASTER_ADDR=10.0.0.1"};
  std::vector<std::string> argv{"env", "-i"};
  argv.insert(argv.end(), slurm_task.begin(), slurm_task.end());
  argv.insert(argv.end(), {launcher, "--run-dir", run.path()});
  trainctl::ProcessRunner runner;
  const trainctl::CommandResult result = runner.run(argv);
  CHECK(result.exit_code == 2);
  CHECK(result.err == "trainctl-launch: rank 1: bad config: " + run.config() +
                          ":1:1: program.command: required table [program] is missing\n");
  CHECK(rank_end(run, 1) == "exit 2");

  // Not a task of srun: nothing to record it under.
  const trainctl::CommandResult outside = runner.run({"env", "-i", launcher, "--run-dir", run.path()});
  CHECK(outside.exit_code == 2);
  CHECK(outside.err ==
        "trainctl-launch: SLURM_PROCID is not set: trainctl-launch runs as a task of srun, started by the batch script\n");
}
