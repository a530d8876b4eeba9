// The [notify] schema: which of a job's events are sent, and where, to a webhook (an HTTP POST
// of the event's JSON record, or of Slack's incoming-webhook message) or to a command of the
// user's (the record on its stdin). Sent by `trainctl notify`, which the batch script runs once
// per event; no value of [notify] reaches the batch script (render.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <toml++/toml.h>

namespace trainctl {

constexpr int64_t kMaxNotifySeconds = 30;

// The events, as [notify] on and `trainctl notify --event` name them.
inline const std::vector<std::string> kNotifyEvents{"failed", "hung", "requeued", "completed"};

struct NotifySpec {
  std::vector<std::string> on = kNotifyEvents;  // each one of kNotifyEvents
  // Exactly one of webhook and command is set.
  std::optional<std::string> webhook;  // an http:// or https:// URL of RFC 3986's characters
  std::vector<std::string> command;    // argv, run without a shell
  std::string format = "json";         // "json", or "slack" (Slack's and Mattermost's {"text": ...}; webhook only)
  // Seconds one notification may take, its tries included; what still runs then is killed. The
  // batch script waits for it, also before a requeue.
  int64_t timeout = kMaxNotifySeconds;

  bool sends(const std::string& event) const;
  // Where notifications go, as messages name it: the webhook's host (its path may hold a secret
  // token, as Slack's do) or the command's program.
  std::string target() const;
};

// Reads [notify] of `root`: nullopt without one; throws ConfigError (file:line:col, key, message).
std::optional<NotifySpec> parse_notify_spec(const toml::table& root, const std::string& file);

}  // namespace trainctl
