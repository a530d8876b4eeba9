// Tests for run metrics (runtime/metrics.cpp): the JSON lines of metrics.jsonl in their key order,
// throughput in the model's unit (samples or tokens), MFU when known and left out when not,
// validation perplexity for a language model only, and the progress lines with their ETA.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "json.h"
#include "metrics.h"

using trainctl::Json;
using trainctl::Metrics;
using trainctl::MetricsSetup;

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

// What `write` prints to stdout.
std::string printed_by(const std::function<void()>& write) {
  std::fflush(stdout);
  std::FILE* capture = std::tmpfile();
  REQUIRE(capture != nullptr);
  const int saved = ::dup(STDOUT_FILENO);
  ::dup2(::fileno(capture), STDOUT_FILENO);
  write();
  std::fflush(stdout);
  ::dup2(saved, STDOUT_FILENO);
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
