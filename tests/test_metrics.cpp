// Tests for run metrics (runtime/metrics.cpp): the JSON lines of metrics.jsonl in their key order,
// throughput in the model's unit (samples or tokens), MFU when known and left out when not,
// validation perplexity for a language model only, and the progress lines with their ETA; the
// file read back (common/metrics_file.cpp) as the records written, and as an older release and a
// [program] wrote it; the
// Prometheus textfile (runtime/prometheus_file.cpp): its exact text, where it goes, when it is
// rewritten, and that promtool accepts it.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include "bad_input.h"
#include "check.h"
#include "json.h"
#include "metrics.h"
#include "metrics_file.h"
#include "prometheus_file.h"

using trainctl::Json;
using trainctl::Metrics;
using trainctl::MetricsSetup;
using trainctl::PrometheusFile;
using trainctl::StepRecord;

namespace {

// A path in the temp directory, unique to this process, removed with the object.
class ScratchPath {
 public:
  explicit ScratchPath(const std::string& name)
      : path_((std::filesystem::temp_directory_path() /
               ("trainctl-test-metrics-" + std::to_string(::getpid()) + "-" + name))
                  .string()) {
    std::filesystem::remove(path_);
  }
  ~ScratchPath() { std::filesystem::remove(path_); }
  ScratchPath(const ScratchPath&) = delete;
  ScratchPath& operator=(const ScratchPath&) = delete;
  const std::string& str() const { return path_; }

 private:
  std::string path_;
};

// What `write` prints to `stream`: stdout unless told.
std::string printed_by(const std::function<void()>& write, int stream = STDOUT_FILENO) {
  std::fflush(nullptr);
  std::FILE* capture = std::tmpfile();
  REQUIRE(capture != nullptr);
  const int saved = ::dup(stream);
  ::dup2(::fileno(capture), stream);
  write();
  std::fflush(nullptr);
  ::dup2(saved, stream);
  ::close(saved);
  std::rewind(capture);
  std::string text;
  for (int c = std::fgetc(capture); c != EOF; c = std::fgetc(capture)) text += static_cast<char>(c);
  std::fclose(capture);
  return text;
}

std::vector<Json> records_in(const std::string& path) {
  std::vector<Json> records;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) records.push_back(Json::parse(line));
  return records;
}

std::string text_of(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<std::string> keys_of(const Json& record) {
  std::vector<std::string> keys;
  for (const auto& [key, value] : record.items()) keys.push_back(key);
  return keys;
}

// 100 steps of 8 examples; a language model's examples are 64 tokens each.
MetricsSetup classifier_setup() { return {100, 8, 1, "samples", false}; }
MetricsSetup language_model_setup() { return {100, 8, 64, "tokens", true}; }

}  // namespace

TEST_CASE("a classifier's step logs samples/s and leaves out an unknown MFU") {
  const ScratchPath scratch("samples.jsonl");
  const std::string& path = scratch.str();
  std::string printed;
  {
    Metrics metrics(path, classifier_setup(), /*enabled=*/true);
    printed = printed_by([&] { metrics.log_step({10, 0.5, 0.001, 1.25, 144.0}); });
  }
  // (100 - 10) steps x 8 samples at 144 samples/s: 5 s.
  CHECK(printed == "step 10/100 | loss 0.5000 | lr 1.000e-03 | grad_norm 1.250 | 144 samples/s | ETA 0:00:05\n");
  const std::vector<Json> records = records_in(path);
  REQUIRE(records.size() == 1);
  CHECK(keys_of(records[0]) ==
        std::vector<std::string>{"step", "loss", "lr", "grad_norm", "samples_per_s", "global_batch", "elapsed_s"});
  CHECK(records[0]["step"] == 10);
  CHECK(records[0]["samples_per_s"] == 144.0);
  CHECK(records[0]["global_batch"] == 8);
}

TEST_CASE("a language model's step logs tokens/s and MFU as a percentage") {
  const ScratchPath scratch("tokens.jsonl");
  const std::string& path = scratch.str();
  std::string printed;
  {
    Metrics metrics(path, language_model_setup(), /*enabled=*/true);
    trainctl::StepRecord record{10, 2.5, 6e-4, 0.75, 5120.0};
    record.mfu = 0.125;
    printed = printed_by([&] { metrics.log_step(record); });
  }
  // (100 - 10) steps x 8 sequences x 64 tokens at 5120 tokens/s: 9 s.
  CHECK(printed ==
        "step 10/100 | loss 2.5000 | lr 6.000e-04 | grad_norm 0.750 | 5120 tokens/s | MFU 12.5% | ETA 0:00:09\n");
  const std::vector<Json> records = records_in(path);
  REQUIRE(records.size() == 1);
  CHECK(keys_of(records[0]) ==
        std::vector<std::string>{"step", "loss", "lr", "grad_norm", "tokens_per_s", "mfu", "global_batch", "elapsed_s"});
  CHECK(records[0]["tokens_per_s"] == 5120.0);
  CHECK(records[0]["mfu"] == 0.125);
}

TEST_CASE("a step logs its time and the process's peak memory, when known") {
  const ScratchPath scratch("resources.jsonl");
  std::string printed;
  {
    Metrics metrics(scratch.str(), classifier_setup(), /*enabled=*/true);
    trainctl::StepRecord record{10, 0.5, 0.001, 1.25, 144.0};
    record.step_seconds = 0.0625;
    record.peak_rss_bytes = int64_t{123} << 20;
    printed = printed_by([&] { metrics.log_step(record); });
  }
  CHECK(printed == "step 10/100 | loss 0.5000 | lr 1.000e-03 | grad_norm 1.250 | 144 samples/s | 62.5 ms/step | "
                   "peak RSS 123 MiB | ETA 0:00:05\n");
  const std::vector<Json> records = records_in(scratch.str());
  REQUIRE(records.size() == 1);
  CHECK(keys_of(records[0]) == std::vector<std::string>{"step", "loss", "lr", "grad_norm", "samples_per_s",
                                                        "step_time_s", "peak_rss_mb", "global_batch", "elapsed_s"});
  CHECK(records[0]["step_time_s"] == 0.0625);
  CHECK(records[0]["peak_rss_mb"] == 123.0);
}

TEST_CASE("a step logs the device's peak memory only where the device has memory of its own") {
  const ScratchPath scratch("device.jsonl");
  std::string printed;
  {
    Metrics metrics(scratch.str(), classifier_setup(), /*enabled=*/true);
    StepRecord record{10, 0.5, 0.001, 1.25, 144.0};
    record.peak_rss_bytes = int64_t{123} << 20;
    record.peak_device_bytes = int64_t{456} << 20;
    printed = printed_by([&] { metrics.log_step(record); });
  }
  CHECK(printed == "step 10/100 | loss 0.5000 | lr 1.000e-03 | grad_norm 1.250 | 144 samples/s | peak RSS 123 MiB | "
                   "peak GPU 456 MiB | ETA 0:00:05\n");
  const std::vector<Json> records = records_in(scratch.str());
  REQUIRE(records.size() == 1);
  CHECK(keys_of(records[0]) == std::vector<std::string>{"step", "loss", "lr", "grad_norm", "samples_per_s",
                                                        "peak_rss_mb", "peak_device_mb", "global_batch", "elapsed_s"});
  CHECK(records[0]["peak_device_mb"] == 456.0);
}

TEST_CASE("the peak resident memory covers memory the process has touched") {
  const int64_t before = trainctl::peak_resident_bytes();
  constexpr size_t kTouched = size_t{64} << 20;
  std::vector<char> block(kTouched, 1);  // written, so resident
  CHECK(block[kTouched - 1] == 1);
  const int64_t after = trainctl::peak_resident_bytes();
  CHECK(after >= static_cast<int64_t>(kTouched));
  CHECK(after >= before);
}

TEST_CASE("validation reports perplexity for a language model only") {
  const ScratchPath classifier_scratch("classifier.jsonl"), language_model_scratch("language_model.jsonl");
  const std::string& classifier_path = classifier_scratch.str();
  const std::string& language_model_path = language_model_scratch.str();
  std::string classifier_printed, language_model_printed;
  {
    Metrics classifier(classifier_path, classifier_setup(), /*enabled=*/true);
    Metrics language_model(language_model_path, language_model_setup(), /*enabled=*/true);
    classifier_printed = printed_by([&] { classifier.log_eval(20, 0.25, 0.875); });
    language_model_printed = printed_by([&] { language_model.log_eval(20, std::log(5.5), 0.25); });
  }
  CHECK(classifier_printed == "step 20/100 | val_loss 0.2500 | val_accuracy 0.8750\n");
  CHECK(language_model_printed == "step 20/100 | val_loss 1.7047 | val_perplexity 5.500 | val_accuracy 0.2500\n");
  const Json classifier_record = records_in(classifier_path).at(0);
  CHECK(classifier_record.dump() == R"({"step":20,"val_loss":0.25,"val_accuracy":0.875})");
  const Json language_model_record = records_in(language_model_path).at(0);
  CHECK(keys_of(language_model_record) == std::vector<std::string>{"step", "val_loss", "val_perplexity", "val_accuracy"});
  const double perplexity = language_model_record["val_perplexity"].get<double>();
  INFO("val_perplexity " << perplexity);
  CHECK(std::abs(perplexity - 5.5) <= 1e-12);
}

TEST_CASE("events are logged in order, and a disabled rank writes nothing") {
  const ScratchPath scratch("events.jsonl"), silent_scratch("silent.jsonl");
  const std::string& path = scratch.str();
  const std::string& silent_path = silent_scratch.str();
  std::string printed;
  {
    Metrics metrics(path, classifier_setup(), /*enabled=*/true);
    Metrics silent(silent_path, classifier_setup(), /*enabled=*/false);
    printed = printed_by([&] {
      metrics.log_event(30, "stop", "saved \"after\" a signal");
      silent.log_event(30, "stop", "never written");
      silent.log_step({30, 0.5, 0.1, 1.0, 1.0});
    });
  }
  CHECK(printed == "trainctl: stop at step 30: saved \"after\" a signal\n");
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  CHECK(line == R"({"step":30,"event":"stop","detail":"saved \"after\" a signal"})");
  CHECK_FALSE(std::filesystem::exists(silent_path));
}

TEST_CASE("a throughput unit other than samples or tokens is refused") {
  MetricsSetup setup = classifier_setup();
  setup.term_unit = "images";
  CHECK_THROWS_WITH_AS(Metrics("/nonexistent/metrics.jsonl", setup, /*enabled=*/false),
                       "term unit \"images\" is neither samples nor tokens", std::invalid_argument);
}

namespace {

// Labels that need every escape of the exposition format: backslash, double quote and newline.
PrometheusFile prometheus_file_at(const std::string& path) { return {path, "4242", "run \"a\\b\"\nc", "node1", 2}; }

// A step with every value known; 0.1 + 0.2 has no short decimal that reads back as itself.
StepRecord known_step() {
  StepRecord record{60, 0.1 + 0.2, 0.001, 1.25, 144.0};
  record.mfu = 0.125;
  record.step_seconds = 0.0625;
  record.peak_rss_bytes = int64_t{123} << 20;
  record.peak_device_bytes = int64_t{456} << 20;
  return record;
}

}  // namespace

TEST_CASE("the Prometheus text has a gauge for each value, labelled with the job, run and host") {
  CHECK(trainctl::prometheus_text(prometheus_file_at("unused.prom"), known_step(), 0.25) ==
        R"(# HELP trainctl_step The optimizer step of the last logged metrics.
# TYPE trainctl_step gauge
trainctl_step{job="4242",run="run \"a\\b\"\nc",host="node1"} 60
# HELP trainctl_loss Training loss at that step, the mean over the global batch.
# TYPE trainctl_loss gauge
trainctl_loss{job="4242",run="run \"a\\b\"\nc",host="node1"} 0.30000000000000004
# HELP trainctl_val_loss Validation loss of the latest evaluation.
# TYPE trainctl_val_loss gauge
trainctl_val_loss{job="4242",run="run \"a\\b\"\nc",host="node1"} 0.25
# HELP trainctl_samples_per_second Training throughput in samples per second, over the steps since the previous log.
# TYPE trainctl_samples_per_second gauge
trainctl_samples_per_second{job="4242",run="run \"a\\b\"\nc",host="node1"} 144
# HELP trainctl_step_seconds Mean wall time of an optimizer step since the previous log.
# TYPE trainctl_step_seconds gauge
trainctl_step_seconds{job="4242",run="run \"a\\b\"\nc",host="node1"} 0.0625
# HELP trainctl_mfu Model FLOPs utilisation: the fraction of the devices' dense peak reached.
# TYPE trainctl_mfu gauge
trainctl_mfu{job="4242",run="run \"a\\b\"\nc",host="node1"} 0.125
# HELP trainctl_peak_rss_bytes Peak resident memory of rank 0's process so far.
# TYPE trainctl_peak_rss_bytes gauge
trainctl_peak_rss_bytes{job="4242",run="run \"a\\b\"\nc",host="node1"} 128974848
# HELP trainctl_peak_device_bytes Peak device memory rank 0's process has allocated so far.
# TYPE trainctl_peak_device_bytes gauge
trainctl_peak_device_bytes{job="4242",run="run \"a\\b\"\nc",host="node1"} 478150656
# HELP trainctl_requeues Times SLURM has requeued the job (SLURM_RESTART_COUNT).
# TYPE trainctl_requeues gauge
trainctl_requeues{job="4242",run="run \"a\\b\"\nc",host="node1"} 2
)");
}

TEST_CASE("the Prometheus text leaves out what is unknown: validation before an evaluation, MFU, memory") {
  const PrometheusFile file{"unused.prom", "mlp-demo", "mlp-demo", "node1", 0};
  StepRecord step{10, 2.5, 6e-4, 0.75, 5120.0};
  step.term_unit = "tokens";
  CHECK(trainctl::prometheus_text(file, step, std::nan("")) ==
        R"(# HELP trainctl_step The optimizer step of the last logged metrics.
# TYPE trainctl_step gauge
trainctl_step{job="mlp-demo",run="mlp-demo",host="node1"} 10
# HELP trainctl_loss Training loss at that step, the mean over the global batch.
# TYPE trainctl_loss gauge
trainctl_loss{job="mlp-demo",run="mlp-demo",host="node1"} 2.5
# HELP trainctl_tokens_per_second Training throughput in tokens per second, over the steps since the previous log.
# TYPE trainctl_tokens_per_second gauge
trainctl_tokens_per_second{job="mlp-demo",run="mlp-demo",host="node1"} 5120
# HELP trainctl_requeues Times SLURM has requeued the job (SLURM_RESTART_COUNT).
# TYPE trainctl_requeues gauge
trainctl_requeues{job="mlp-demo",run="mlp-demo",host="node1"} 0
)");
}

TEST_CASE("the Prometheus file sits in the run directory unless absolute, labelled with SLURM's job id when set") {
  const trainctl::RunLayout layout("/runs/mlp-demo");
  ::unsetenv("SLURM_JOB_ID");
  ::unsetenv("SLURM_RESTART_COUNT");
  const PrometheusFile local = trainctl::prometheus_file_of_run(layout, "metrics.prom");
  CHECK(local.path == "/runs/mlp-demo/metrics.prom");
  CHECK(local.job == "mlp-demo");
  CHECK(local.run == "mlp-demo");
  CHECK(local.host == trainctl::this_host_name());
  CHECK(local.requeues == 0);

  ::setenv("SLURM_JOB_ID", "4242", 1);
  ::setenv("SLURM_RESTART_COUNT", "3", 1);
  const PrometheusFile requeued =
      trainctl::prometheus_file_of_run(trainctl::RunLayout("/runs/mlp-demo/"), "/var/lib/node-exporter/t.prom");
  CHECK(requeued.path == "/var/lib/node-exporter/t.prom");
  CHECK(requeued.job == "4242");
  CHECK(requeued.run == "mlp-demo");
  CHECK(requeued.requeues == 3);

  ::setenv("SLURM_RESTART_COUNT", "three", 1);
  CHECK_THROWS_WITH_AS(trainctl::prometheus_file_of_run(layout, "metrics.prom"),
                       "SLURM_RESTART_COUNT=\"three\" is not a count", trainctl::BadInput);
  ::unsetenv("SLURM_JOB_ID");
  ::unsetenv("SLURM_RESTART_COUNT");
}

TEST_CASE("rank 0 rewrites the Prometheus file at each logged step and after each evaluation, once a step is logged") {
  const ScratchPath jsonl("prometheus.jsonl"), prom("rank0.prom"), silent_prom("silent.prom");
  MetricsSetup setup = classifier_setup();
  setup.prometheus = prometheus_file_at(prom.str());
  MetricsSetup silent_setup = classifier_setup();
  silent_setup.prometheus = prometheus_file_at(silent_prom.str());
  Metrics metrics(jsonl.str(), setup, /*enabled=*/true);
  Metrics silent(jsonl.str(), silent_setup, /*enabled=*/false);
  const StepRecord step = known_step();
  printed_by([&] { metrics.log_eval(5, 0.75, 0.5); });
  CHECK_FALSE(std::filesystem::exists(prom.str()));
  printed_by([&] { metrics.log_step(step); });
  CHECK(text_of(prom.str()) == trainctl::prometheus_text(*setup.prometheus, step, 0.75));
  printed_by([&] { metrics.log_eval(60, 0.25, 0.875); });
  CHECK(text_of(prom.str()) == trainctl::prometheus_text(*setup.prometheus, step, 0.25));
  silent.log_step(step);
  silent.log_eval(60, 0.25, 0.875);
  CHECK_FALSE(std::filesystem::exists(silent_prom.str()));
}

TEST_CASE("a Prometheus file that cannot be written is reported once and retried; training goes on") {
  const ScratchPath jsonl("unwritable.jsonl"), directory("later-dir");
  MetricsSetup setup = classifier_setup();
  setup.prometheus = prometheus_file_at(directory.str() + "/run.prom");
  Metrics metrics(jsonl.str(), setup, /*enabled=*/true);
  std::string warnings = printed_by([&] { printed_by([&] { metrics.log_step(known_step()); }); }, STDERR_FILENO);
  warnings += printed_by([&] { printed_by([&] { metrics.log_step(known_step()); }); }, STDERR_FILENO);
  CHECK(warnings.starts_with("trainctl-runtime: warning: cannot write " + directory.str() + "/run.prom"));
  CHECK(warnings.find("training goes on") != std::string::npos);
  CHECK(warnings.find('\n') == warnings.size() - 1);  // once
  CHECK(records_in(jsonl.str()).size() == 2);
  std::filesystem::create_directory(directory.str());
  printed_by([&] { metrics.log_step(known_step()); });
  CHECK(std::filesystem::exists(directory.str() + "/run.prom"));
  std::filesystem::remove(directory.str() + "/run.prom");
}

TEST_CASE("promtool accepts the Prometheus file") {
  REQUIRE_MESSAGE(std::system("command -v promtool >/dev/null 2>&1") == 0,
                  "promtool is missing: scripts/install-deps.sh installs it (Debian package prometheus)");
  const ScratchPath prom("promtool.prom");
  std::ofstream(prom.str()) << trainctl::prometheus_text(prometheus_file_at(prom.str()), known_step(), 0.25);
  std::FILE* check = ::popen(("promtool check metrics < '" + prom.str() + "' 2>&1").c_str(), "r");
  REQUIRE(check != nullptr);
  std::string output;
  for (int c = std::fgetc(check); c != EOF; c = std::fgetc(check)) output += static_cast<char>(c);
  const int status = ::pclose(check);
  INFO("promtool check metrics: " << output);
  CHECK(status == 0);
}

TEST_CASE("metrics.jsonl reads back as the records the runtime wrote") {
  const ScratchPath scratch("round-trip.jsonl");
  {
    Metrics metrics(scratch.str(), language_model_setup(), /*enabled=*/true);
    printed_by([&] {
      metrics.log_event(0, "start", "1 rank");
      StepRecord step = known_step();
      metrics.log_step(step);
      metrics.log_eval(60, 0.25, 0.875);
      metrics.log_checkpoint({60, "/runs/a/checkpoints/step-00000060.h5", 12.5, 0.25});
    });
  }
  const std::vector<trainctl::MetricsLine> lines = trainctl::read_metrics_file(scratch.str());
  REQUIRE(lines.size() == 4);
  REQUIRE(lines[0].event);
  CHECK(lines[0].event->event == "start");
  CHECK(lines[0].event->detail == "1 rank");
  CHECK_FALSE(lines[0].train);

  REQUIRE(lines[1].train);
  const StepRecord written = known_step();
  const StepRecord& step = *lines[1].train;
  CHECK(lines[1].step == 60);
  CHECK(step.step == 60);
  CHECK(step.loss == written.loss);
  CHECK(step.lr == written.lr);
  CHECK(step.grad_norm == written.grad_norm);
  CHECK(step.terms_per_second == written.terms_per_second);
  CHECK(step.term_unit == "tokens");
  CHECK(step.mfu == written.mfu);
  CHECK(step.step_seconds == written.step_seconds);
  CHECK(step.peak_rss_bytes == written.peak_rss_bytes);
  CHECK(step.peak_device_bytes == written.peak_device_bytes);
  CHECK(step.global_batch == 8);
  CHECK(step.elapsed_seconds >= 0.0);
  CHECK_FALSE(lines[1].eval);
  CHECK_FALSE(lines[1].event);

  REQUIRE(lines[2].eval);
  CHECK(lines[2].eval->val_loss == 0.25);
  CHECK(lines[2].eval->val_accuracy == 0.875);
  CHECK(lines[2].eval->val_perplexity == std::exp(0.25));

  REQUIRE(lines[3].checkpoint);
  CHECK(lines[3].checkpoint->path == "/runs/a/checkpoints/step-00000060.h5");
  CHECK(lines[3].checkpoint->megabytes == 12.5);
  CHECK(lines[3].checkpoint->seconds == 0.25);
  REQUIRE(lines[3].event);
  CHECK(lines[3].event->event == "checkpoint");
  // The sentence people and older readers read, before the values.
  CHECK(text_of(scratch.str()).find(R"x({"step":60,"event":"checkpoint","detail":"/runs/a/checkpoints/step-00000060.h5 )x"
                                    R"x((12.5 MB in 0.250 s, 50 MB/s)","path":)x") != std::string::npos);
}

TEST_CASE("metrics.jsonl of an older release and a program's own lines still read") {
  const char* source_dir = std::getenv("TRAINCTL_SOURCE_DIR");
  REQUIRE_MESSAGE(source_dir != nullptr, "meson passes TRAINCTL_SOURCE_DIR");
  // Written by the release that tests/fixtures/release_resume keeps: its checkpoints were logged as
  // sentences alone.
  const std::vector<trainctl::MetricsLine> release = trainctl::read_metrics_file(
      std::string(source_dir) + "/tests/fixtures/release_resume/stopped/gpt2/metrics.jsonl");
  REQUIRE(release.size() == 8);
  REQUIRE(release[1].train);
  CHECK(release[1].train->loss == 4.934299421073392);
  CHECK(release[1].train->step_seconds == 0.0017662602);
  CHECK(release[1].train->peak_rss_bytes == int64_t{26443776});  // 25.21875 MiB
  CHECK(release[1].train->peak_device_bytes == 0);
  REQUIRE(release[3].event);
  CHECK(release[3].event->event == "checkpoint");
  CHECK_FALSE(release[3].checkpoint);
  CHECK(release[7].event->event == "stop");

  const ScratchPath scratch("program.jsonl");
  std::ofstream(scratch.str()) << R"({"step": 100, "loss": 1.25, "val_loss": 1.5, "mine": "kept and ignored"}
not json
{"loss": 2.0}
{"step": 101, "loss": null}
{"step": 102, "val_loss": 1.125)";  // still being appended
  const std::vector<trainctl::MetricsLine> program = trainctl::read_metrics_file(scratch.str());
  REQUIRE(program.size() == 2);
  REQUIRE(program[0].train);
  CHECK(program[0].train->loss == 1.25);
  CHECK(std::isnan(program[0].train->lr));
  CHECK(std::isnan(program[0].train->mfu));
  REQUIRE(program[0].eval);
  CHECK(program[0].eval->val_loss == 1.5);
  CHECK(std::isnan(program[0].eval->val_accuracy));
  CHECK(program[1].step == 101);
  REQUIRE(program[1].train);
  CHECK(std::isnan(program[1].train->loss));  // not finite when it was written
  CHECK(trainctl::read_metrics_file(scratch.str() + ".missing").empty());
}
