// Tests for what a submission carries beside its batch script: the [[then]] schema
// (slurm/follow_up.h) as load_config reads it, the follow-up job's script (render.h) run by bash,
// run.json's record and the runtime-change refusal (common/run_record.h), `--after`'s parsing and
// sbatch options (cli/runs/submission.h), the [program] snapshot keys, and the code snapshot of a
// plain folder (cli/runs/code_snapshot.h).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "bad_input.h"
#include "command_runner.h"
#include "config_file.h"
#include "config_files.h"
#include "errors.h"
#include "render.h"
#include "run_record.h"
#include "runs/code_snapshot.h"
#include "runs/submission.h"

using namespace config_files;
namespace fs = std::filesystem;

namespace {

std::string with_then(std::string_view then) { return std::string(kMinimalConfig) + "\n" + std::string(then); }

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

TEST_CASE("[[then]] steps load with their defaults, in order") {
  // The schema alone: what each step needs of the run it follows is checked with the whole config.
  const std::vector<trainctl::FollowUpStep> steps = trainctl::parse_follow_ups(trainctl::parse_config_text(R"(
[[then]]
kind = "export"

[[then]]
kind = "evaluate"
checkpoint = 40

[[then]]
kind = "sample"
prompt = "Once"

[[then]]
kind = "command"
command = ["python3", "report.py"]
)", "then.toml"), "then.toml");
  REQUIRE(steps.size() == 4);
  CHECK(steps[0].kind == "export");
  CHECK(steps[0].out == "export");
  CHECK(steps[1].checkpoint == 40);
  CHECK(steps[2].tokens == 100);
  CHECK(trainctl::follow_up_argv(steps[0], "/bin/trainctl", "/runs/a") ==
        std::vector<std::string>{"/bin/trainctl", "export", "/runs/a", "--out", "/runs/a/export"});
  CHECK(trainctl::follow_up_argv(steps[1], "/bin/trainctl", "/runs/a") ==
        std::vector<std::string>{"/bin/trainctl", "eval", "/runs/a", "--ckpt", "40"});
  CHECK(trainctl::follow_up_argv(steps[2], "/bin/trainctl", "/runs/a") ==
        std::vector<std::string>{"/bin/trainctl", "sample", "/runs/a", "--prompt", "Once", "--tokens", "100"});
  CHECK(trainctl::follow_up_argv(steps[3], "/bin/trainctl", "/runs/a") ==
        std::vector<std::string>{"python3", "report.py"});
}

TEST_CASE("bad [[then]] input: exact messages naming file, line and key") {
  CHECK(load_error("then = 3\n" + std::string(kMinimalConfig)) ==
        "FILE:1:8: then: expected a list of follow-up steps, written [[then]] with kind = \"export\", \"evaluate\", "
        "\"sample\" or \"command\"");
  CHECK(load_error(with_then("[[then]]\nkind = \"publish\"\n")) ==
        "FILE:16:8: then[0].kind: must be one of \"export\", \"evaluate\", \"sample\", \"command\" (got \"publish\")");
  CHECK(load_error(with_then("[[then]]\nkind = \"export\"\nout = \"../elsewhere\"\n")) ==
        "FILE:17:7: then[0].out: must be a folder inside the run directory, such as \"export\"");
  CHECK(load_error(with_then("[[then]]\nkind = \"command\"\ncommand = []\n")) ==
        "FILE:17:11: then[0].command: is empty; give the program and its arguments");
  CHECK(load_error(with_then("[[then]]\nkind = \"sample\"\n")) == "FILE:15:1: then[0].prompt: required key is missing");
  CHECK(load_error(with_then("[[then]]\nkind = \"export\"\nouts = \"x\"\n")) ==
        "FILE:17:8: then[0].outs: unknown key (did you mean \"out\"?)");
  CHECK(load_error(R"([job]
name = "own"

[program]
command = ["python3", "train.py"]

[[then]]
kind = "export"
)") == "FILE:8:8: then[0].kind: \"export\" reads trainctl's checkpoints, and a [program] writes its own; use kind = "
         "\"command\" to run your own step");
  CHECK(load_error(with_then("[sweep]\n\"train.lr\" = [0.1, 0.2]\n\n[[then]]\nkind = \"export\"\n")).starts_with(
      "FILE:18:1: then: follow-up steps run after one training job, and a [sweep] submits many"));
}

TEST_CASE("a follow-up job's script runs its command in the run directory, hostile words inert, and records how it ended") {
  const TempDir dir;
  const std::string run = (dir.path() / "run").string();
  fs::create_directories(run + "/logs");
  const std::string marker = (dir.path() / "pwned").string();
  trainctl::JobSpec job;
  job.name = "mlp";
  job.env = {{"GREETING", "it's $(touch " + marker + ")"}};
  for (const auto& [code, outcome] : {std::pair{0, "completed"}, std::pair{3, "failed: exit 3"}}) {
    CAPTURE(code);
    const std::string script = trainctl::render_follow_up_script(
        job, {run, 1, "command",
              {"sh", "-c", "pwd >where; printf %s \"$GREETING|$1\" >said; exit " + std::to_string(code), "sh",
               "$(touch " + marker + ") `touch " + marker + "` ' \""}});
    const fs::path script_path = dir.path() / "then.sbatch";
    std::ofstream(script_path) << script;
    const trainctl::CommandResult result = trainctl::ProcessRunner().run({"bash", script_path.string()});
    INFO("stdout: " << result.out << "\nstderr: " << result.err);
    CHECK(result.exit_code == code);
    CHECK(read_text(run + "/then/1.outcome") == std::string(outcome) + "\n");
    CHECK(read_text(run + "/where") == run + "\n");
    CHECK(read_text(run + "/said") == "it's $(touch " + marker + ")|$(touch " + marker + ") `touch " + marker + "` ' \"");
    CHECK(script.find("#SBATCH --output=" + run + "/logs/then-1-command-%j.out\n") != std::string::npos);
  }
  CHECK_FALSE(fs::exists(marker));
}

TEST_CASE("run.json round-trips; a runtime of another version is refused with both named") {
  const TempDir dir;
  const trainctl::RunLayout run(dir.path().string());
  CHECK_FALSE(trainctl::load_run_record(run).has_value());
  CHECK_FALSE(trainctl::runtime_change_refusal(run, "trainctl-runtime 2").has_value());
  trainctl::RunRecord record{"trainctl 1", "trainctl-runtime 1", "2026-11-27T00:00:00Z"};
  record.code = trainctl::CodeSnapshot{"git", "/src", "/src/train", "abc", true, {"train/local.yaml"}, 3, 1200};
  record.after = trainctl::Predecessor{"/runs/a", "12", "any"};
  record.followers = {{0, "export", "14"}};
  trainctl::save_run_record(run, record);
  const trainctl::RunRecord read = *trainctl::load_run_record(run);
  CHECK(trainctl::run_record_json(read) == trainctl::run_record_json(record));
  CHECK(read.code->untracked == std::vector<std::string>{"train/local.yaml"});
  CHECK_FALSE(trainctl::runtime_change_refusal(run, "trainctl-runtime 1").has_value());
  CHECK(trainctl::runtime_change_refusal(run, "trainctl-runtime 2").value().starts_with(
      dir.path().string() + " was submitted to trainctl-runtime 1, and this is trainctl-runtime 2:"));
  std::ofstream(run.run_record()) << "{\"trainctl_version\": 3}";
  CHECK_THROWS_AS(trainctl::load_run_record(run), trainctl::BadInput);
}

TEST_CASE("--after takes a job id with a condition; anything else that is no run is refused") {
  const trainctl::Predecessor by_id = trainctl::parse_predecessor("4711:any");
  CHECK(by_id.job == "4711");
  CHECK(by_id.run.empty());
  CHECK(by_id.condition == "any");
  CHECK(trainctl::dependency_options(trainctl::parse_predecessor("4711")) ==
        std::vector<std::string>{"--dependency=afterok:4711", "--kill-on-invalid-dep=yes"});
  CHECK_THROWS_WITH_AS(trainctl::parse_predecessor("/nonexistent/run:ok"),
                       "--after /nonexistent/run:ok: /nonexistent/run is neither a run directory, a sweep directory "
                       "nor a job id (digits, or an array task's JOB_TASK; write RUN, RUN:ok or RUN:any)",
                       trainctl::UsageError);
}

TEST_CASE("a files snapshot takes what snapshot_include names, leaves run directories out, and copies links as links") {
  const TempDir dir;
  const fs::path source = dir.path() / "src";
  fs::create_directories(source / "lib");
  fs::create_directories(source / "runs/old/checkpoints");
  std::ofstream(source / "train.py") << "print(1)\n";
  std::ofstream(source / "lib/util.py") << "x = 1\n";
  std::ofstream(source / "notes.txt") << "not code\n";
  std::ofstream(source / "runs/old/config.toml") << "";
  std::ofstream(source / "runs/old/metrics.jsonl") << "";
  fs::create_symlink("train.py", source / "main.py");
  fs::permissions(source / "train.py", fs::perms::owner_exec, fs::perm_options::add);
  trainctl::ProgramSpec program;
  program.snapshot = "files";
  program.snapshot_include = std::vector<std::string>{"*.py"};
  const std::optional<trainctl::SnapshotPlan> plan = trainctl::plan_code_snapshot(program, source.string());
  REQUIRE(plan.has_value());
  CHECK(plan->files == std::vector<std::string>{"lib/util.py", "main.py", "train.py"});
  CHECK(plan->record.bytes == 15);
  const trainctl::RunLayout run((dir.path() / "run").string());
  trainctl::write_code_snapshot(*plan, run);
  CHECK(trainctl::snapshot_workdir(*plan, run) == run.code());
  CHECK(read_text(run.code() + "/lib/util.py") == "x = 1\n");
  CHECK(fs::read_symlink(run.code() + "/main.py") == "train.py");
  CHECK((fs::status(run.code() + "/train.py").permissions() & fs::perms::owner_exec) != fs::perms::none);
  program.snapshot_include = std::vector<std::string>{"*"};
  const std::optional<trainctl::SnapshotPlan> everything = trainctl::plan_code_snapshot(program, source.string());
  CHECK(everything->files == std::vector<std::string>{"lib/util.py", "main.py", "notes.txt", "train.py"});
  program.snapshot = "none";
  CHECK_FALSE(trainctl::plan_code_snapshot(program, source.string()).has_value());
}
