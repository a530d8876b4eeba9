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
  // Exactly one of webhook, webhook_env, webhook_file and command is set.
  std::optional<std::string> webhook;  // an http:// or https:// URL of RFC 3986's characters
  // The name of an environment variable that holds the URL where the notification is sent (the
  // job inherits the environment of `trainctl submit`), so that no copy of the config holds it.
  std::optional<std::string> webhook_env;
  // An absolute path (a relative one is relative to the config) of a file whose first line is the
  // URL, which group and others may not read, as ssh asks of its keys.
  std::optional<std::string> webhook_file;
  std::vector<std::string> command;  // argv, run without a shell
  std::string format = "json";         // "json", or "slack" (Slack's and Mattermost's {"text": ...}; webhook only)
  // Seconds one notification may take, its tries included; what still runs then is killed. The
  // batch script waits for it, also before a requeue.
  int64_t timeout = kMaxNotifySeconds;

  bool sends(const std::string& event) const;
  bool has_webhook() const { return webhook || webhook_env || webhook_file; }
  // The webhook's URL, from where the config says; nothing for a command. A URL from the
  // environment or a file is checked as a webhook in the config is. Throws BadInput naming the key
  // and the variable or the file, never the URL.
  std::optional<std::string> webhook_url() const;
  // Where notifications go, as messages name it: the webhook's host (its path may hold a secret
  // token, as Slack's do), or the command's program. Reads the URL (webhook_url).
  std::string target() const;
  // Where they go, for `trainctl notify --print`: "https://hooks.slack.com/… (from $SLACK_WEBHOOK)",
  // the URL's path and query elided, or "the command PROGRAM".
  std::string destination() const;
};

// Reads [notify] of `root`: nullopt without one; throws ConfigError (file:line:col, key, message).
std::optional<NotifySpec> parse_notify_spec(const toml::table& root, const std::string& file);

// Makes notify.webhook_file of `root` absolute, relative to `base_dir`, as the run directory's copy
// of the config is read from elsewhere.
void resolve_webhook_file(toml::table& root, const std::string& base_dir);

// Whether `root` holds a webhook's URL, a secret: the run directory's copies of it are then
// readable by their owner alone.
bool holds_webhook_secret(const toml::table& root);

}  // namespace trainctl
