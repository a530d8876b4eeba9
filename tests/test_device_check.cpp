// Tests for the node check's parts that need no MPI: the device check (kernels/device_check.h) on
// the CPU and on the CPU implementation of CUDA (TRAINCTL_CUDA_BACKEND, the backend's path, which
// meson passes where it is built): it passes on a sound device; it fails naming the element where
// the test hook changes the GEMM's output in the device's memory, by exactly what it changed; and
// on CUDA it fails when the free memory (before the GEMM takes its workspace) is below the run's
// need, while the CPU, whose memory is the host's, has none to check. Also what the ranks record for the batch script (common/
// node_records.h): bad.nodes lines appended whole with their reasons on one line, rank.nodes/R,
// TRAINCTL_NODE_CHECK_TIMEOUT and the test hook's list of nodes.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "bad_input.h"
#include "count_text.h"
#include "device.h"
#include "device_check.h"
#include "node_records.h"

using trainctl::check_device;
using trainctl::Device;
using trainctl::DeviceCheck;

namespace {

namespace fs = std::filesystem;

// "GEMM differs from the CPU's (worst element 17: X vs Y)": the element, and X - Y.
void check_perturbed(const std::optional<std::string>& failure) {
  REQUIRE(failure);
  const std::string prefix = "GEMM differs from the CPU's (worst element 17: ";
  REQUIRE(failure->starts_with(prefix));
  std::istringstream numbers(failure->substr(prefix.size()));
  double computed = 0, reference = 0;
  std::string versus;
  numbers >> computed >> versus >> reference;
  CHECK(versus == "vs");
  CHECK(computed - reference == 2.25);
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

TEST_CASE("the CPU passes the device check and fails it where the test hook changes its GEMM's output") {
  const Device& cpu = trainctl::cpu_device();
  CHECK(check_device(cpu, {}) == std::nullopt);
  check_perturbed(check_device(cpu, {.needed_bytes = std::nullopt, .perturb_gemm = true}));
  // Host memory: the job's memory request bounds it, not the check.
  CHECK(cpu.info.free_memory_bytes() == std::nullopt);
  CHECK(check_device(cpu, {.needed_bytes = INT64_MAX}) == std::nullopt);
}

TEST_CASE("the CPU implementation of CUDA passes, fails where hooked, and fails on too little free memory") {
  if (std::getenv("TRAINCTL_CUDA_BACKEND") == nullptr) {
    MESSAGE("skipped: this build has no CPU implementation of CUDA");
    return;
  }
  const Device& cuda = *trainctl::find_device("cuda");
  cuda.info.bind_local(0, 1);
  // The memory is checked before the GEMM takes cuBLASLt's workspace, which the run's estimate
  // counts: a run that needs all of the free memory passes.
  const std::optional<int64_t> unused = cuda.info.free_memory_bytes();
  REQUIRE(unused);
  CHECK(check_device(cuda, {.needed_bytes = *unused}) == std::nullopt);
  CHECK(*cuda.info.free_memory_bytes() < *unused);
  CHECK(check_device(cuda, {.needed_bytes = int64_t{1} << 30}) == std::nullopt);
  check_perturbed(check_device(cuda, {.needed_bytes = int64_t{1} << 30, .perturb_gemm = true}));
  // Its devices have an H100's 80 GiB, of which the table's own scratch holds a little.
  const std::optional<int64_t> free = cuda.info.free_memory_bytes();
  REQUIRE(free);
  CHECK(*free <= int64_t{80} << 30);
  CHECK(*free > int64_t{79} << 30);
  CHECK(check_device(cuda, {.needed_bytes = int64_t{100} << 30}) ==
        trainctl::size_text(*free) + " free, the run needs 100.0 GiB");
  cuda.info.unbind();
}

TEST_CASE("failures name the device as the rank binds it") {
  CHECK(trainctl::device_label("cpu", 3) == "cpu");
  CHECK(trainctl::device_label("cuda", 1) == "cuda device 1");
}

TEST_CASE("bad.nodes takes one whole line per blame; rank.nodes/R the rank's node") {
  const fs::path dir = fs::temp_directory_path() / fs::path("trainctl-node-records-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const trainctl::RunLayout run(dir.string());
  trainctl::blame_node(run, "n2", "node check: rank 1\t(cpu):\nGEMM differs");
  trainctl::blame_node(run, "n2", "node check: rank 3 did not reach the all-reduce within 300 s");
  CHECK(read_file(run.bad_nodes()) ==
        "n2\tnode check: rank 1 (cpu): GEMM differs\n"
        "n2\tnode check: rank 3 did not reach the all-reduce within 300 s\n");
  trainctl::record_rank_node(run, 1, "n2");
  CHECK(read_file(run.rank_nodes() + "/1") == "n2\n");
  // A run directory that is not there is not made.
  CHECK_THROWS(trainctl::record_rank_node(trainctl::RunLayout((dir / "missing").string()), 0, "n1"));
  fs::remove_all(dir);
}

TEST_CASE("TRAINCTL_NODE_CHECK_TIMEOUT and TRAINCTL_TEST_FAIL_NODE_CHECK") {
  unsetenv("TRAINCTL_NODE_CHECK_TIMEOUT");
  CHECK(trainctl::node_check_timeout_seconds() == std::nullopt);
  setenv("TRAINCTL_NODE_CHECK_TIMEOUT", "0", 1);
  CHECK(trainctl::node_check_timeout_seconds() == std::nullopt);
  setenv("TRAINCTL_NODE_CHECK_TIMEOUT", "300", 1);
  CHECK(trainctl::node_check_timeout_seconds() == 300);
  setenv("TRAINCTL_NODE_CHECK_TIMEOUT", "5m", 1);
  CHECK_THROWS_AS(trainctl::node_check_timeout_seconds(), trainctl::BadInput);
  unsetenv("TRAINCTL_NODE_CHECK_TIMEOUT");

  CHECK(!trainctl::test_fails_node_check("n1"));
  setenv("TRAINCTL_TEST_FAIL_NODE_CHECK", "n1,n3", 1);
  CHECK(trainctl::test_fails_node_check("n1"));
  CHECK(trainctl::test_fails_node_check("n3"));
  CHECK(!trainctl::test_fails_node_check("n2"));
  CHECK(!trainctl::test_fails_node_check("n"));
  unsetenv("TRAINCTL_TEST_FAIL_NODE_CHECK");
}
