// Tests for child processes (common/child_process.cpp): the three ways a child ends up (exit N,
// killed by signal N, could not be started) kept apart, even from a program that exits 127
// itself; the environment, workdir, input and output file a program gets; a function in a process
// group of its own, signalled as a group; and taking the first of several children that ended.
#include <doctest/doctest.h>

#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "child_process.h"

using trainctl::CannotStart;
using trainctl::Child;
using trainctl::Command;
using trainctl::ProcessEnd;

namespace {

namespace fs = std::filesystem;

// A directory of its own in the temp directory, removed with the object.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "trainctl-test-child.XXXXXX").string();
    REQUIRE(mkdtemp(pattern.data()) != nullptr);
    path_ = pattern;
  }
  ~TempDir() { fs::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::string text_of(const fs::path& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

ProcessEnd run(const std::vector<std::string>& argv) { return trainctl::start({.argv = argv}).wait(); }

}  // namespace

TEST_CASE("a child exits with its code or is killed by a signal, and a program exiting 127 is no failed start") {
  CHECK(run({"sh", "-c", "exit 3"}) == ProcessEnd::exited(3));
  CHECK(run({"sh", "-c", "exit 127"}) == ProcessEnd::exited(127));
  CHECK(run({"sh", "-c", "kill -KILL $$"}) == ProcessEnd::killed(SIGKILL));
  CHECK(ProcessEnd::killed(SIGKILL).shell_code() == 137);
  CHECK(ProcessEnd::exited(3).description() == "exited with code 3");
  CHECK(ProcessEnd::killed(SIGKILL).description() == "was killed by signal 9 (Killed)");
}

TEST_CASE("a program that cannot be started is CannotStart, with the reason and a shell's code") {
  CHECK_THROWS_WITH_AS(run({"trainctl-no-such-program"}), "cannot run trainctl-no-such-program: No such file or directory",
                       CannotStart);
  try {
    run({"/etc/passwd"});
    FAIL("/etc/passwd ran");
  } catch (const CannotStart& error) {
    CHECK_FALSE(error.not_found());
    CHECK(error.shell_code() == 126);
    CHECK(std::string(error.what()) == "cannot run /etc/passwd: Permission denied");
  }
  CHECK_THROWS_WITH_AS(trainctl::start({.argv = {"true"}, .workdir = "/nonexistent/dir"}),
                       "cannot enter the workdir /nonexistent/dir to run true: No such file or directory", CannotStart);
  CHECK_THROWS_AS(run({}), std::invalid_argument);
}

TEST_CASE("a program gets its environment, workdir and output file; stdin from /dev/null when asked") {
  const TempDir dir;
  const fs::path output = dir.path() / "out.txt";
  const Command command{.argv = {"sh", "-c", "echo \"$ONLY-${HOME:-unset}\"; pwd; echo err >&2; cat"},
                        .environment = std::vector<std::string>{"ONLY=set", "PATH=/usr/bin:/bin"},
                        .workdir = dir.path().string(),
                        .output_file = output.string(),
                        .placement = {.stdin_from_null = true}};
  CHECK(trainctl::start(command).wait() == ProcessEnd::exited(0));
  CHECK(text_of(output) == "set-unset\n" + fs::canonical(dir.path()).string() + "\nerr\n");
}

TEST_CASE("a program reads its stdin from the input file") {
  const TempDir dir;
  const fs::path input = dir.path() / "in.json";
  const fs::path output = dir.path() / "out.txt";
  std::ofstream(input) << "{\"event\": \"completed\"}\n";
  const Command command{.argv = {"cat"}, .output_file = output.string(), .input_file = input.string()};
  CHECK(trainctl::start(command).wait() == ProcessEnd::exited(0));
  CHECK(text_of(output) == "{\"event\": \"completed\"}\n");
  CHECK_THROWS_AS(trainctl::start({.argv = {"cat"}, .input_file = (dir.path() / "absent").string()}), std::system_error);
}

TEST_CASE("the output of a captured run comes back whole, stdout and stderr apart") {
  const trainctl::CapturedRun captured = trainctl::run_capturing({"sh", "-c", "echo out; echo err >&2; exit 4"});
  CHECK(captured.end == ProcessEnd::exited(4));
  CHECK(captured.out == "out\n");
  CHECK(captured.err == "err\n");
}

TEST_CASE("a function runs in a child, in a group of its own when asked, which a signal reaches") {
  CHECK(trainctl::start_function({}, [] { return 5; }).wait() == ProcessEnd::exited(5));

  const Child group = trainctl::start_function({.own_process_group = true}, [] {
    pause();
    return 0;
  });
  CHECK(getpgid(group.pid()) == group.pid());
  group.signal(SIGUSR1);
  CHECK(group.wait() == ProcessEnd::killed(SIGUSR1));
}

TEST_CASE("take_ended takes the children that ended, one at a time, and leaves those that run") {
  std::vector<Child> children{trainctl::start({.argv = {"sleep", "30"}}), trainctl::start({.argv = {"sh", "-c", "exit 2"}})};
  const pid_t sleeper = children.front().pid();
  std::optional<std::pair<Child, ProcessEnd>> ended;
  while (!(ended = trainctl::take_ended(children))) usleep(10'000);
  CHECK(ended->second == ProcessEnd::exited(2));
  REQUIRE(children.size() == 1);
  CHECK(children.front().pid() == sleeper);
  CHECK_FALSE(trainctl::take_ended(children).has_value());
  children.front().signal(SIGKILL);
  CHECK(children.front().wait() == ProcessEnd::killed(SIGKILL));
}
