// libFuzzer target for the config reader: each input is a config file's text, read the way
// `trainctl validate` reads it (load_config: TOML with source regions, unknown tables, [job],
// [notify], the training tables or [program] and [params], [sweep] and the sweep's task configs), and a
// program's command filled in as each rank fills it, with its params.json. A ConfigError is the expected
// answer to bad input (exit 2); any other exception, a crash or a sanitizer report is a finding.
// The text goes through a memfd, so load_config reads a real path and nothing touches a disk.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "config_file.h"
#include "config_reader.h"
#include "program_spec.h"
#include "sweeps/sweep.h"

namespace {

// Task configs checked per input: enough to reach clashes between swept values, few enough that
// a sweep of kMaxSweepTasks (the benchmarks' case) keeps the fuzzer fast.
constexpr int64_t kMaxTasksChecked = 64;

class ConfigMemoryFile {
 public:
  ConfigMemoryFile() : fd_(memfd_create("fuzz-config.toml", MFD_CLOEXEC)) {
    if (fd_ < 0) fail("memfd_create");
  }
  ~ConfigMemoryFile() { close(fd_); }
  ConfigMemoryFile(const ConfigMemoryFile&) = delete;
  ConfigMemoryFile& operator=(const ConfigMemoryFile&) = delete;

  // Replaces the contents; returns a path that opens them.
  std::string hold(const uint8_t* data, size_t size) {
    if (ftruncate(fd_, 0) != 0) fail("ftruncate");
    for (size_t written = 0; written < size;) {
      const ssize_t count = pwrite(fd_, data + written, size - written, static_cast<off_t>(written));
      if (count <= 0) fail("pwrite");
      written += static_cast<size_t>(count);
    }
    return fmt::format("/proc/self/fd/{}", fd_);
  }

 private:
  [[noreturn]] static void fail(const char* call) {
    std::perror(call);
    std::abort();
  }
  int fd_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static ConfigMemoryFile file;
  try {
    const trainctl::Config config = trainctl::load_config(file.hold(data, size));
    if (config.program) {
      // Once the config is read, filling in the placeholders cannot fail (given a step budget, as
      // a scheduled sweep's batch script gives one: a config reading it without a schedule is
      // refused).
      trainctl::program_argv(*config.program, trainctl::RunLayout("/scratch/runs/fuzz"), 1);
      trainctl::params_json_text(*config.program);
    }
    if (config.sweep && trainctl::sweep_task_count(*config.sweep) <= kMaxTasksChecked) {
      const std::vector<trainctl::SweepTask> tasks = trainctl::expand_sweep(*config.sweep);
      trainctl::for_each_task_config(
          config.table, *config.sweep, tasks,
          [&](const toml::table& table) { trainctl::check_config_table(table, config.path); },
          [](const trainctl::SweepTask&, toml::table&) {});
    }
  } catch (const trainctl::ConfigError&) {
    // The reader's answer to a bad config.
  } catch (const std::exception& error) {
    std::fprintf(stderr, "fuzz_config: escaped the config reader: %s\n", error.what());
    std::abort();
  }
  return 0;
}
