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

#include "count_text.h"
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

std::optional<HangRequest> requested_hang() {
  const char* text = environment("TRAINCTL_TEST_HANG");
  if (text == nullptr) return std::nullopt;
  std::optional<HangRequest> request = parse_hang_request(text);
  if (!request)
    fmt::print(stderr, "trainctl-runtime: test hook: TRAINCTL_TEST_HANG=\"{}\" is not RANK:PHASE@STEP; ignored\n",
               text);
  return request;
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

std::optional<HangRequest> parse_hang_request(std::string_view text) {
  const size_t colon = text.find(':');
  if (colon == std::string_view::npos) return std::nullopt;
  const std::optional<int64_t> rank = parse_count(text.substr(0, colon));
  const std::string_view phase_and_step = text.substr(colon + 1);
  const size_t at = phase_and_step.find('@');
  const std::optional<Phase> phase = phase_named(phase_and_step.substr(0, at));
  if (!rank || !phase) return std::nullopt;
  const bool before_training = *phase == Phase::kStartup || *phase == Phase::kNodeCheck;
  if (before_training)
    return at == std::string_view::npos ? std::optional(HangRequest{*rank, *phase, {}}) : std::nullopt;
  if (at == std::string_view::npos) return std::nullopt;
  const std::optional<int64_t> step = parse_count(phase_and_step.substr(at + 1));
  return step ? std::optional(HangRequest{*rank, *phase, step}) : std::nullopt;
}

void test_hang_point(const std::string& run_dir, int64_t rank, Phase phase, int64_t step) {
  static const std::optional<HangRequest> request = requested_hang();
  if (!request || request->rank != rank || request->phase != phase || (request->step && *request->step != step)) return;
  const std::string entry =
      request->step ? fmt::format("{}@{}", phase_name(phase), step) : std::string(phase_name(phase));
  const std::filesystem::path marker = std::filesystem::path(run_dir) / fmt::format("test-hung.{}.{}", rank, entry);
  if (std::filesystem::exists(marker)) return;
  std::ofstream(marker) << step << '\n';
  fmt::print(stderr, "trainctl-runtime: test hook: rank {} hangs in {}\n", rank, entry);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(10);
  while (std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(100));
}

}  // namespace trainctl
