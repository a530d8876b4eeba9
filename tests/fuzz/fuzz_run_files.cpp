// libFuzzer targets for the readers of a run directory's files, which `status`, `notify`, `eval`
// and the runtime read back, whoever wrote them: fuzz_run_record (run.json, load_run_record) and
// fuzz_metrics (metrics.jsonl, read_metrics_file), a build of this file each (FUZZ_RUN_RECORD
// selects the first). Each input is written as that file in a private run directory. A
// DamagedRunFile is the expected answer to a damaged file; any other exception, a crash or a
// sanitizer report is a finding, and so is a record read that does not read back as itself once
// written again (in memory: the fuzzer writes no more than the input to disk).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <string>
#include <string_view>

#include "metrics_file.h"
#include "private_directory.h"
#include "run_files.h"
#include "run_layout.h"
#include "run_record.h"

namespace {

[[noreturn]] void finding(const char* what) {
  std::fprintf(stderr, "fuzz_run_files: %s\n", what);
  std::abort();
}

#ifdef FUZZ_RUN_RECORD
void read_back(const trainctl::RunLayout& run, std::string_view bytes,
               const trainctl::fuzz::PrivateDirectory& directory) {
  directory.write(std::string(trainctl::run_file::kRunRecord), bytes);
  const std::optional<trainctl::RunRecord> record = trainctl::load_run_record(run);
  if (!record) finding("run.json was written, and load_run_record found none");
  // As save_run_record writes it (dump throws on what JSON cannot hold), and read back.
  const trainctl::Json json = trainctl::run_record_json(*record);
  if (trainctl::run_record_json(trainctl::run_record_of(trainctl::Json::parse(json.dump(2)), "again")) != json)
    finding("a run record written and read again differs");
}
#else
void read_back(const trainctl::RunLayout& run, std::string_view bytes,
               const trainctl::fuzz::PrivateDirectory& directory) {
  directory.write(std::string(trainctl::run_file::kMetrics), bytes);
  for (const trainctl::MetricsLine& line : trainctl::read_metrics_file(run.metrics())) {
    if (!line.train) continue;
    const std::optional<trainctl::MetricsLine> again =
        trainctl::parse_metrics_line(trainctl::metrics_line(*line.train));
    if (!again || again->step != line.step) finding("a step record written again does not read as its step");
  }
}
#endif

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const trainctl::fuzz::PrivateDirectory directory("trainctl-fuzz-run-files");
  const trainctl::RunLayout run(directory.path().string());
  try {
    read_back(run, std::string_view(reinterpret_cast<const char*>(data), size), directory);
  } catch (const trainctl::DamagedRunFile&) {
    // The readers' answer to a damaged file.
  } catch (const std::exception& error) {
    std::fprintf(stderr, "fuzz_run_files: escaped the reader: %s\n", error.what());
    std::abort();
  }
  return 0;
}
