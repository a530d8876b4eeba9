// Tests for the SLURM command wrappers (slurm/slurm_client.cpp) against canned SLURM 22.05
// output, job arrays' tasks from squeue -O included, and for ProcessRunner
// (slurm/command_runner.cpp) against real processes.
#include <doctest/doctest.h>

#include <map>
#include <string>
#include <vector>

#include "command_runner.h"
#include "slurm_client.h"

using trainctl::ArrayTaskInfo;
using trainctl::CommandResult;
using trainctl::JobInfo;
using trainctl::SlurmClient;
using trainctl::SlurmError;

namespace {

using Argv = std::vector<std::string>;

// Answers each expected argv with a canned result and records every call; anything else
// answers like a missing program.
class FakeRunner : public trainctl::CommandRunner {
 public:
  void reply(const Argv& argv, CommandResult result) { replies_[argv] = std::move(result); }
  CommandResult run(const Argv& argv) override {
    calls.push_back(argv);
    auto found = replies_.find(argv);
    return found != replies_.end() ? found->second : CommandResult{127, "", "fake: unexpected command"};
  }

  std::vector<Argv> calls;

 private:
  std::map<Argv, CommandResult> replies_;
};

const CommandResult kInvalidJobId{1, "", "slurm_load_jobs error: Invalid job id specified\n"};

// `scontrol show job -o` of a running, once-requeued job. The Command path has a space and
// something that looks like a key after it, which must not be read as one.
const std::string kRunningJob =
    "JobId=1234 JobName=mlp-7 UserId=alice(1000) GroupId=alice(1000) MCS_label=N/A Priority=4294901758 Nice=0 "
    "Account=(null) QOS=normal JobState=RUNNING Reason=None Dependency=(null) Requeue=1 Restarts=1 BatchFlag=1 "
    "Reboot=0 ExitCode=0:0 RunTime=00:02:13 TimeLimit=01:00:00 TimeMin=N/A SubmitTime=2026-11-22T03:40:01 "
    "EligibleTime=2026-11-22T03:42:02 AccrueTime=2026-11-22T03:42:02 StartTime=2026-11-22T03:42:03 "
    "EndTime=2026-11-22T04:42:03 Deadline=N/A PreemptEligibleTime=2026-11-22T03:42:03 PreemptTime=None "
    "SuspendTime=None SecsPreSuspend=0 LastSchedEval=2026-11-22T03:42:03 Scheduler=Main Partition=debug "
    "AllocNode:Sid=vm:4242 ReqNodeList=n9 ExcNodeList=(null) NodeList=n[1-2] BatchHost=n1 NumNodes=2 NumCPUs=4 "
    "NumTasks=4 CPUs/Task=1 ReqB:S:C:T=0:0:*:* TRES=cpu=4,node=2,billing=4 Socks/Node=* NtasksPerN:B:S:C=2:0:*:* "
    "CoreSpec=* MinCPUsNode=2 MinMemoryNode=0 MinTmpDiskNode=0 Features=(null) DelayBoot=00:00:00 "
    "OverSubscribe=OK Contiguous=0 Licenses=(null) Network=(null) "
    "Command=/home/alice/my runs/mlp-7 JobState=FAKE/job.sbatch WorkDir=/home/alice/my runs "
    "StdErr=/home/alice/my runs/mlp-7/logs/slurm-1234.out StdIn=/dev/null "
    "StdOut=/home/alice/my runs/mlp-7/logs/slurm-1234.out Power=\n";

// A requeued job waiting out its BeginTime: no nodes yet.
const std::string kPendingJob =
    "JobId=1235 JobName=mlp-8 UserId=alice(1000) GroupId=alice(1000) MCS_label=N/A Priority=4294901757 Nice=0 "
    "Account=(null) QOS=normal JobState=PENDING Reason=BeginTime Dependency=(null) Requeue=1 Restarts=2 "
    "BatchFlag=1 Reboot=0 ExitCode=0:0 RunTime=00:00:00 TimeLimit=01:00:00 TimeMin=N/A "
    "SubmitTime=2026-11-22T03:44:10 EligibleTime=2026-11-22T03:46:11 AccrueTime=Unknown StartTime=Unknown "
    "EndTime=Unknown Deadline=N/A SuspendTime=None SecsPreSuspend=0 LastSchedEval=2026-11-22T03:44:10 "
    "Scheduler=Main Partition=debug AllocNode:Sid=vm:4242 ReqNodeList=n1 ExcNodeList=(null) NodeList=(null) "
    "NumNodes=1 NumCPUs=1 NumTasks=1 CPUs/Task=1 ReqB:S:C:T=0:0:*:* TRES=cpu=1,node=1,billing=1 Socks/Node=* "
    "NtasksPerN:B:S:C=1:0:*:* CoreSpec=* MinCPUsNode=1 MinMemoryNode=0 MinTmpDiskNode=0 Features=(null) "
    "DelayBoot=00:00:00 OverSubscribe=OK Contiguous=0 Licenses=(null) Network=(null) "
    "Command=/home/alice/runs/mlp-8/job.sbatch WorkDir=/home/alice/runs StdErr=/home/alice/runs/mlp-8/logs/x.out "
    "StdIn=/dev/null StdOut=/home/alice/runs/mlp-8/logs/x.out Power=\n";

// The shape of `scontrol show config`: a heading, "Key = Value" lines, plugin sections.
const std::string kConfig =
    "Configuration data as of 2026-11-22T03:44:13\n"
    "AccountingStorageBackupHost = (null)\n"
    "AccountingStorageTRES   = cpu,mem,energy,node,billing,fs/disk,vmem,pages\n"
    "KillWait                = 10 sec\n"
    "MaxArraySize            = 5000\n"
    "MpiParams               = ports=12000-12999\n"
    "\n"
    "MPI Plugins Configuration:\n"
    "PMIxTimeout             = 300\n"
    "\n"
    "Slurmctld(primary) at vm is UP\n";

// The squeue call of array_tasks for `job_ids` (comma-separated).
Argv array_tasks_argv(const std::string& job_ids) {
  return {"squeue", "-h", "-r", "-t", "all", "-j", job_ids, "-O", "JobArrayID:40|,State:24|,RestartCnt:8|,Reason:80"};
}

// One line of that call's output as SLURM 22.05 prints it: each field padded to its width, and
// each but the last followed by its '|'.
std::string array_task_line(const std::string& id, const std::string& state, const std::string& restarts,
                            const std::string& reason) {
  auto padded = [](const std::string& field, size_t width) { return field + std::string(width - field.size(), ' '); };
  return padded(id, 40) + "|" + padded(state, 24) + "|" + padded(restarts, 8) + "|" + padded(reason, 80) + "\n";
}

// Each task's fields, "143_2 PENDING JobArrayTaskLimit restarts=0".
std::vector<std::string> described(const std::vector<ArrayTaskInfo>& tasks) {
  std::vector<std::string> lines;
  for (const ArrayTaskInfo& task : tasks)
    lines.push_back(task.array_job_id + "_" + std::to_string(task.array_index) + " " + task.state + " " + task.reason +
                    " restarts=" + std::to_string(task.restart_count));
  return lines;
}

}  // namespace

TEST_CASE("submit runs sbatch --parsable and returns the job id") {
  FakeRunner runner;
  runner.reply({"sbatch", "--parsable", "/runs/a/job.sbatch"}, {0, "1234\n", ""});
  runner.reply({"sbatch", "--parsable", "/runs/b/job.sbatch"}, {0, "1235;cluster\n", ""});
  SlurmClient slurm(runner);
  CHECK(slurm.submit("/runs/a/job.sbatch") == "1234");
  CHECK(slurm.submit("/runs/b/job.sbatch") == "1235");
  CHECK(runner.calls == std::vector<Argv>{{"sbatch", "--parsable", "/runs/a/job.sbatch"},
                                          {"sbatch", "--parsable", "/runs/b/job.sbatch"}});
}

TEST_CASE("submit puts sbatch options before the script path") {
  FakeRunner runner;
  const Argv argv{"sbatch", "--parsable", "--dependency=afterany:143", "/sweeps/lr/arrays/array-1.sbatch"};
  runner.reply(argv, {0, "150\n", ""});
  CHECK(SlurmClient(runner).submit("/sweeps/lr/arrays/array-1.sbatch", {"--dependency=afterany:143"}) == "150");
  CHECK(runner.calls == std::vector<Argv>{argv});
}

TEST_CASE("a failed sbatch raises SlurmError with sbatch's stderr") {
  FakeRunner runner;
  runner.reply({"sbatch", "--parsable", "/runs/a/job.sbatch"},
               {1, "", "sbatch: error: Batch job submission failed: Invalid partition name specified\n"});
  runner.reply({"sbatch", "--parsable", "/runs/b/job.sbatch"}, {0, "\n", ""});
  SlurmClient slurm(runner);
  CHECK_THROWS_WITH_AS(slurm.submit("/runs/a/job.sbatch"),
                       "sbatch --parsable /runs/a/job.sbatch failed (exit 1): "
                       "sbatch: error: Batch job submission failed: Invalid partition name specified",
                       SlurmError);
  CHECK_THROWS_WITH_AS(slurm.submit("/runs/b/job.sbatch"), "sbatch --parsable /runs/b/job.sbatch printed no job id",
                       SlurmError);
  runner.reply({"sbatch", "--parsable", "/runs/c/job.sbatch"}, {0, "Submitted batch job 12\n", ""});
  CHECK_THROWS_WITH_AS(slurm.submit("/runs/c/job.sbatch"),
                       R"(sbatch --parsable /runs/c/job.sbatch printed "Submitted batch job 12", not a job id)",
                       SlurmError);
}

TEST_CASE("job() reads a running job from scontrol show job -o") {
  FakeRunner runner;
  runner.reply({"scontrol", "show", "job", "-o", "1234"}, {0, kRunningJob, ""});
  std::optional<JobInfo> job = SlurmClient(runner).job("1234");
  REQUIRE(job);
  CHECK(job->job_id == "1234");
  CHECK(job->state == "RUNNING");
  CHECK(job->reason == "None");
  CHECK(job->restart_count == 1);
  CHECK(job->run_time == "00:02:13");
  CHECK(job->node_list == "n[1-2]");
  CHECK(job->exit_code == "0:0");
  CHECK(runner.calls.size() == 1);
}

TEST_CASE("job() reads a pending job, which has no nodes yet") {
  FakeRunner runner;
  runner.reply({"scontrol", "show", "job", "-o", "1235"}, {0, kPendingJob, ""});
  std::optional<JobInfo> job = SlurmClient(runner).job("1235");
  REQUIRE(job);
  CHECK(job->state == "PENDING");
  CHECK(job->reason == "BeginTime");
  CHECK(job->restart_count == 2);
  CHECK(job->run_time == "00:00:00");
  CHECK(job->node_list == "");
}

TEST_CASE("job() falls back to squeue when scontrol does not know the id") {
  FakeRunner runner;
  runner.reply({"scontrol", "show", "job", "-o", "1236"}, kInvalidJobId);
  runner.reply({"squeue", "-h", "-j", "1236", "-o", "%i|%T|%r|%M|%N"}, {0, "1236|COMPLETING|None|1:02:03|n1\n", ""});
  std::optional<JobInfo> job = SlurmClient(runner).job("1236");
  REQUIRE(job);
  CHECK(job->job_id == "1236");
  CHECK(job->state == "COMPLETING");
  CHECK(job->reason == "None");
  CHECK(job->restart_count == 0);
  CHECK(job->run_time == "1:02:03");
  CHECK(job->node_list == "n1");
  CHECK(job->exit_code == "");
}

TEST_CASE("job() returns nullopt when neither scontrol nor squeue knows the id") {
  FakeRunner runner;
  runner.reply({"scontrol", "show", "job", "-o", "999"}, kInvalidJobId);
  runner.reply({"squeue", "-h", "-j", "999", "-o", "%i|%T|%r|%M|%N"}, kInvalidJobId);
  runner.reply({"scontrol", "show", "job", "-o", "998"}, kInvalidJobId);
  runner.reply({"squeue", "-h", "-j", "998", "-o", "%i|%T|%r|%M|%N"}, {0, "", ""});
  SlurmClient slurm(runner);
  CHECK_FALSE(slurm.job("999"));
  CHECK_FALSE(slurm.job("998"));
  CHECK(runner.calls.size() == 4);
}

TEST_CASE("job() raises SlurmError when the controller cannot be asked") {
  FakeRunner runner;
  runner.reply({"scontrol", "show", "job", "-o", "1234"},
               {1, "", "slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n"});
  CHECK_THROWS_WITH_AS(SlurmClient(runner).job("1234"),
                       "scontrol show job -o 1234 failed (exit 1): "
                       "slurm_load_jobs error: Unable to contact slurm controller (connect failure)",
                       SlurmError);
  CHECK(runner.calls.size() == 1);
}

TEST_CASE("cancel runs scancel and reports its failure") {
  FakeRunner runner;
  runner.reply({"scancel", "1234"}, {0, "", ""});
  runner.reply({"scancel", "77"}, {1, "", "scancel: error: Kill job error on job id 77: Invalid job id specified\n"});
  SlurmClient slurm(runner);
  slurm.cancel("1234");
  CHECK(runner.calls == std::vector<Argv>{{"scancel", "1234"}});
  CHECK_THROWS_WITH_AS(slurm.cancel("77"),
                       "scancel 77 failed (exit 1): "
                       "scancel: error: Kill job error on job id 77: Invalid job id specified",
                       SlurmError);
}

TEST_CASE("config() reads Key = Value lines and skips headings") {
  FakeRunner runner;
  runner.reply({"scontrol", "show", "config"}, {0, kConfig, ""});
  std::map<std::string, std::string> config = SlurmClient(runner).config();
  CHECK(config == std::map<std::string, std::string>{
                      {"AccountingStorageBackupHost", "(null)"},
                      {"AccountingStorageTRES", "cpu,mem,energy,node,billing,fs/disk,vmem,pages"},
                      {"KillWait", "10 sec"},
                      {"MaxArraySize", "5000"},
                      {"MpiParams", "ports=12000-12999"},
                      {"PMIxTimeout", "300"},
                  });
}

TEST_CASE("max_array_size() reads MaxArraySize, or SLURM's default when it is not listed") {
  FakeRunner listed;
  listed.reply({"scontrol", "show", "config"}, {0, kConfig, ""});
  CHECK(SlurmClient(listed).max_array_size() == 5000);

  FakeRunner unlisted;
  unlisted.reply({"scontrol", "show", "config"},
                 {0, "Configuration data as of 2026-11-22T03:44:13\nKillWait = 10 sec\n", ""});
  CHECK(SlurmClient(unlisted).max_array_size() == 1001);

  FakeRunner garbled;
  garbled.reply({"scontrol", "show", "config"}, {0, "MaxArraySize = lots\n", ""});
  CHECK_THROWS_WITH_AS(SlurmClient(garbled).max_array_size(),
                       "scontrol show config: MaxArraySize is not an integer: lots", SlurmError);

  FakeRunner down;
  down.reply({"scontrol", "show", "config"},
             {1, "", "slurm_load_ctl_conf error: Unable to contact slurm controller\n"});
  CHECK_THROWS_AS(SlurmClient(down).max_array_size(), SlurmError);
}

TEST_CASE("array_tasks() reads every task of the arrays from one padded squeue -O call") {
  const std::string listed = array_task_line("143_0", "COMPLETED", "0", "None") +
                             array_task_line("143_1", "RUNNING", "1", "None") +
                             array_task_line("143_2", "PENDING", "0", "JobArrayTaskLimit") +
                             array_task_line("151", "RUNNING", "0", "None") +  // not an array task: left out
                             array_task_line("150_12", "FAILED", "2", "NonZeroExitCode");
  FakeRunner runner;
  runner.reply(array_tasks_argv("143,150,151"), {0, listed, ""});
  CHECK(described(SlurmClient(runner).array_tasks({"143", "150", "151"})) ==
        std::vector<std::string>{
            "143_0 COMPLETED None restarts=0",
            "143_1 RUNNING None restarts=1",
            "143_2 PENDING JobArrayTaskLimit restarts=0",
            "150_12 FAILED NonZeroExitCode restarts=2",
        });
  CHECK(runner.calls == std::vector<Argv>{array_tasks_argv("143,150,151")});
}

TEST_CASE("array_tasks() gives nothing for arrays slurmctld no longer knows, or for no arrays") {
  FakeRunner runner;
  runner.reply(array_tasks_argv("143"), kInvalidJobId);
  SlurmClient slurm(runner);
  CHECK(slurm.array_tasks({"143"}).empty());
  CHECK(runner.calls.size() == 1);
  CHECK(slurm.array_tasks({}).empty());
  CHECK(runner.calls.size() == 1);
}

TEST_CASE("array_tasks() raises SlurmError when squeue fails or prints something else") {
  FakeRunner down;
  down.reply(array_tasks_argv("143"),
             {1, "", "squeue: error: Unable to contact slurm controller (connect failure)\n"});
  CHECK_THROWS_WITH_AS(SlurmClient(down).array_tasks({"143"}),
                       "squeue -h -r -t all -j 143 -O JobArrayID:40|,State:24|,RestartCnt:8|,Reason:80 failed "
                       "(exit 1): squeue: error: Unable to contact slurm controller (connect failure)",
                       SlurmError);

  FakeRunner garbled;
  garbled.reply(array_tasks_argv("143"), {0, "143_x|RUNNING|0|None\n", ""});
  CHECK_THROWS_WITH_AS(SlurmClient(garbled).array_tasks({"143"}),
                       "squeue: unexpected array task line: 143_x|RUNNING|0|None", SlurmError);
  FakeRunner unpadded;
  unpadded.reply(array_tasks_argv("143"), {0, "143_0|RUNNING|0\n", ""});
  CHECK_THROWS_WITH_AS(SlurmClient(unpadded).array_tasks({"143"}),
                       "squeue: expected 4 '|'-separated fields, got: 143_0|RUNNING|0", SlurmError);
}

TEST_CASE("ProcessRunner captures stdout, stderr and the exit code") {
  CommandResult result = trainctl::ProcessRunner().run({"/bin/sh", "-c", "echo out; echo err >&2; exit 3"});
  CHECK(result.exit_code == 3);
  CHECK(result.out == "out\n");
  CHECK(result.err == "err\n");
}

TEST_CASE("ProcessRunner reports a missing or unexecutable program like a shell would") {
  CommandResult missing = trainctl::ProcessRunner().run({"trainctl-no-such-program", "--flag"});
  CHECK(missing.exit_code == 127);
  CHECK(missing.out == "");
  CHECK(missing.err == "trainctl-no-such-program: not found");

  CommandResult not_executable = trainctl::ProcessRunner().run({"/etc/passwd"});
  CHECK(not_executable.exit_code == 126);
  CHECK(not_executable.err == "/etc/passwd: Permission denied");
}

TEST_CASE("ProcessRunner reports a signal as 128 + its number and gives the child no stdin") {
  CHECK(trainctl::ProcessRunner().run({"/bin/sh", "-c", "kill -TERM $$"}).exit_code == 128 + 15);
  CommandResult cat = trainctl::ProcessRunner().run({"cat"});
  CHECK(cat.exit_code == 0);
  CHECK(cat.out == "");
}

TEST_CASE("ProcessRunner does not deadlock when both pipes fill up") {
  // Far beyond a pipe's 64 KiB buffer on both streams, stderr first.
  CommandResult result = trainctl::ProcessRunner().run(
      {"/bin/sh", "-c", "head -c 1000000 /dev/zero >&2; head -c 1000000 /dev/zero; head -c 1000000 /dev/zero >&2"});
  CHECK(result.exit_code == 0);
  CHECK(result.out.size() == 1000000);
  CHECK(result.err.size() == 2000000);
}
