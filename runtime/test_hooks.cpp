// Test hooks: see test_hooks.h.
#include "test_hooks.h"

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "signals.h"

namespace trainctl {

namespace {

const char* environment(const char* name) { return std::getenv(name); }

// The entry of TRAINCTL_TEST_PAUSE_IN's comma-separated list that names `phase` (at `step`), if
// any, in this array task (TRAINCTL_TEST_PAUSE_TASK, when set, names the one task that pauses).
std::optional<std::string> requested_pause(std::string_view phase, int64_t step) {
  const char* list = environment("TRAINCTL_TEST_PAUSE_IN");
  if (list == nullptr) return std::nullopt;
  const char* only_task = environment("TRAINCTL_TEST_PAUSE_TASK");
  const char* this_task = environment("SLURM_ARRAY_TASK_ID");
  if (only_task != nullptr && (this_task == nullptr || std::string_view(only_task) != this_task)) return std::nullopt;
  std::string wanted = phase == "startup" ? std::string(phase) : fmt::format("{}@{}", phase, step);
  std::string_view rest(list);
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    if (rest.substr(0, comma) == wanted) return wanted;
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
  }
  return std::nullopt;
}

}  // namespace

int64_t test_signal_step() {
  const char* step = environment("TRAINCTL_TEST_SIGNAL_AT_STEP");
  return step != nullptr ? std::atoll(step) : int64_t{-1};
}

bool test_save_initial() { return environment("TRAINCTL_TEST_SAVE_INITIAL") != nullptr; }

void test_pause_point(const std::string& run_dir, std::string_view phase, int64_t step) {
  const std::optional<std::string> entry = requested_pause(phase, step);
  if (!entry) return;
  const std::filesystem::path marker = std::filesystem::path(run_dir) / fmt::format("test-paused.{}", *entry);
  if (std::filesystem::exists(marker)) return;
  std::ofstream(marker) << step << '\n';
  fmt::print(stderr, "trainctl-runtime: test hook: paused in {} at step {} until a stop signal\n", phase, step);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(2);
  while (received_stop_signal() == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

void test_midway_through_save(const std::string& run_dir, int64_t step) {
  const char* kill_step = environment("TRAINCTL_TEST_KILL_DURING_SAVE");
  if (kill_step != nullptr && std::atoll(kill_step) == step) std::raise(SIGKILL);
  test_pause_point(run_dir, "save", step);
}

}  // namespace trainctl
