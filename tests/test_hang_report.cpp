// Tests for hang reports (common/hang_report.h): the first lines the runtime
// (runtime/rank_activity.h) and trainctl-launch (program/program_hang_report.h) write, field by
// field, with integers formatted by hand; what the trainer's and Comm's transitions leave for the
// report (a collective's wait and its return to the phase around it); the reports written for
// real on SIGQUIT, first line and stack, while the process goes on; and TRAINCTL_TEST_HANG's
// requests (runtime/test_hooks.h), those it takes and those it refuses.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "child_process.h"
#include "hang_report.h"
#include "program_hang_report.h"
#include "rank_activity.h"
#include "test_hooks.h"

using trainctl::Collective;
using trainctl::Phase;
using trainctl::RankActivity;
using trainctl::SignalSafeText;

namespace {

namespace fs = std::filesystem;

std::string runtime_line(int64_t rank, const char* node, const RankActivity& activity) {
  SignalSafeText line;
  trainctl::format_activity_line(line, rank, node, activity);
  return std::string(line.view());
}

std::vector<std::string> lines_of(const fs::path& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

struct TemporaryRun {
  fs::path dir = fs::temp_directory_path() / fs::path("trainctl-hang-" + std::to_string(getpid()));
  TemporaryRun() {
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~TemporaryRun() { fs::remove_all(dir); }
};

}  // namespace

TEST_CASE("integers, tenths and what does not fit") {
  SignalSafeText text;
  text.integer(0).text(" ").integer(-42).text(" ").integer(std::numeric_limits<int64_t>::min()).text(" ");
  text.tenths(123).text(" ").tenths(7).text(" ").tenths(-5);
  CHECK(text.view() == "0 -42 -9223372036854775808 12.3 0.7 -0.5");
  SignalSafeText full;
  for (int i = 0; i < 100; ++i) full.text("0123456789");
  CHECK(full.view().size() == 512);
  CHECK(std::string(full.c_str()).size() == 512);
}

TEST_CASE("the runtime's first line") {
  CHECK(runtime_line(1, "n2", {.step = 3, .phase = Phase::kForward}) ==
        "rank=1 node=n2 step=3 phase=forward collective=- waited_s=-");
  CHECK(runtime_line(0, "n1", {.step = 3, .phase = Phase::kBackward, .collective = Collective::kReduceScatter,
                               .waited_tenths = 123}) ==
        "rank=0 node=n1 step=3 phase=collective collective=reduce-scatter waited_s=12.3");
  CHECK(runtime_line(4, "gpu-17", {.step = -1, .phase = Phase::kNodeCheck, .collective = Collective::kAllReduce}) ==
        "rank=4 node=gpu-17 step=- phase=collective collective=all-reduce waited_s=0.0");
  CHECK(runtime_line(0, "n1", {}) == "rank=0 node=n1 step=- phase=startup collective=- waited_s=-");
  for (const char* phase : {"startup", "node-check", "data", "forward", "backward", "optimizer", "eval", "checkpoint"})
    CHECK(trainctl::phase_name(*trainctl::phase_named(phase)) == std::string(phase));
  CHECK(!trainctl::phase_named("collective"));
}

TEST_CASE("a collective's wait shows while it lasts, then the phase around it") {
  trainctl::note_step(7);
  trainctl::note_phase(Phase::kOptimizer);
  {
    const trainctl::InCollective waiting(Collective::kAllGather);
    const RankActivity inside = trainctl::current_activity();
    CHECK(inside.collective == Collective::kAllGather);
    CHECK(inside.waited_tenths >= 0);
    CHECK(runtime_line(0, "n1", inside).starts_with("rank=0 node=n1 step=7 phase=collective collective=all-gather"));
  }
  CHECK(runtime_line(0, "n1", trainctl::current_activity()) ==
        "rank=0 node=n1 step=7 phase=optimizer collective=- waited_s=-");
}

TEST_CASE("the runtime writes hang/R on SIGQUIT and goes on") {
  const TemporaryRun run;
  const trainctl::RunLayout layout(run.dir.string());
  trainctl::install_hang_report_handler();
  // Nowhere to write yet: nothing written, and the process lives.
  std::raise(SIGQUIT);
  CHECK(!fs::exists(layout.hang()));
  trainctl::report_hangs_to(layout, 2, "n3");
  trainctl::note_step(5);
  trainctl::note_phase(Phase::kCheckpoint);
  std::raise(SIGQUIT);
  const std::vector<std::string> report = lines_of(layout.hang() + "/2");
  REQUIRE(report.size() > 2);
  CHECK(report[0] == "rank=2 node=n3 step=5 phase=checkpoint collective=- waited_s=-");
  CHECK(report[1] == "stack:");
  // This test's own frames: its binary, by name.
  CHECK(std::any_of(report.begin() + 2, report.end(),
                    [](const std::string& frame) { return frame.find("test_hang_report") != std::string::npos; }));
}

TEST_CASE("trainctl-launch's first line, and its report of a program on SIGQUIT") {
  SignalSafeText line;
  trainctl::format_program_line(line, 0, "n1", "program", 4242, "S", "do_wait");
  CHECK(line.view() == "rank=0 node=n1 phase=program pid=4242 state=S wchan=do_wait");
  SignalSafeText unknown;
  trainctl::format_program_line(unknown, 3, "n2", "node-check", 0, "-", "-");
  CHECK(unknown.view() == "rank=3 node=n2 phase=node-check pid=- state=- wchan=-");

  const TemporaryRun run;
  const trainctl::RunLayout layout(run.dir.string());
  trainctl::install_program_hang_report(layout, 1, "n2");
  const trainctl::Child sleeper = trainctl::start({.argv = {"sleep", "60"}});
  trainctl::report_on_process(sleeper.pid(), "program");
  // Asleep once it has said so in /proc: poll, a new process runs first.
  std::vector<std::string> report;
  for (int tries = 0; tries < 1000; ++tries) {
    std::raise(SIGQUIT);
    report = lines_of(layout.hang() + "/1");
    if (!report.empty() && report[0].find(" state=S ") != std::string::npos) break;
    usleep(10'000);
  }
  sleeper.signal(SIGKILL);
  sleeper.wait();
  REQUIRE(report.size() >= 3);
  const std::string expected = "rank=1 node=n2 phase=program pid=" + std::to_string(sleeper.pid()) + " state=S wchan=";
  CHECK(report[0].starts_with(expected));
  CHECK(report[0].size() > expected.size());
  CHECK(report[0].find(' ', expected.size()) == std::string::npos);
  CHECK(report[1] == "stack:");
  // The kernel's stack where this test may read it (root), else why not.
  if (geteuid() != 0) CHECK(report[2].find("needs root") != std::string::npos);
}

TEST_CASE("TRAINCTL_TEST_HANG's requests") {
  const auto request = trainctl::parse_hang_request("1:forward@3");
  REQUIRE(request);
  CHECK(request->rank == 1);
  CHECK(request->phase == Phase::kForward);
  CHECK(request->step == 3);
  const auto before_training = trainctl::parse_hang_request("0:node-check");
  REQUIRE(before_training);
  CHECK(before_training->phase == Phase::kNodeCheck);
  CHECK(!before_training->step);
  CHECK(trainctl::parse_hang_request("2:startup"));
  CHECK(trainctl::parse_hang_request("0:checkpoint@40"));
  for (const char* refused : {"1:forward", "1:node-check@0", "x:forward@3", "1:collective@3", "1:forward@",
                              "1forward@3", "-1:forward@3", "1:forward@3x", ":forward@3", "1:sideways@3", ""})
    CHECK_MESSAGE(!trainctl::parse_hang_request(refused), refused);
}
