// Sending a notification: see notification_delivery.h.
#include "runs/notification_delivery.h"

#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <system_error>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "child_process.h"
#include "config_reader.h"

namespace trainctl {

namespace fs = std::filesystem;

namespace {

// curl's tries and the pause between them: each try gets an equal share of the rest of the
// timeout (9 s of 30), so that all of them fit.
constexpr int64_t kTries = 3;
constexpr int64_t kRetryDelaySeconds = 1;
constexpr auto kPollInterval = std::chrono::milliseconds(50);
constexpr size_t kLongestReportedLine = 300;

// A directory of this process's own (mkdtemp makes it 0700) for what the child reads and writes:
// the message, its output, and curl's config, which holds the webhook's URL so that the URL, with
// the secret token a Slack webhook's path is, never shows in the node's process list.
class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = (fs::temp_directory_path() / "trainctl-notify.XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr)
      throw std::system_error(errno, std::generic_category(), fmt::format("cannot create {}", pattern));
    path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  std::string file(const char* name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

std::string write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  if (!(out << text) || !out.flush()) throw std::system_error(errno, std::generic_category(), "cannot write " + path);
  return path;
}

// The last line the child wrote, if any, cut to a length a log line can hold.
std::string last_output_line(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string text(std::istreambuf_iterator<char>(in), {});
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  const size_t newline = text.rfind('\n');
  std::string line = printable(newline == std::string::npos ? text : text.substr(newline + 1));
  if (line.size() > kLongestReportedLine) line = line.substr(0, kLongestReportedLine) + "...";
  return line;
}

// curl POSTs the message read from stdin to the URL of its config file. It retries what may
// pass on a second try (a refused connection, a timeout, HTTP 408, 429 and 5xx), but no try
// starts after the timeout.
std::vector<std::string> curl_argv(const NotifySpec& notify, const std::string& config_file) {
  const int64_t per_try = std::max<int64_t>(1, (notify.timeout - (kTries - 1) * kRetryDelaySeconds) / kTries);
  return {"curl", "--config", config_file, "--header", "Content-Type: application/json", "--data-binary", "@-",
          "--max-time", std::to_string(per_try), "--retry", std::to_string(kTries - 1), "--retry-delay",
          std::to_string(kRetryDelaySeconds), "--retry-connrefused", "--retry-max-time", std::to_string(notify.timeout),
          "--fail", "--silent", "--show-error", "--output", "/dev/null", "--proto", "=http,https"};
}

// How `command` ended, or nullopt when it still ran after `seconds` and was killed, with the
// processes it started (its process group).
std::optional<ProcessEnd> run_within(const Command& command, int64_t seconds) {
  const Child child = start(command);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    if (std::optional<ProcessEnd> end = child.poll()) return end;
    std::this_thread::sleep_for(kPollInterval);
  }
  child.signal(SIGKILL);
  child.wait();
  return std::nullopt;
}

}  // namespace

void deliver_notification(const NotifySpec& notify, const std::string& message) {
  const ScratchDir scratch;
  Command command{.output_file = scratch.file("output"),
                  .input_file = write_text(scratch.file("message"), message),
                  .placement = {.own_process_group = true}};
  if (const std::optional<std::string> url = notify.webhook_url()) {
    // The URL holds none of the characters curl's config would need escaped (notify_spec.cpp).
    const std::string config = write_text(scratch.file("curl.config"), fmt::format("url = \"{}\"\n", *url));
    command.argv = curl_argv(notify, config);
  } else {
    command.argv = notify.command;
  }
  const std::string& program = command.argv.front();
  std::optional<ProcessEnd> end;
  try {
    end = run_within(command, notify.timeout);
  } catch (const CannotStart& error) {
    if (notify.has_webhook() && error.not_found())
      throw NotificationFailure("curl is not installed (the Debian package curl); webhooks are sent with it");
    throw NotificationFailure(error.what());
  }
  if (!end) throw NotificationFailure(fmt::format("{} did not finish within {} s; killed", program, notify.timeout));
  if (*end == ProcessEnd::exited(0)) return;
  const std::string said = last_output_line(scratch.file("output"));
  throw NotificationFailure(fmt::format("{} {}{}", program, end->description(), said.empty() ? "" : ": " + said));
}

}  // namespace trainctl
