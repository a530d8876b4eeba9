// Tests for a run's status (cli/runs/run_status.cpp) as the failure taxonomy shapes it: job.outcome's
// first line is the last ending and its later lines the reasons for earlier requeues; a requeue
// outcome is no end; the status table's note names them all.
#include <doctest/doctest.h>

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "runs/run_status.h"

namespace {

namespace fs = std::filesystem;

// A run directory holding only `outcome` as job.outcome; removed at the end of the test.
class OutcomeRun {
 public:
  explicit OutcomeRun(const std::string& outcome) {
    std::string pattern = (fs::temp_directory_path() / "trainctl-status-XXXXXX").string();
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    root_ = pattern;
    std::ofstream(trainctl::RunDir(root_.string()).outcome()) << outcome;
  }
  ~OutcomeRun() { fs::remove_all(root_); }
  OutcomeRun(const OutcomeRun&) = delete;
  OutcomeRun& operator=(const OutcomeRun&) = delete;

  trainctl::RunStatus record() const { return trainctl::read_run_record(trainctl::RunDir(root_.string())); }
  void write_metrics(const std::string& lines) const { std::ofstream(trainctl::RunDir(root_.string()).metrics()) << lines; }
  void write_bad_nodes(const std::string& lines) const { std::ofstream(trainctl::RunDir(root_.string()).bad_nodes()) << lines; }

 private:
  fs::path root_;
};

}  // namespace

TEST_CASE("a completed job's record keeps why it was requeued, and the note names it") {
  const OutcomeRun run("completed\nrequeued: saved at step 800\nrequeued: killed by signal 9 at step 300\n");
  trainctl::RunStatus status = run.record();
  CHECK(status.outcome == "completed");
  CHECK(status.requeue_reasons ==
        std::vector<std::string>{"requeued: saved at step 800", "requeued: killed by signal 9 at step 300"});
  trainctl::settle_state(status, trainctl::SlurmView{"COMPLETED", "None", 2});
  CHECK(status.state == "COMPLETED");
  CHECK(trainctl::status_note(status) ==
        "completed; requeued: saved at step 800; requeued: killed by signal 9 at step 300");
  trainctl::Json record = trainctl::Json::object();
  trainctl::add_run_status(record, status);
  CHECK(record["requeue_reasons"].size() == 2);
}

TEST_CASE("the nodes blamed for a run's failures are listed once each, with the latest reason") {
  const OutcomeRun run("completed\n");
  run.write_bad_nodes("n3\thung: rank 1 did not reach the all-reduce of step 812\n"
                      "n1\tnode check: rank 0 (cpu): GEMM differs from the CPU's\n"
                      "n3\tkilled by signal 9: rank 1 (Killed) at step 900\n"
                      "n2");  // cut short by a crash
  const trainctl::RunStatus status = run.record();
  REQUIRE(status.excluded_nodes.size() == 2);
  CHECK(trainctl::excluded_nodes_text(status.excluded_nodes) ==
        "n3 (killed by signal 9: rank 1 (Killed) at step 900), n1 (node check: rank 0 (cpu): GEMM differs from the CPU's)");
  trainctl::Json record = trainctl::Json::object();
  trainctl::add_run_status(record, status);
  CHECK(record["excluded_nodes"][1]["node"] == "n1");
  CHECK(record["excluded_nodes"][1]["reason"] == "node check: rank 0 (cpu): GEMM differs from the CPU's");
  CHECK(OutcomeRun("completed\n").record().excluded_nodes.empty());
}

TEST_CASE("a run that stopped early says at which step, in the note and its JSON") {
  const OutcomeRun run("completed\n");
  run.write_metrics(R"({"step":40,"val_loss":0.5,"val_accuracy":0.8}
{"step":40,"event":"checkpoint","detail":"step-00000040.h5"}
{"step":40,"event":"early_stop","detail":"2 evaluations without improving"}
{"step":40,"event":"done","detail":"final loss 0.4"}
)");
  trainctl::RunStatus status = run.record();
  trainctl::settle_state(status, trainctl::SlurmView{"COMPLETED", "None", 0});
  CHECK(status.stopped_early_at == 40);
  CHECK(trainctl::status_note(status) == "completed; stopped early at step 40");
  trainctl::Json record = trainctl::Json::object();
  CHECK(trainctl::add_run_status(record, status)["stopped_early_at"] == 40);

  run.write_metrics(R"({"step":40,"event":"done","detail":"final loss 0.4"})");
  CHECK_FALSE(run.record().stopped_early_at.has_value());
}

TEST_CASE("a requeue outcome is no end: SLURM's state, else unknown") {
  const OutcomeRun run("requeued: killed by signal 9 at step 300\n");
  trainctl::RunStatus pending = run.record();
  trainctl::settle_state(pending, trainctl::SlurmView{"PENDING", "BeginTime", 1});
  CHECK(pending.state == "PENDING");
  CHECK(trainctl::status_note(pending) == "requeued: killed by signal 9 at step 300");

  trainctl::RunStatus forgotten = run.record();
  forgotten.job_id = "41";
  trainctl::settle_state(forgotten, std::nullopt);
  CHECK(forgotten.state == "UNKNOWN");
}

TEST_CASE("the user's failure is FAILED with its exit code; without an outcome the note is SLURM's reason") {
  const OutcomeRun failed("failed: exit 2\n");
  trainctl::RunStatus status = failed.record();
  trainctl::settle_state(status, trainctl::SlurmView{"FAILED", "NonZeroExitCode", 0});
  CHECK(status.state == "FAILED");
  CHECK(trainctl::status_note(status) == "failed: exit 2");

  const OutcomeRun queued("");
  trainctl::RunStatus waiting = queued.record();
  trainctl::settle_state(waiting, trainctl::SlurmView{"PENDING", "Priority", 0});
  CHECK(trainctl::status_note(waiting) == "Priority");
}
