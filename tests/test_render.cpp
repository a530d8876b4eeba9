// Tests for batch-script rendering (slurm/render.cpp): the #SBATCH header, shell quoting proven
// by running the script with bash against stub srun/scontrol commands and a fake runtime, the
// requeue guard's decisions, the failure taxonomy (a rank killed by a signal requeues, exit 1 or
// 2 does not) and its record in job.outcome, the run directory's file names taken from
// common/run_layout.h, `bash -n` on rendered scripts, a sweep's job-array script: its header,
// and each array task finding its own run directory, recording itself there and requeuing only
// itself; with [notify], `trainctl notify` run once per event on every path that ends a run of
// the script, passed nothing but the run directory, the event and the job; and a scheduled
// sweep's task training rung by rung as `trainctl sweep rung` answers.
#include <doctest/doctest.h>

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "command_runner.h"
#include "render.h"
#include "run_layout.h"

using trainctl::ArrayTasks;
using trainctl::CommandResult;
using trainctl::JobSpec;
using trainctl::RenderInputs;

namespace {

namespace fs = std::filesystem;

const RenderInputs kInputs{"/scratch/runs/mlp-7", {"/opt/trainctl/bin/trainctl-runtime"}};

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream stream(text);
  for (std::string line; std::getline(stream, line);) lines.push_back(line);
  return lines;
}

std::vector<std::string> sbatch_lines(const std::string& script) {
  std::vector<std::string> sbatch;
  for (const std::string& line : lines_of(script))
    if (line.starts_with("#SBATCH")) sbatch.push_back(line);
  return sbatch;
}

size_t line_index(const std::vector<std::string>& lines, const std::string& wanted) {
  for (size_t index = 0; index < lines.size(); ++index)
    if (lines[index] == wanted) return index;
  FAIL("line not found: " << wanted);
  return 0;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_text(const fs::path& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

void write_executable(const fs::path& path, const std::string& text) {
  write_text(path, text);
  fs::permissions(path, fs::perms::owner_all);
}

// A scratch directory in which a rendered script runs for real under bash: srun is a stub that
// records its arguments, drops its own options and runs the rest; scontrol records its
// arguments, expands a comma-separated host list (a range to nodes n7 and n8) and answers
// for node n7 (NodeAddr 10.1.2.7); squeue lists the ranks' step as
// SLURM would, and scancel records its arguments and
// kills the "runtime" (unless FAKE_SCANCEL_RC fails it), or on --signal=QUIT writes the hang
// reports FAKE_HANG_REPORTS (lines "RANK FIRST-LINE"); sinfo lists the partition's nodes
// (FAKE_PARTITION_NODES, default n7 n8 n9) or, asked for down nodes, FAKE_DOWN_NODES. The runtime dumps the variables named in
// FAKE_DUMP to <run>/env.<NAME>, writes FAKE_STEP to progress.step, beats FAKE_BEATS times
// half a second apart, writes FAKE_BEAT to heartbeat.step and sleeps when FAKE_HANG is set,
// writes FAKE_EXITS (printf format, lines "RANK END") to rank.exits/RANK as trainctl-launch's
// ranks would, FAKE_NODES (lines "RANK NODE") to rank.nodes/RANK, appends FAKE_BAD_NODES to
// bad.nodes as a failed node check would and FAKE_SRUN_ERROR to the job's log as srun would; kills
// itself with FAKE_SIGNAL when set (srun then
// exits 128 + the signal, as bash does), writes completed.step when it exits 0 (unless
// FAKE_INCOMPLETE is set), and exits with FAKE_RC. After notify(), the scripts tell of events
// through a fake trainctl that records its arguments in notify.calls, noting a call made after
// scontrol's first, says a line and exits with FAKE_NOTIFY_RC. A scheduled sweep's scripts ask a
// fake `trainctl sweep rung` that records its arguments in rung.calls and gives the Nth call the
// Nth of FAKE_RUNG_ANSWERS (';'-separated; none: it fails), writing job.outcome for a stop as
// trainctl does.
class Sandbox {
 public:
  Sandbox() {
    std::string pattern = (fs::temp_directory_path() / "trainctl-render-XXXXXX").string();
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    root_ = pattern;
    fs::create_directories(root_ / "bin");
    fs::create_directories(run_dir());
    write_executable(root_ / "bin" / "srun",
                     "#!/bin/sh\n"
                     "printf '%s\\n' \"$@\" > '" + path("srun.args") + "'\n"
                     "while [ $# -gt 0 ]; do case $1 in --*) shift ;; *) break ;; esac; done\n"
                     "exec \"$@\"\n");
    write_executable(root_ / "bin" / "scontrol",
                     "#!/bin/sh\necho \"$*\" >> '" + path("scontrol.calls") + "'\n"
                     "case \"$1 $2\" in\n"
                     "  'show hostnames') case \"$3\" in *[[]*) echo n7; echo n8 ;; *) echo \"$3\" | tr , '\\n' ;; esac ;;\n"
                     "  'show node') echo 'NodeName=n7 Arch=x86_64 NodeAddr=10.1.2.7 NodeHostName=n7 Version=22.05' ;;\n"
                     "esac\n"
                     "exit \"${FAKE_SCONTROL_RC:-0}\"\n");
    write_executable(root_ / "bin" / "squeue", "#!/bin/sh\necho \"$SLURM_JOB_ID.batch batch\"\necho \"$SLURM_JOB_ID.0 trainctl-ranks\"\n");
    write_executable(root_ / "bin" / "scancel",
                     "#!/bin/sh\necho \"$*\" >> '" + path("scancel.calls") + "'\n"
                     "[ \"${FAKE_SCANCEL_RC:-0}\" = 0 ] || exit \"$FAKE_SCANCEL_RC\"\n"
                     "if [ \"$1\" = --signal=QUIT ]; then\n"
                     "  mkdir -p '" + path("run/hang") + "'\n"
                     "  printf \"${FAKE_HANG_REPORTS:-}\" | while read -r rank report; do\n"
                     "    printf '%s\\nstack:\\n' \"$report\" > '" + path("run/hang") + "'/\"$rank\"; done\n"
                     "  exit 0\n"
                     "fi\n"
                     "kill -KILL \"$(cat '" + path("run/runtime.pid") + "')\"\n");
    write_executable(root_ / "bin" / "sinfo",
                     "#!/bin/sh\necho \"$*\" >> '" + path("sinfo.calls") + "'\n"
                     "case \"$*\" in\n"
                     "  *' -t '*) printf \"${FAKE_DOWN_NODES:-}\" ;;\n"
                     "  *) printf \"${FAKE_PARTITION_NODES:-n7\\nn8\\nn9\\n}\" ;;\n"
                     "esac\n");
    write_executable(root_ / "runtime",
                     "#!/bin/bash\n"
                     "[ \"$1\" = --run-dir ] || exit 99\n"
                     "for name in ${FAKE_DUMP:-}; do printf '%s' \"${!name}\" > \"$2/env.$name\"; done\n"
                     "if [ -n \"${FAKE_STEP:-}\" ]; then echo \"$FAKE_STEP\" > \"$2/progress.step\"; fi\n"
                     "if [ -n \"${FAKE_EXITS:-}\" ]; then mkdir -p \"$2/rank.exits\"; printf \"$FAKE_EXITS\" |\n"
                     "  while read -r rank end; do echo \"$end\" > \"$2/rank.exits/$rank\"; done; fi\n"
                     "echo $$ > \"$2/runtime.pid\"\n"
                     "if [ -n \"${FAKE_NODES:-}\" ]; then mkdir -p \"$2/rank.nodes\"; printf \"$FAKE_NODES\" |\n"
                     "  while read -r rank node; do echo \"$node\" > \"$2/rank.nodes/$rank\"; done; fi\n"
                     "if [ -n \"${FAKE_BAD_NODES:-}\" ]; then printf \"$FAKE_BAD_NODES\" >> \"$2/bad.nodes\"; fi\n"
                     "if [ -n \"${FAKE_SRUN_ERROR:-}\" ]; then mkdir -p \"$2/logs\";\n"
                     "  echo \"$FAKE_SRUN_ERROR\" >> \"$2/logs/slurm-$SLURM_JOB_ID.out\"; fi\n"
                     "for beat in $(seq \"${FAKE_BEATS:-0}\"); do echo \"$beat\" > \"$2/heartbeat.step\"; sleep 0.5; done\n"
                     "if [ -n \"${FAKE_HANG:-}\" ]; then echo \"${FAKE_BEAT:-0}\" > \"$2/heartbeat.step\"; exec sleep 600; fi\n"
                     "if [ -n \"${FAKE_SIGNAL:-}\" ]; then kill -s \"$FAKE_SIGNAL\" $$; fi\n"
                     "if [ \"${FAKE_RC:-0}\" = 0 ] && [ -z \"${FAKE_INCOMPLETE:-}\" ]; then echo 40 > \"$2/completed.step\"; fi\n"
                     "exit \"${FAKE_RC:-0}\"\n");
    write_executable(root_ / "scheduler",
                     "#!/bin/sh\n"
                     "echo \"$*\" >> '" + path("rung.calls") + "'\n"
                     "answer=$(printf '%s' \"$FAKE_RUNG_ANSWERS\" | awk -F ';' -v n=\"$(wc -l < '" + path("rung.calls") + "')\" '{ print $n }')\n"
                     "[ -n \"$answer\" ] || exit 1\n"
                     "case $answer in stop*) echo \"stopped at rung ${answer#stop } (fake)\" > \"$TRAINCTL_RUN_DIR/job.outcome\" ;; esac\n"
                     "echo \"$answer\"\n");
    write_executable(root_ / "notifier",
                     "#!/bin/sh\n"
                     "if [ -e '" + path("scontrol.calls") + "' ]; then after=' (after scontrol)'; else after=''; fi\n"
                     "echo \"$*$after\" >> '" + path("notify.calls") + "'\n"
                     "echo \"fake trainctl notify $4\"\n"
                     "exit \"${FAKE_NOTIFY_RC:-0}\"\n");
  }
  ~Sandbox() { fs::remove_all(root_); }
  Sandbox(const Sandbox&) = delete;
  Sandbox& operator=(const Sandbox&) = delete;

  std::string path(const std::string& name) const { return (root_ / name).string(); }
  std::string run_dir() const { return path("run"); }
  std::string run_file(const std::string& name) const { return read_text(root_ / "run" / name); }
  void set_run_file(const std::string& name, const std::string& text) const { write_text(root_ / "run" / name, text); }
  RenderInputs inputs() const { return {run_dir(), {path("runtime")}, std::nullopt, {}, notifier_}; }
  // The scripts rendered from now on tell of events, as those of a config with [notify].
  void notify() { notifier_ = path("notifier"); }
  // A job array's sweep directory, and the run directory of its task `task`.
  std::string sweep_dir() const { return path("sweep"); }
  std::string task_dir(int64_t task) const { return sweep_dir() + "/tasks/" + std::to_string(task); }

  // Renders `job` and runs the script with only `env` (plus PATH and SLURM_JOB_ID=123 unless given).
  CommandResult run(const JobSpec& job, const std::vector<std::string>& env = {}) const {
    return run_script(trainctl::render_batch_script(job, inputs()), env);
  }
  // The same for a [program] job, whose ranks trainctl-launch runs (here the fake runtime).
  CommandResult run_program(const JobSpec& job, const std::vector<std::string>& env) const {
    RenderInputs program_inputs = inputs();
    program_inputs.rank.user_program = true;
    return run_script(trainctl::render_batch_script(job, program_inputs), env);
  }
  // The same for `job` as an array over `array` in sweep_dir(), whose tasks' run directories it
  // creates first.
  CommandResult run_array(const JobSpec& job, const ArrayTasks& array, const std::vector<std::string>& env) const {
    for (int64_t task : array.tasks) fs::create_directories(task_dir(task) + "/logs");
    RenderInputs array_inputs = inputs();
    array_inputs.run_dir = sweep_dir();
    array_inputs.array = array;
    return run_script(trainctl::render_batch_script(job, array_inputs), env);
  }

 private:
  CommandResult run_script(const std::string& script, const std::vector<std::string>& env) const {
    std::string script_path = path("job.sbatch");
    write_text(script_path, script);
    std::vector<std::string> argv = {"env", "-i", "PATH=" + path("bin") + ":/usr/bin:/bin", "SLURM_JOB_ID=123"};
    argv.insert(argv.end(), env.begin(), env.end());
    argv.insert(argv.end(), {"bash", script_path});
    return trainctl::ProcessRunner().run(argv);
  }

  fs::path root_;
  std::optional<std::string> notifier_;
};

JobSpec named_job() {
  JobSpec job;
  job.name = "mlp";
  return job;
}

// A job without the hang watchdog, whose script does not poll the heartbeat: quicker to run.
JobSpec unwatched_job() {
  JobSpec job = named_job();
  job.hang_timeout = 0;
  return job;
}

// A job whose hang watchdog fires after 2 s without a new heartbeat.
JobSpec watched_job() {
  JobSpec job = named_job();
  job.hang_timeout = 2;
  return job;
}

}  // namespace

TEST_CASE("shell_quote makes one literal word") {
  CHECK(trainctl::shell_quote("plain") == "'plain'");
  CHECK(trainctl::shell_quote("") == "''");
  CHECK(trainctl::shell_quote("it's") == R"('it'\''s')");
  CHECK(trainctl::shell_quote("''") == R"(''\'''\''')");
}

TEST_CASE("the header asks SLURM for every resource, in order") {
  JobSpec job;
  job.name = "mlp-7";
  job.partition = "gpu";
  job.account = "proj_42";
  job.qos = "high";
  job.nodes = 2;
  job.ranks_per_node = 4;
  job.cpus_per_rank = 8;
  job.gpus_per_node = 4;
  job.mem = "64G";
  job.time = "1-12:00:00";
  job.signal = "USR1";
  job.signal_grace = 90;
  job.constraint = "a100&(ib|roce)";
  job.exclude = "n[1-3]";
  std::string script = trainctl::render_batch_script(job, kInputs);
  std::vector<std::string> lines = lines_of(script);
  REQUIRE(lines.size() > 2);
  CHECK(lines[0] == "#!/bin/bash");
  CHECK(lines[1] == std::string("# generated by trainctl ") + TRAINCTL_VERSION);
  CHECK(sbatch_lines(script) == std::vector<std::string>{
                                    "#SBATCH --job-name=mlp-7",
                                    "#SBATCH --partition=gpu",
                                    "#SBATCH --account=proj_42",
                                    "#SBATCH --qos=high",
                                    "#SBATCH --nodes=2",
                                    "#SBATCH --ntasks-per-node=4",
                                    "#SBATCH --cpus-per-task=8",
                                    "#SBATCH --gpus-per-node=4",
                                    "#SBATCH --mem=64G",
                                    "#SBATCH --time=1-12:00:00",
                                    "#SBATCH --constraint=a100&(ib|roce)",
                                    "#SBATCH --exclude=n[1-3]",
                                    "#SBATCH --signal=USR1@90",
                                    "#SBATCH --requeue",
                                    "#SBATCH --open-mode=append",
                                    "#SBATCH --output=/scratch/runs/mlp-7/logs/slurm-%j.out",
                                });
  // sbatch stops reading #SBATCH lines at the first command, so they must all come first.
  CHECK(line_index(lines, "#SBATCH --output=/scratch/runs/mlp-7/logs/slurm-%j.out") <
        line_index(lines, "set -uo pipefail"));
}

TEST_CASE("optional resources are left out when unset") {
  CHECK(sbatch_lines(trainctl::render_batch_script(named_job(), kInputs)) ==
        std::vector<std::string>{
            "#SBATCH --job-name=mlp",
            "#SBATCH --nodes=1",
            "#SBATCH --ntasks-per-node=1",
            "#SBATCH --cpus-per-task=1",
            "#SBATCH --signal=TERM@120",
            "#SBATCH --requeue",
            "#SBATCH --open-mode=append",
            "#SBATCH --output=/scratch/runs/mlp-7/logs/slurm-%j.out",
        });
}

TEST_CASE("the body exports, runs setup, then srun's the runtime") {
  JobSpec job = named_job();
  job.cpus_per_rank = 6;
  job.env = {{"ZED", "last"}, {"ALPHA", "first"}};
  job.setup = {"module load cuda", "ulimit -n 4096"};
  std::vector<std::string> lines = lines_of(trainctl::render_batch_script(job, kInputs));
  size_t set_options = line_index(lines, "set -uo pipefail");
  size_t run_dir = line_index(lines, "export TRAINCTL_RUN_DIR='/scratch/runs/mlp-7'");
  size_t omp = line_index(lines, "export OMP_NUM_THREADS=6");
  size_t openblas = line_index(lines, "export OPENBLAS_NUM_THREADS=6");
  size_t alpha = line_index(lines, "export ALPHA='first'");
  size_t zed = line_index(lines, "export ZED='last'");
  size_t setup = line_index(lines, "# [job] setup, as written by the user");
  size_t first_setup_line = line_index(lines, "module load cuda");
  size_t second_setup_line = line_index(lines, "ulimit -n 4096");
  size_t runtime = line_index(lines, "rank_executable='/opt/trainctl/bin/trainctl-runtime'");
  size_t srun = line_index(
      lines, R"(  srun --mpi=pmix --kill-on-bad-exit=1 --job-name=trainctl-ranks "$rank_executable" --run-dir "$run_dir" &)");
  CHECK(set_options < run_dir);
  CHECK(run_dir < omp);
  CHECK(omp < openblas);
  CHECK(openblas < alpha);
  CHECK(alpha < zed);
  CHECK(zed < setup);
  CHECK(setup + 1 == first_setup_line);
  CHECK(first_setup_line + 1 == second_setup_line);
  size_t max_requeues = line_index(lines, "max_requeues=10");
  size_t hang_timeout = line_index(lines, "hang_timeout=1800");
  CHECK(second_setup_line < runtime);
  CHECK(runtime < max_requeues);
  CHECK(max_requeues < hang_timeout);
  CHECK(hang_timeout < srun);
  CHECK(omp == line_index(lines, "export TRAINCTL_NODE_CHECK_TIMEOUT=300") + 1);
}

TEST_CASE("the node check is asked of the ranks unless turned off") {
  JobSpec job = named_job();
  job.check_nodes_timeout = 45;
  CHECK(trainctl::render_batch_script(job, kInputs).find("\nexport TRAINCTL_NODE_CHECK_TIMEOUT=45\n") != std::string::npos);
  job.check_nodes = false;
  CHECK(trainctl::render_batch_script(job, kInputs).find("TRAINCTL_NODE_CHECK_TIMEOUT") == std::string::npos);
}

TEST_CASE("a resumed run excludes the nodes blamed before, beside job.exclude; a bad name is refused") {
  JobSpec job = named_job();
  RenderInputs inputs = kInputs;
  inputs.excluded_nodes = {"n4", "gpu-7.rack2"};
  std::vector<std::string> lines = sbatch_lines(trainctl::render_batch_script(job, inputs));
  CHECK(std::find(lines.begin(), lines.end(), "#SBATCH --exclude=n4,gpu-7.rack2") != lines.end());
  job.exclude = "n[1-3]";
  lines = sbatch_lines(trainctl::render_batch_script(job, inputs));
  CHECK(std::find(lines.begin(), lines.end(), "#SBATCH --exclude=n[1-3],n4,gpu-7.rack2") != lines.end());
  inputs.excluded_nodes = {"n1\n#SBATCH --x"};
  CHECK_THROWS_WITH_AS(trainctl::render_batch_script(job, inputs),
                       "bad node \"n1\n#SBATCH --x\" is not a SLURM node name (allowed: letters, digits and ._-)",
                       std::invalid_argument);
}

TEST_CASE("the run section takes every file name from the run layout, once") {
  for (const std::optional<ArrayTasks>& array : {std::optional<ArrayTasks>{}, std::optional<ArrayTasks>{{{3, 7}, 2}}}) {
    CAPTURE(array.has_value());
    const std::string script =
        trainctl::render_batch_script(named_job(), {kInputs.run_dir, kInputs.rank, array});
    const std::vector<std::string> lines = lines_of(script);
    CHECK(line_index(lines, R"(job_id_file="$run_dir/job_id")") <
          line_index(lines, R"(if [ -n "${SLURM_ARRAY_JOB_ID:-}" ]; then)"));
    CHECK(line_index(lines, R"(log_file="$run_dir/logs/slurm-$requeue_target.out")") >
          line_index(lines, R"(requeue_target="${requeue_target:-$SLURM_JOB_ID}")"));
    line_index(lines, R"(requeue_count_file="$run_dir/requeue.count")");
    line_index(lines, R"(progress_file="$run_dir/progress.step")");
    line_index(lines, R"(completed_file="$run_dir/completed.step")");
    line_index(lines, R"(heartbeat_file="$run_dir/heartbeat.step")");
    line_index(lines, R"(stalls_file="$run_dir/requeue.stalls")");
    line_index(lines, R"(outcome_file="$run_dir/job.outcome")");
    namespace run_file = trainctl::run_file;
    for (std::string_view name : {run_file::kJobId, run_file::kRequeueCount, run_file::kProgress, run_file::kCompleted,
                                  run_file::kHeartbeat, run_file::kRequeueStalls, run_file::kOutcome}) {
      CAPTURE(name);
      const std::string path = std::string("/").append(name);
      const size_t first = script.find(path);
      CHECK(first != std::string::npos);
      CHECK(script.find(path, first + 1) == std::string::npos);
    }
  }
}

TEST_CASE("rendered scripts are valid bash") {
  JobSpec job = named_job();
  job.env = {{"QUOTED", "it's $(id) `id` \"x\""}};
  job.setup = {"module load cuda"};
  Sandbox sandbox;
  for (const std::optional<ArrayTasks>& array : {std::optional<ArrayTasks>{}, std::optional<ArrayTasks>{{{3, 7}, 2}}}) {
    for (const std::optional<std::string>& notifier : {std::optional<std::string>{}, std::optional<std::string>{"/opt/trainctl"}}) {
      CAPTURE(array.has_value());
      CAPTURE(notifier.has_value());
      const std::string script_path = sandbox.path("syntax.sbatch");
      write_text(script_path, trainctl::render_batch_script(job, {kInputs.run_dir, kInputs.rank, array, {}, notifier}));
      const CommandResult result = trainctl::ProcessRunner().run({"bash", "-n", script_path});
      INFO("stderr: " << result.err);
      CHECK(result.exit_code == 0);
    }
  }
}

TEST_CASE("paths that cannot appear in an #SBATCH line are refused") {
  JobSpec job = named_job();
  CHECK_THROWS_WITH_AS(trainctl::render_batch_script(job, {"/scratch/my run", kInputs.rank}),
                       "run directory \"/scratch/my run\" contains characters that cannot appear in an #SBATCH line "
                       "(allowed: letters, digits and ._/+,:@=-)",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(trainctl::render_batch_script(job, {"/scratch/100%", kInputs.rank}),
                       "run directory \"/scratch/100%\" contains characters that cannot appear in an #SBATCH line "
                       "(allowed: letters, digits and ._/+,:@=-)",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(trainctl::render_batch_script(job, {"runs/mlp", kInputs.rank}),
                       "run directory \"runs/mlp\" must be an absolute path", std::invalid_argument);
  CHECK_THROWS_WITH_AS(trainctl::render_batch_script(job, {kInputs.run_dir, {"/opt/$(id)/trainctl-runtime"}}),
                       "rank executable \"/opt/$(id)/trainctl-runtime\" contains characters that cannot appear in "
                       "an #SBATCH line (allowed: letters, digits and ._/+,:@=-)",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(trainctl::render_batch_script(job, {kInputs.run_dir, kInputs.rank, std::nullopt, {}, "trainctl"}),
                       "notifier \"trainctl\" must be an absolute path", std::invalid_argument);
}

TEST_CASE("hostile env values reach the runtime byte-exact and run nothing") {
  Sandbox sandbox;
  const std::string marker = sandbox.path("pwned");
  JobSpec job = named_job();
  job.cpus_per_rank = 3;
  job.env = {
      {"COMMAND_SUBSTITUTION", "$(touch " + marker + ")"},
      {"BACKTICKS", "`touch " + marker + "`"},
      {"BREAKOUT", "'; touch " + marker + " #"},
      {"QUOTES", "\"double\" and 'single' and ''"},
      {"NEWLINES", "line one\nline two\n\n"},
      {"BACKSLASHES", "back\\slash\\"},
      {"EXPANSIONS", "${HOME:=x} $PATH !! * ~ $((1+1))"},
      {"EMPTY", ""},
      {"LONE_QUOTE", "'"},
      {"TAB_UNICODE", "tab\there \xc3\xbcnicode"},
  };
  // Setup lines run after the exports, as the user's own shell.
  job.setup = {"export FROM_SETUP=\"$OMP_NUM_THREADS-threads\""};
  std::string dump = "TRAINCTL_RUN_DIR OMP_NUM_THREADS OPENBLAS_NUM_THREADS FROM_SETUP";
  for (const auto& [name, value] : job.env) dump += " " + name;

  CommandResult result = sandbox.run(job, {"FAKE_DUMP=" + dump});
  INFO("stdout: " << result.out << "\nstderr: " << result.err);
  CHECK_FALSE(fs::exists(marker));
  REQUIRE(result.exit_code == 0);
  for (const auto& variable : job.env) {
    CAPTURE(variable.first);
    CHECK(sandbox.run_file("env." + variable.first) == variable.second);
  }
  CHECK(sandbox.run_file("env.TRAINCTL_RUN_DIR") == sandbox.run_dir());
  CHECK(sandbox.run_file("env.OMP_NUM_THREADS") == "3");
  CHECK(sandbox.run_file("env.OPENBLAS_NUM_THREADS") == "3");
  CHECK(sandbox.run_file("env.FROM_SETUP") == "3-threads");
}

TEST_CASE("a completed run is recorded and srun gets the runtime and run directory") {
  Sandbox sandbox;
  CommandResult result = sandbox.run(named_job(), {"FAKE_RC=0"});
  INFO("stdout: " << result.out << "\nstderr: " << result.err);
  CHECK(result.exit_code == 0);
  CHECK(result.out.starts_with("trainctl: job 123 run 0 starting at step 0 on "));
  CHECK(result.out.ends_with("\ntrainctl: training complete\n"));
  CHECK(sandbox.run_file("job.outcome") == "completed\n");
  CHECK(read_text(sandbox.path("srun.args")) == "--mpi=pmix\n--kill-on-bad-exit=1\n--job-name=trainctl-ranks\n" + sandbox.path("runtime") +
                                                    "\n--run-dir\n" + sandbox.run_dir() + "\n");
  CHECK_FALSE(fs::exists(sandbox.path("scontrol.calls")));
}

TEST_CASE("srun exiting 0 without the runtime's completion record fails the job") {
  Sandbox sandbox;
  CommandResult result = sandbox.run(named_job(), {"FAKE_RC=0", "FAKE_INCOMPLETE=1"});
  CHECK(result.exit_code == 1);
  CHECK(result.out.ends_with("\ntrainctl: srun exited 0 but the runtime did not record completion; failing the job\n"));
  CHECK(sandbox.run_file("job.outcome") == "failed: incomplete\n");
}

TEST_CASE("a failed runtime fails the job with its exit code") {
  Sandbox sandbox;
  CommandResult result = sandbox.run(named_job(), {"FAKE_RC=3"});
  CHECK(result.exit_code == 3);
  CHECK(result.out.ends_with("\ntrainctl: runtime failed with exit code 3\n"));
  CHECK(sandbox.run_file("job.outcome") == "failed: exit 3\n");
  CHECK_FALSE(fs::exists(sandbox.path("scontrol.calls")));
}

TEST_CASE("a save after a signal with progress requeues the job") {
  Sandbox sandbox;
  sandbox.set_run_file("progress.step", "5\n");
  sandbox.set_run_file("requeue.stalls", "1\n");
  CommandResult result = sandbox.run(named_job(), {"FAKE_RC=75", "FAKE_STEP=7", "SLURM_RESTART_COUNT=2"});
  INFO("stdout: " << result.out << "\nstderr: " << result.err);
  CHECK(result.exit_code == 0);
  CHECK(result.out.starts_with("trainctl: job 123 run 2 starting at step 5 on "));
  CHECK(result.out.ends_with("\ntrainctl: saved at step 7; requeuing job 123 (requeue 3 of 10)\n"));
  CHECK(read_text(sandbox.path("scontrol.calls")) == "requeue 123\n");
  CHECK(sandbox.run_file("requeue.stalls") == "0\n");
  CHECK(sandbox.run_file("job.outcome") == "requeued: saved at step 7\n");
}

TEST_CASE("a rank killed by a signal is an infrastructure fault: requeued, and remembered once complete") {
  Sandbox sandbox;
  sandbox.set_run_file("progress.step", "5\n");
  CommandResult killed = sandbox.run(named_job(), {"FAKE_SIGNAL=KILL", "FAKE_STEP=6"});
  INFO("stdout: " << killed.out << "\nstderr: " << killed.err);
  CHECK(killed.exit_code == 0);
  CHECK(killed.out.ends_with(
      "\ntrainctl: a rank was killed by signal 9 (srun exit 137): an infrastructure fault; resuming from the last "
      "checkpoint\ntrainctl: killed by signal 9 at step 6; requeuing job 123 (requeue 1 of 10)\n"));
  CHECK(read_text(sandbox.path("scontrol.calls")) == "requeue 123\n");
  CHECK(sandbox.run_file("job.outcome") == "requeued: killed by signal 9 at step 6\n");

  // Each requeue's reason stays below the first line, newest first, until the job's last word.
  CommandResult saved = sandbox.run(named_job(), {"FAKE_RC=75", "FAKE_STEP=8", "SLURM_RESTART_COUNT=1"});
  CHECK(saved.exit_code == 0);
  CHECK(sandbox.run_file("job.outcome") == "requeued: saved at step 8\nrequeued: killed by signal 9 at step 6\n");
  CommandResult completed = sandbox.run(named_job(), {"FAKE_RC=0", "SLURM_RESTART_COUNT=2"});
  CHECK(completed.exit_code == 0);
  CHECK(sandbox.run_file("job.outcome") ==
        "completed\nrequeued: saved at step 8\nrequeued: killed by signal 9 at step 6\n");
}

TEST_CASE("the hang watchdog kills ranks whose heartbeat stops and requeues the job as hung") {
  Sandbox sandbox;
  sandbox.set_run_file("progress.step", "5\n");
  CommandResult result = sandbox.run(watched_job(), {"FAKE_HANG=1", "FAKE_BEAT=6", "FAKE_STEP=6"});
  INFO("stdout: " << result.out << "\nstderr: " << result.err);
  CHECK(result.exit_code == 0);
  // At least the timeout; more on a loaded machine, where a poll comes late.
  CHECK(std::regex_search(result.out, std::regex("\ntrainctl: no step finished for [2-9] s \\(hang_timeout 2 s\\) after "
                                                 "step 6: the ranks are hung; killing them\n")));
  CHECK(result.out.ends_with("\ntrainctl: hung at step 6; requeuing job 123 (requeue 1 of 10)\n"));
  // The ranks are asked for their hang reports first; this one wrote none, and one rank alone
  // waits for no other, so nobody is blamed.
  CHECK(read_text(sandbox.path("scancel.calls")) == "--signal=QUIT 123.0\n--signal=KILL 123.0\n");
  CHECK(result.out.find("\ntrainctl: hang report: rank=0 node=? no-report\n") != std::string::npos);
  CHECK(read_text(sandbox.path("scontrol.calls")) == "requeue 123\n");
  CHECK(sandbox.run_file("job.outcome") == "requeued: hung at step 6\n");
  CHECK_FALSE(fs::exists(sandbox.run_dir() + "/bad.nodes"));
}

TEST_CASE("the hang report names the rank that did not reach the collective, and its node is excluded") {
  Sandbox sandbox;
  sandbox.set_run_file("progress.step", "5\n");
  JobSpec job = watched_job();
  job.exclude = "n20";
  CommandResult result = sandbox.run(
      job, {"FAKE_HANG=1", "FAKE_BEAT=6", "FAKE_STEP=6", "SLURM_NTASKS=3", "SLURM_JOB_NUM_NODES=2",
            "SLURM_JOB_PARTITION=debug", "SLURM_JOB_NODELIST=n[7-8]", "FAKE_NODES=0 n7\n1 n7\n2 n8\n",
            "FAKE_HANG_REPORTS=0 rank=0 node=n7 step=7 phase=collective collective=all-reduce waited_s=2.1\n"
            "1 rank=1 node=n7 step=7 phase=collective collective=all-reduce waited_s=2.0\n"});
  INFO("stdout: " << result.out << "\nstderr: " << result.err);
  CHECK(result.exit_code == 0);
  CHECK(result.out.find("\ntrainctl: hang report: rank=2 node=n8 no-report\n") != std::string::npos);
  CHECK(result.out.ends_with("\ntrainctl: blaming node n8: hung: rank 2 did not reach the all-reduce of step 7\n"
                             "trainctl: hung at step 6; rank 2 on n8 did not reach the all-reduce; requeuing job 123 "
                             "(requeue 1 of 10)\n"
                             "trainctl: the requeued job excludes n20,n8\n"));
  CHECK(sandbox.run_file("bad.nodes") == "n8\thung: rank 2 did not reach the all-reduce of step 7\n");
  CHECK(read_text(sandbox.path("scontrol.calls")) ==
        "requeue 123\nshow hostnames n20,n8\nupdate JobId=123 ExcNodeList=n20,n8\n");
  CHECK(sandbox.run_file("job.outcome") == "requeued: hung at step 6; rank 2 on n8 did not reach the all-reduce\n");
}

TEST_CASE("a rank in another phase than the collective the others wait in is the one named") {
  Sandbox sandbox;
  CommandResult result = sandbox.run(
      watched_job(), {"FAKE_HANG=1", "FAKE_BEAT=2", "FAKE_STEP=2", "SLURM_NTASKS=2", "SLURM_JOB_PARTITION=debug",
                      "FAKE_NODES=0 n7\n1 n8\n",
                      "FAKE_HANG_REPORTS=0 rank=0 node=n7 step=3 phase=collective collective=all-reduce waited_s=2.1\n"
                      "1 rank=1 node=n8 step=3 phase=forward collective=- waited_s=-\n"});
  INFO("stdout: " << result.out << "\nstderr: " << result.err);
  CHECK(sandbox.run_file("job.outcome") == "requeued: hung at step 2; rank 1 on n8 did not reach the all-reduce\n");
  CHECK(sandbox.run_file("bad.nodes") == "n8\thung: rank 1 did not reach the all-reduce of step 3\n");
}

TEST_CASE("a failed node check requeues the job without the node, and is no stall") {
  Sandbox sandbox;
  sandbox.set_run_file("progress.step", "0\n");
  sandbox.set_run_file("requeue.stalls", "1\n");
  CommandResult result = sandbox.run(
      named_job(), {"FAKE_RC=76", "SLURM_JOB_NUM_NODES=2", "SLURM_JOB_PARTITION=debug",
                    "FAKE_BAD_NODES=n8\tnode check: rank 1 (cpu): GEMM differs from the CPU's\n"});
  INFO("stdout: " << result.out << "\nstderr: " << result.err);
  CHECK(result.exit_code == 0);
  CHECK(result.out.ends_with("\ntrainctl: node check failed on n8; requeuing job 123 (requeue 1 of 10)\n"
                             "trainctl: the requeued job excludes n8\n"));
  CHECK(read_text(sandbox.path("scontrol.calls")) == "requeue 123\nshow hostnames n8\nupdate JobId=123 ExcNodeList=n8\n");
  CHECK(sandbox.run_file("requeue.stalls") == "1\n");
  CHECK(sandbox.run_file("job.outcome") == "requeued: node check failed on n8\n");

  // The next start says which nodes were blamed before.
  CommandResult next = sandbox.run(named_job(), {"FAKE_RC=0", "SLURM_RESTART_COUNT=1"});
  CHECK(next.out.find("\ntrainctl: nodes blamed before: n8 (node check: rank 1 (cpu): GEMM differs from the CPU's)\n") !=
        std::string::npos);
}

TEST_CASE("a node check whose collective timed out is the check's failure, whatever srun's code") {
  // The ranks that timed out exit 76, and srun kills the hung one: srun's code is a signal's.
  Sandbox sandbox;
  CommandResult result = sandbox.run(
      named_job(), {"FAKE_SIGNAL=KILL", "SLURM_JOB_PARTITION=debug",
                    "FAKE_BAD_NODES=n9\tnode check: rank 2 did not reach the all-reduce within 300 s\n"});
  INFO("stdout: " << result.out << "\nstderr: " << result.err);
  CHECK(result.exit_code == 0);
  CHECK(sandbox.run_file("job.outcome") == "requeued: node check failed on n9\n");
  CHECK(sandbox.run_file("bad.nodes") == "n9\tnode check: rank 2 did not reach the all-reduce within 300 s\n");
}

TEST_CASE("an exclusion that would leave the partition too few nodes is not made") {
  Sandbox sandbox;
  CommandResult result = sandbox.run(
      named_job(), {"FAKE_RC=76", "SLURM_JOB_NUM_NODES=2", "SLURM_JOB_PARTITION=debug", "FAKE_PARTITION_NODES=n7\nn8\n",
                    "FAKE_BAD_NODES=n8\tnode check: rank 1 (cpu): GEMM differs from the CPU's\n"});
  INFO("stdout: " << result.out << "\nstderr: " << result.err);
  CHECK(result.exit_code == 0);
  CHECK(result.out.ends_with("\ntrainctl: not excluding n8: partition debug would have 1 usable nodes, the job needs 2\n"));
  CHECK(read_text(sandbox.path("scontrol.calls")) == "requeue 123\nshow hostnames n8\n");
}

TEST_CASE("more bad nodes than max_excluded_nodes fail the job, naming them") {
  Sandbox sandbox;
  sandbox.set_run_file("bad.nodes", "n7\thung: rank 0 did not reach the all-reduce of step 3\n");
  JobSpec job = named_job();
  job.max_excluded_nodes = 1;
  CommandResult result = sandbox.run(job, {"FAKE_RC=76", "FAKE_BAD_NODES=n8\tnode check: rank 1 (cpu): GEMM differs\n"});
  INFO("stdout: " << result.out << "\nstderr: " << result.err);
  CHECK(result.exit_code == 1);
  const std::string why = "2 bad nodes, more than max_excluded_nodes (1): n7 (hung: rank 0 did not reach the all-reduce "
                          "of step 3), n8 (node check: rank 1 (cpu): GEMM differs)";
  CHECK(result.out.ends_with("\ntrainctl: node check failed on n8; not requeuing: " + why + "\n"));
  CHECK(sandbox.run_file("job.outcome") == "failed: " + why + "\n");
  CHECK_FALSE(fs::exists(sandbox.path("scontrol.calls")));
}

TEST_CASE("a rank killed by a signal blames its node: srun's word for the runtime, rank.exits for a program") {
  Sandbox sandbox;
  CommandResult runtime = sandbox.run(named_job(), {"FAKE_SIGNAL=KILL", "FAKE_STEP=6", "SLURM_JOB_PARTITION=debug",
                                                    "FAKE_SRUN_ERROR=srun: error: n8: task 1: Killed"});
  INFO("stdout: " << runtime.out << "\nstderr: " << runtime.err);
  CHECK(sandbox.run_file("bad.nodes") == "n8\tkilled: rank 1 (Killed) at step 6\n");
  CHECK(sandbox.run_file("job.outcome") == "requeued: killed by signal 9 at step 6; rank 1 on n8: Killed\n");

  Sandbox program_sandbox;
  JobSpec job = named_job();
  CommandResult program = program_sandbox.run_program(
      job, {"FAKE_RC=1", "FAKE_STEP=4", "FAKE_NODES=0 n7\n1 n9\n", "FAKE_EXITS=0 signal 15 200\n1 signal 9 100\n"});
  INFO("stdout: " << program.out << "\nstderr: " << program.err);
  CHECK(program_sandbox.run_file("bad.nodes") == "n9\tkilled: rank 1 (signal 9) at step 4\n");
  CHECK(program_sandbox.run_file("job.outcome") == "requeued: killed by signal 9 at step 4; rank 1 on n9: signal 9\n");
}

TEST_CASE("nodes SLURM holds down after it ended the job itself are blamed at the next start") {
  Sandbox sandbox;
  sandbox.set_run_file("job.outcome", "running\n");
  sandbox.set_run_file("job.nodes", "n[7-8]\n");
  CommandResult result = sandbox.run(named_job(), {"FAKE_RC=0", "FAKE_DOWN_NODES=n8 down*\n", "SLURM_JOB_NODELIST=n[7,9]"});
  INFO("stdout: " << result.out << "\nstderr: " << result.err);
  CHECK(sandbox.run_file("bad.nodes") == "n8\tdown: SLURM held it down* after ending the job\n");
  CHECK(sandbox.run_file("job.nodes") == "n[7,9]\n");
  CHECK(result.out.starts_with("trainctl: blaming node n8: down: SLURM held it down* after ending the job\n"
                               "trainctl: job 123 run 0 starting at step 0 on n[7,9]\n"));
}

TEST_CASE("the hang watchdog kills srun itself when the ranks' step cannot be cancelled") {
  Sandbox sandbox;
  CommandResult result = sandbox.run(watched_job(), {"FAKE_HANG=1", "FAKE_BEAT=3", "FAKE_SCANCEL_RC=1"});
  INFO("stdout: " << result.out << "\nstderr: " << result.err);
  CHECK(result.out.find("\ntrainctl: cannot find the ranks' step to cancel; killing srun\n") != std::string::npos);
  CHECK(sandbox.run_file("job.outcome") == "requeued: hung at step 3\n");
}

TEST_CASE("a heartbeat that keeps changing is no hang, however long the run") {
  Sandbox sandbox;
  CommandResult result = sandbox.run(watched_job(), {"FAKE_BEATS=6", "FAKE_RC=0"});
  INFO("stdout: " << result.out << "\nstderr: " << result.err);
  CHECK(result.exit_code == 0);
  CHECK(sandbox.run_file("job.outcome") == "completed\n");
  CHECK_FALSE(fs::exists(sandbox.path("scancel.calls")));
}

TEST_CASE("a run that SLURM ended without the script's word is recorded as SLURM's requeue") {
  Sandbox sandbox;
  sandbox.set_run_file("progress.step", "5\n");
  sandbox.set_run_file("job.outcome", "running\nrequeued: saved at step 2\n");
  CommandResult result = sandbox.run(named_job(), {"FAKE_RC=0", "SLURM_RESTART_COUNT=2"});
  CHECK(result.exit_code == 0);
  CHECK(sandbox.run_file("job.outcome") ==
        "completed\nrequeued: by SLURM at step 5 (the run before ended without the batch script's word)\n"
        "requeued: saved at step 2\n");
}

TEST_CASE("a rank killed by a signal is requeued only within the guards") {
  Sandbox sandbox;
  JobSpec job = named_job();
  job.max_requeues = 1;
  CommandResult result = sandbox.run(job, {"FAKE_SIGNAL=SEGV", "FAKE_STEP=3", "SLURM_RESTART_COUNT=1"});
  CHECK(result.exit_code == 1);
  CHECK(result.out.ends_with("\ntrainctl: killed by signal 11 at step 3; not requeuing: max_requeues (1) reached\n"));
  CHECK(sandbox.run_file("job.outcome") == "stopped: max_requeues\n");
  CHECK_FALSE(fs::exists(sandbox.path("scontrol.calls")));
}

TEST_CASE("the runtime's own exit codes 1 and 2 are the user's: no requeue") {
  for (const std::string code : {"1", "2"}) {
    CAPTURE(code);
    Sandbox sandbox;
    CommandResult result = sandbox.run(named_job(), {"FAKE_RC=" + code, "FAKE_STEP=4"});
    CHECK(result.exit_code == std::stoi(code));
    CHECK(result.out.ends_with("\ntrainctl: runtime failed with exit code " + code + "\n"));
    CHECK(sandbox.run_file("job.outcome") == "failed: exit " + code + "\n");
    CHECK_FALSE(fs::exists(sandbox.path("scontrol.calls")));
  }
}

TEST_CASE("an array task requeues itself as <array job>_<task>") {
  Sandbox sandbox;
  CommandResult result = sandbox.run(named_job(), {"FAKE_RC=75", "FAKE_STEP=1", "SLURM_JOB_ID=130",
                                                   "SLURM_ARRAY_JOB_ID=123", "SLURM_ARRAY_TASK_ID=4"});
  CHECK(result.exit_code == 0);
  CHECK(result.out.starts_with("trainctl: job 123_4 run 0 starting at step 0 on "));
  CHECK(read_text(sandbox.path("scontrol.calls")) == "requeue 123_4\n");
}

TEST_CASE("two requeues in a row without progress stop the job; progress resets the count") {
  Sandbox sandbox;
  sandbox.set_run_file("progress.step", "7\n");
  std::vector<std::string> stalled = {"FAKE_RC=75", "FAKE_STEP=7"};

  CommandResult first = sandbox.run(named_job(), stalled);
  CHECK(first.exit_code == 0);
  CHECK(sandbox.run_file("requeue.stalls") == "1\n");

  CommandResult second = sandbox.run(named_job(), stalled);
  CHECK(second.exit_code == 1);
  CHECK(second.out.ends_with("\ntrainctl: saved at step 7; not requeuing: 2 requeues in a row without step progress\n"));
  CHECK(sandbox.run_file("job.outcome") == "stopped: no progress\nrequeued: saved at step 7\n");
  CHECK(read_text(sandbox.path("scontrol.calls")) == "requeue 123\n");

  sandbox.set_run_file("requeue.stalls", "1\n");
  CommandResult progressed = sandbox.run(named_job(), {"FAKE_RC=75", "FAKE_STEP=8"});
  CHECK(progressed.exit_code == 0);
  CHECK(sandbox.run_file("requeue.stalls") == "0\n");
}

TEST_CASE("max_requeues stops the job even when it makes progress") {
  Sandbox sandbox;
  JobSpec job = named_job();
  job.max_requeues = 3;
  CommandResult result = sandbox.run(job, {"FAKE_RC=75", "FAKE_STEP=9", "SLURM_RESTART_COUNT=3"});
  CHECK(result.exit_code == 1);
  CHECK(result.out.ends_with("\ntrainctl: saved at step 9; not requeuing: max_requeues (3) reached\n"));
  CHECK(sandbox.run_file("job.outcome") == "stopped: max_requeues\n");
  CHECK_FALSE(fs::exists(sandbox.path("scontrol.calls")));
}

TEST_CASE("a failed scontrol requeue ends the job as failed") {
  Sandbox sandbox;
  CommandResult result = sandbox.run(named_job(), {"FAKE_RC=75", "FAKE_STEP=1", "FAKE_SCONTROL_RC=1"});
  CHECK(result.exit_code == 1);
  CHECK(result.out.ends_with("\ntrainctl: scontrol requeue 123 failed; the job ends here\n"));
  // The requeue it asked for stays on record below the failure.
  CHECK(sandbox.run_file("job.outcome") == "failed: requeue\nrequeued: saved at step 1\n");
}

TEST_CASE("an array script asks for the array, throttled, with a log per array task") {
  const ArrayTasks array{{3, 7, 12}, 2};
  const std::string script =
      trainctl::render_batch_script(named_job(), {"/scratch/sweeps/lr", kInputs.rank, array});
  CHECK(sbatch_lines(script) == std::vector<std::string>{
                                    "#SBATCH --job-name=mlp",
                                    "#SBATCH --nodes=1",
                                    "#SBATCH --ntasks-per-node=1",
                                    "#SBATCH --cpus-per-task=1",
                                    "#SBATCH --signal=TERM@120",
                                    "#SBATCH --requeue",
                                    "#SBATCH --open-mode=append",
                                    "#SBATCH --array=0-2%2",
                                    "#SBATCH --output=/scratch/sweeps/lr/logs/array-%A_%a.out",
                                });
  const std::vector<std::string> lines = lines_of(script);
  CHECK(line_index(lines, "export TRAINCTL_SWEEP_DIR='/scratch/sweeps/lr'") <
        line_index(lines, "task_of_array_index=(3 7 12)"));

  const std::vector<std::string> unthrottled = sbatch_lines(trainctl::render_batch_script(
      named_job(), {"/scratch/sweeps/lr", kInputs.rank, ArrayTasks{{3, 7, 12}, std::nullopt}}));
  CHECK(std::find(unthrottled.begin(), unthrottled.end(), "#SBATCH --array=0-2") != unthrottled.end());
}

TEST_CASE("an array task runs, records and requeues only its own task") {
  Sandbox sandbox;
  const std::string task = sandbox.task_dir(7);
  fs::create_directories(task + "/logs");
  write_text(task + "/logs/slurm-55_1.out", "earlier run\n");
  CommandResult result = sandbox.run_array(named_job(), ArrayTasks{{3, 7, 12}, 2},
                                           {"FAKE_RC=75", "FAKE_STEP=1", "SLURM_ARRAY_JOB_ID=55",
                                            "SLURM_ARRAY_TASK_ID=1", "SLURM_JOB_ID=56"});
  INFO("stdout: " << result.out << "\nstderr: " << result.err);
  CHECK(result.exit_code == 0);
  CHECK(read_text(sandbox.path("srun.args")) ==
        "--mpi=pmix\n--kill-on-bad-exit=1\n--job-name=trainctl-ranks\n" + sandbox.path("runtime") + "\n--run-dir\n" + task + "\n");
  CHECK(read_text(task + "/job_id") == "55_1\n");
  CHECK(read_text(task + "/requeue.count") == "0\n");
  // Everything after the task found its run directory goes to the task's own log, appended.
  CHECK(result.out == "");
  const std::string log = read_text(task + "/logs/slurm-55_1.out");
  CHECK(log.starts_with("earlier run\ntrainctl: job 55_1 run 0 starting at step 0 on "));
  CHECK(log.ends_with("\ntrainctl: saved at step 1; requeuing job 55_1 (requeue 1 of 10)\n"));
  CHECK(read_text(sandbox.path("scontrol.calls")) == "requeue 55_1\n");
  CHECK_FALSE(fs::exists(sandbox.task_dir(3) + "/job_id"));
  CHECK_FALSE(fs::exists(sandbox.task_dir(12) + "/job_id"));
}

TEST_CASE("an array script run without an array task id fails before srun") {
  Sandbox sandbox;
  CommandResult result = sandbox.run_array(named_job(), ArrayTasks{{3, 7, 12}, 2}, {"SLURM_ARRAY_JOB_ID=55"});
  CHECK(result.exit_code != 0);
  CHECK(result.err.find("SLURM_ARRAY_TASK_ID: this script runs as a job array") != std::string::npos);
  CHECK_FALSE(fs::exists(sandbox.path("srun.args")));
  CHECK_FALSE(fs::exists(sandbox.task_dir(7) + "/job_id"));
}

TEST_CASE("a [program] job's ranks meet at the allocation's first node, by its NodeAddr") {
  CHECK(trainctl::render_batch_script(named_job(), kInputs).find("TRAINCTL_MASTER_ADDR") == std::string::npos);
  Sandbox sandbox;
  CommandResult result = sandbox.run_program(
      named_job(), {"FAKE_RC=0", "FAKE_DUMP=TRAINCTL_MASTER_ADDR", "SLURM_JOB_NODELIST=n[7-8]"});
  INFO("stdout: " << result.out << "\nstderr: " << result.err);
  CHECK(result.exit_code == 0);
  CHECK(result.out.ends_with("\ntrainctl: training complete\n"));
  CHECK(sandbox.run_file("env.TRAINCTL_MASTER_ADDR") == "10.1.2.7");
  CHECK(read_text(sandbox.path("scontrol.calls")) == "show hostnames n[7-8]\nshow node -o n7\n");
}

TEST_CASE("the first [program] rank to fail decides how the job ends, not srun's exit code") {
  struct Case {
    std::string exits;  // rank, then its end as trainctl-launch records it: how, code, time
    std::string ending;
    std::string outcome;
  };
  // srun exits 143: --kill-on-bad-exit terminated the ranks still running after the first ended.
  const Case cases[] = {
      {"2 exit 0 100\\n1 signal 15 300\\n0 exit 1 200\\n", "\ntrainctl: program failed with exit code 1\n",
       "failed: exit 1\n"},
      // A program's own code above 128 is no signal: not an infrastructure fault.
      {"1 signal 15 300\\n0 exit 255 200\\n", "\ntrainctl: program failed with exit code 255\n", "failed: exit 255\n"},
      {"0 exit 75 200\\n1 signal 15 300\\n",
       "\ntrainctl: saved at step 7; requeuing job 123 (requeue 1 of 10)\n", "requeued: saved at step 7\n"},
      {"0 signal 15 300\\n1 signal 9 200\\n2 exit 1 400\\n",
       "\ntrainctl: killed by signal 9 at step 7; rank 1: signal 9; requeuing job 123 (requeue 1 of 10)\n",
       "requeued: killed by signal 9 at step 7; rank 1: signal 9\n"},
  };
  for (const Case& c : cases) {
    Sandbox sandbox;
    // A failure of the run before this one, which must not count.
    fs::create_directories(sandbox.run_dir() + "/rank.exits");
    sandbox.set_run_file("rank.exits/5", "exit 1 1\n");
    CommandResult result = sandbox.run_program(named_job(), {"FAKE_RC=143", "FAKE_STEP=7", "FAKE_EXITS=" + c.exits,
                                                             "SLURM_JOB_NODELIST=n7"});
    INFO("exits: " << c.exits << "\nstdout: " << result.out);
    CHECK(result.out.ends_with(c.ending));
    CHECK(sandbox.run_file("job.outcome") == c.outcome);
    const bool requeued = c.outcome.starts_with("requeued");
    CHECK(result.exit_code == (requeued ? 0 : std::stoi(c.outcome.substr(c.outcome.rfind(' ') + 1))));
    CHECK(read_text(sandbox.path("scontrol.calls")).ends_with(requeued ? "requeue 123\n" : "show node -o n7\n"));
  }
}

TEST_CASE("only a config with [notify] gets a notifier, and the script gives it the run directory alone") {
  const std::string plain = trainctl::render_batch_script(named_job(), kInputs);
  CHECK(plain.find("\nnotify() { :; }  # the config has no [notify]\n") != std::string::npos);
  CHECK(plain.find("notifier") == std::string::npos);

  RenderInputs inputs = kInputs;
  inputs.notifier = "/opt/trainctl/bin/trainctl";
  const std::vector<std::string> lines = lines_of(trainctl::render_batch_script(named_job(), inputs));
  const size_t notifier = line_index(lines, "notifier='/opt/trainctl/bin/trainctl'");
  CHECK(line_index(lines, "notify() {") == notifier + 1);
  CHECK(line_index(lines, R"(  "$notifier" notify "$run_dir" --event "$1" --job "$requeue_target" || true)") == notifier + 2);
  CHECK(notifier > line_index(lines, R"(outcome_file="$run_dir/job.outcome")"));
  CHECK(notifier < line_index(lines, "finish() {"));
}

TEST_CASE("a job with [notify] tells of each event once, whatever the notifier answers") {
  struct Case {
    std::vector<std::string> env;
    int exit_code;
    std::string events;  // notify.calls, "--event E --job J" per line
  };
  const std::string job = " --job 123\n";
  const Case cases[] = {
      {{"FAKE_RC=0"}, 0, "--event completed" + job},
      {{"FAKE_RC=3"}, 3, "--event failed" + job},
      {{"FAKE_RC=0", "FAKE_INCOMPLETE=1"}, 1, "--event failed" + job},
      // Told before the requeue: SLURM may end the script once it has accepted it.
      {{"FAKE_RC=75", "FAKE_STEP=1"}, 0, "--event requeued" + job},
      {{"FAKE_RC=75", "FAKE_STEP=1", "SLURM_RESTART_COUNT=10"}, 1, "--event failed" + job},
      {{"FAKE_RC=75", "FAKE_STEP=1", "FAKE_SCONTROL_RC=1"}, 1,
       "--event requeued" + job + "--event failed --job 123 (after scontrol)\n"},
      {{"FAKE_SIGNAL=KILL", "FAKE_STEP=1", "FAKE_NOTIFY_RC=1"}, 0, "--event requeued" + job},
      {{"FAKE_RC=5", "FAKE_NOTIFY_RC=1"}, 5, "--event failed" + job},
  };
  for (const Case& c : cases) {
    Sandbox sandbox;
    sandbox.notify();
    CommandResult result = sandbox.run(named_job(), c.env);
    INFO("env: " << c.env.back() << "\nstdout: " << result.out << "\nstderr: " << result.err);
    CHECK(result.exit_code == c.exit_code);
    std::string expected;
    for (const std::string& line : lines_of(c.events)) expected += "notify " + sandbox.run_dir() + " " + line + "\n";
    CHECK(read_text(sandbox.path("notify.calls")) == expected);
    // Its output is the job log's.
    CHECK(result.out.find("\nfake trainctl notify ") != std::string::npos);
  }
}

TEST_CASE("a hang is told, then the requeue; SLURM's own requeue is told as the next start begins") {
  Sandbox sandbox;
  sandbox.notify();
  CommandResult hung = sandbox.run(watched_job(), {"FAKE_HANG=1", "FAKE_BEAT=6", "FAKE_STEP=6"});
  INFO("stdout: " << hung.out << "\nstderr: " << hung.err);
  CHECK(hung.exit_code == 0);
  const std::string prefix = "notify " + sandbox.run_dir() + " --event ";
  CHECK(read_text(sandbox.path("notify.calls")) == prefix + "hung --job 123\n" + prefix + "requeued --job 123\n");

  Sandbox slurm_requeued;
  slurm_requeued.notify();
  slurm_requeued.set_run_file("job.outcome", "running\n");
  CommandResult completed = slurm_requeued.run(named_job(), {"FAKE_RC=0", "SLURM_RESTART_COUNT=1"});
  CHECK(completed.exit_code == 0);
  CHECK(read_text(slurm_requeued.path("notify.calls")) ==
        "notify " + slurm_requeued.run_dir() + " --event requeued --job 123\n" + "notify " + slurm_requeued.run_dir() +
            " --event completed --job 123\n");
}

TEST_CASE("an array task tells of its events from its own run directory, as <array job>_<task>") {
  Sandbox sandbox;
  sandbox.notify();
  CommandResult result = sandbox.run_array(named_job(), ArrayTasks{{3, 7, 12}, 2},
                                           {"FAKE_RC=0", "SLURM_ARRAY_JOB_ID=55", "SLURM_ARRAY_TASK_ID=1", "SLURM_JOB_ID=56"});
  INFO("stdout: " << result.out << "\nstderr: " << result.err);
  CHECK(result.exit_code == 0);
  CHECK(read_text(sandbox.path("notify.calls")) == "notify " + sandbox.task_dir(7) + " --event completed --job 55_1\n");
  CHECK(read_text(sandbox.task_dir(7) + "/logs/slurm-55_1.out").ends_with("\nfake trainctl notify completed\n"));
}

TEST_CASE("a scheduled task trains rung by rung as `trainctl sweep rung` answers, and stops where it says") {
  Sandbox sandbox;
  const ArrayTasks scheduled{{3, 7, 12}, 2, sandbox.path("scheduler")};
  const std::vector<std::string> task_1{"SLURM_ARRAY_JOB_ID=55", "SLURM_ARRAY_TASK_ID=1", "SLURM_JOB_ID=56"};
  const auto with = [&](std::vector<std::string> env) {
    env.insert(env.end(), task_1.begin(), task_1.end());
    return env;
  };
  const std::string sweep = sandbox.sweep_dir();
  const std::string log = sandbox.task_dir(7) + "/logs/slurm-55_1.out";
  CommandResult result = sandbox.run_array(unwatched_job(), scheduled, with({"FAKE_RUNG_ANSWERS=train 10;train 30;stop 1"}));
  INFO("stdout: " << result.out << "\nstderr: " << result.err);
  CHECK(result.exit_code == 0);
  CHECK(read_text(sandbox.path("rung.calls")) == "sweep rung " + sweep + " --task 7\nsweep rung " + sweep +
                                                     " --task 7 --reached 10\nsweep rung " + sweep +
                                                     " --task 7 --reached 30\n");
  CHECK(read_text(log).find("\ntrainctl: task 7 trains to step 10, its next rung\n") != std::string::npos);
  CHECK(read_text(log).ends_with("\ntrainctl: task 7 trains to step 30, its next rung\n"
                                 "trainctl: stopped at rung 1 (fake)\n"));
  CHECK(read_text(sandbox.task_dir(7) + "/job.outcome") == "stopped at rung 1 (fake)\n");

  // The last rung: the ranks' completion is the job's.
  fs::remove(sandbox.path("rung.calls"));
  result = sandbox.run_array(unwatched_job(), scheduled, with({"FAKE_RUNG_ANSWERS=train 90;complete"}));
  CHECK(result.exit_code == 0);
  CHECK(read_text(sandbox.task_dir(7) + "/job.outcome") == "completed\n");
  // Without completed.step it is no completion.
  fs::remove(sandbox.path("rung.calls"));
  fs::remove(sandbox.task_dir(7) + "/completed.step");
  result = sandbox.run_array(unwatched_job(), scheduled, with({"FAKE_RUNG_ANSWERS=train 90;complete", "FAKE_INCOMPLETE=1"}));
  CHECK(result.exit_code == 1);
  CHECK(read_text(sandbox.task_dir(7) + "/job.outcome") == "failed: incomplete\n");
  // Stopped before a start: nothing runs.
  fs::remove(sandbox.path("rung.calls"));
  fs::remove(sandbox.path("srun.args"));
  result = sandbox.run_array(unwatched_job(), scheduled, with({"FAKE_RUNG_ANSWERS=stop 0"}));
  CHECK(result.exit_code == 0);
  CHECK_FALSE(fs::exists(sandbox.path("srun.args")));
  // A decision that cannot be taken fails the task.
  fs::remove(sandbox.path("rung.calls"));
  result = sandbox.run_array(unwatched_job(), scheduled, with({"FAKE_RUNG_ANSWERS=train 10"}));
  CHECK(result.exit_code == 1);
  CHECK(read_text(sandbox.task_dir(7) + "/job.outcome") == "failed: trainctl sweep rung exited 1\n");
  // A budget reached and asked for again would loop: it fails the task.
  fs::remove(sandbox.path("rung.calls"));
  result = sandbox.run_array(unwatched_job(), scheduled, with({"FAKE_RUNG_ANSWERS=train 10;train 10"}));
  CHECK(result.exit_code == 1);
  CHECK(read_text(sandbox.task_dir(7) + "/job.outcome") == "failed: trainctl sweep rung answered \"train 10\" again\n");
}

TEST_CASE("a scheduled task whose ranks failed asks whether its metric went non-finite: then it stops") {
  Sandbox sandbox;
  const ArrayTasks scheduled{{3, 7, 12}, 2, sandbox.path("scheduler")};
  CommandResult result =
      sandbox.run_array(unwatched_job(), scheduled,
                        {"FAKE_RUNG_ANSWERS=train 10;stop 0", "FAKE_RC=1", "SLURM_ARRAY_JOB_ID=55",
                         "SLURM_ARRAY_TASK_ID=1", "SLURM_JOB_ID=56"});
  INFO("stdout: " << result.out << "\nstderr: " << result.err);
  CHECK(result.exit_code == 0);
  const std::string sweep = sandbox.sweep_dir();
  CHECK(read_text(sandbox.path("rung.calls")) ==
        "sweep rung " + sweep + " --task 7\nsweep rung " + sweep + " --task 7 --ranks-failed\n");
  CHECK(read_text(sandbox.task_dir(7) + "/logs/slurm-55_1.out")
            .ends_with("\ntrainctl: runtime failed with exit code 1; stopped at rung 0 (fake)\n"));
  // Not a non-finite metric: the failure stands.
  fs::remove(sandbox.path("rung.calls"));
  result = sandbox.run_array(unwatched_job(), scheduled,
                             {"FAKE_RUNG_ANSWERS=train 10;failed", "FAKE_RC=1", "SLURM_ARRAY_JOB_ID=55",
                              "SLURM_ARRAY_TASK_ID=1", "SLURM_JOB_ID=56"});
  CHECK(result.exit_code == 1);
  CHECK(read_text(sandbox.task_dir(7) + "/job.outcome") == "failed: exit 1\n");
  // A save after a signal requeues, as in any job: the next start asks again.
  fs::remove(sandbox.path("rung.calls"));
  result = sandbox.run_array(unwatched_job(), scheduled,
                             {"FAKE_RUNG_ANSWERS=train 10", "FAKE_RC=75", "FAKE_STEP=4", "SLURM_ARRAY_JOB_ID=55",
                              "SLURM_ARRAY_TASK_ID=1", "SLURM_JOB_ID=56"});
  CHECK(result.exit_code == 0);
  CHECK(read_text(sandbox.path("scontrol.calls")) == "requeue 55_1\n");
}
