// Tests for the [notify] schema (slurm/notify_spec.cpp): the defaults, a full table, the target
// messages name, and the exact error text, position and key included, for events that do not
// exist, a webhook and a command together or neither, URLs that are not http(s) or not URLs (the
// URL itself never echoed), an empty command, "slack" for a command and a misspelt key.
#include <doctest/doctest.h>

#include <optional>
#include <string>
#include <string_view>

#include "config_reader.h"
#include "notify_spec.h"

using trainctl::ConfigError;
using trainctl::NotifySpec;

namespace {

std::optional<NotifySpec> parse(std::string_view text) {
  return trainctl::parse_notify_spec(trainctl::parse_config_text(text, "notify.toml"), "notify.toml");
}

std::string error_of(std::string_view text) {
  try {
    parse(text);
  } catch (const ConfigError& error) {
    return error.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("a config without [notify] notifies nothing") {
  CHECK_FALSE(parse("[job]\nname = \"x\"\n").has_value());
}

TEST_CASE("a webhook alone is told of every event, as JSON, within 30 s") {
  const NotifySpec notify = *parse("[notify]\nwebhook = \"https://hooks.example.org/services/T0/B0/secret\"\n");
  CHECK(notify.on == std::vector<std::string>{"failed", "hung", "requeued", "completed"});
  CHECK(notify.webhook == "https://hooks.example.org/services/T0/B0/secret");
  CHECK(notify.command.empty());
  CHECK(notify.format == "json");
  CHECK(notify.timeout == 30);
  CHECK(notify.sends("hung"));
  // The path, where Slack keeps a webhook's secret, is never shown; neither is a user:password.
  CHECK(notify.target() == "hooks.example.org");
  CHECK(parse("[notify]\nwebhook = \"http://bot:pw@chat.example.org:8065/hooks/x?y#z\"\n")->target() ==
        "chat.example.org:8065");
  CHECK(parse("[notify]\nwebhook = \"HTTPS://example.org\"\n")->target() == "example.org");
}

TEST_CASE("a full [notify] table sets every field") {
  const NotifySpec slack = *parse(R"toml(
[notify]
on = ["failed", "completed"]
webhook = "https://hooks.slack.com/services/T0/B0/x"
format = "slack"
timeout = 12
)toml");
  CHECK(slack.on == std::vector<std::string>{"failed", "completed"});
  CHECK_FALSE(slack.sends("requeued"));
  CHECK(slack.format == "slack");
  CHECK(slack.timeout == 12);

  const NotifySpec command = *parse("[notify]\non = [\"hung\"]\ncommand = [\"/opt/bin/page-me\", \"--team\", \"ml\"]\n");
  CHECK(command.command == std::vector<std::string>{"/opt/bin/page-me", "--team", "ml"});
  CHECK_FALSE(command.webhook.has_value());
  CHECK(command.target() == "/opt/bin/page-me");
}

TEST_CASE("an event that does not exist is refused, naming the ones that do") {
  CHECK(error_of("[notify]\non = [\"failed\", \"finished\"]\nwebhook = \"https://x.org\"\n") ==
        "notify.toml:2:6: notify.on: element 1 is \"finished\", not an event: the events are \"failed\", \"hung\", "
        "\"requeued\", \"completed\"");
  CHECK(error_of("[notify]\non = []\nwebhook = \"https://x.org\"\n") ==
        "notify.toml:2:6: notify.on: names no event; leave it out for all of them, or remove [notify]");
  CHECK(error_of("[notify]\non = [\"hung\", \"hung\"]\nwebhook = \"https://x.org\"\n") ==
        "notify.toml:2:6: notify.on: names \"hung\" twice");
  CHECK(error_of("[notify]\non = \"failed\"\nwebhook = \"https://x.org\"\n") ==
        "notify.toml:2:6: notify.on: expected an array of strings, got a string");
}

TEST_CASE("exactly one of webhook and command") {
  CHECK(error_of("[notify]\non = [\"failed\"]\n") ==
        "notify.toml:1:1: notify.webhook: [notify] needs a webhook (an http:// or https:// URL) or a command (an argv "
        "array)");
  CHECK(error_of("[notify]\nwebhook = \"https://x.org\"\ncommand = [\"notify.sh\"]\n") ==
        "notify.toml:3:11: notify.command: give a webhook or a command, not both");
  CHECK(error_of("[notify]\ncommand = []\n") ==
        "notify.toml:2:11: notify.command: must name a program first: an array such as [\"/path/to/notify.sh\", "
        "\"--channel\", \"ml\"]");
  CHECK(error_of("[notify]\ncommand = [\"\", \"x\"]\n") ==
        "notify.toml:2:11: notify.command: must name a program first: an array such as [\"/path/to/notify.sh\", "
        "\"--channel\", \"ml\"]");
  CHECK(error_of("[notify]\ncommand = \"notify.sh --all\"\n") ==
        "notify.toml:2:11: notify.command: expected an array of strings, got a string");
}

TEST_CASE("a webhook is an http or https URL, and the error never repeats it") {
  CHECK(error_of("[notify]\nwebhook = \"ftp://x.org/secret\"\n") ==
        "notify.toml:2:11: notify.webhook: must be an http:// or https:// URL");
  CHECK(error_of("[notify]\nwebhook = \"hooks.slack.com/services/secret\"\n") ==
        "notify.toml:2:11: notify.webhook: must be an http:// or https:// URL");
  CHECK(error_of("[notify]\nwebhook = \"https://x.org/a b\"\n") ==
        "notify.toml:2:11: notify.webhook: character 16, ' ', cannot appear in a URL unencoded; percent-encode it");
  CHECK(error_of("[notify]\nwebhook = \"https://x.org/\\\"$(id)\"\n") ==
        "notify.toml:2:11: notify.webhook: character 15, '\"', cannot appear in a URL unencoded; percent-encode it");
  CHECK(error_of("[notify]\nwebhook = \"https://x.org/\\n\"\n") ==
        "notify.toml:2:11: notify.webhook: character 15, '\\n', cannot appear in a URL unencoded; percent-encode it");
  CHECK(error_of("[notify]\nwebhook = \"https:///path\"\n") == "notify.toml:2:11: notify.webhook: names no host");
  CHECK(error_of("[notify]\nwebhook = 8080\n") == "notify.toml:2:11: notify.webhook: expected a string, got an integer");
  // What a URL may hold, $ ' ( ) included, passes: it never reaches a shell.
  CHECK(parse("[notify]\nwebhook = \"https://x.org/a-._~:/?#[]@!$&'()*+,;=%20\"\n").has_value());
}

TEST_CASE("format slack is a webhook's; timeout is 1 to 30 s; a misspelt key is told first") {
  CHECK(error_of("[notify]\ncommand = [\"notify.sh\"]\nformat = \"slack\"\n") ==
        "notify.toml:3:10: notify.format: \"slack\" is a webhook's message format; a command gets the JSON record on "
        "its stdin");
  CHECK(error_of("[notify]\nwebhook = \"https://x.org\"\nformat = \"teams\"\n") ==
        "notify.toml:3:10: notify.format: must be one of \"json\", \"slack\" (got \"teams\")");
  CHECK(error_of("[notify]\nwebhook = \"https://x.org\"\ntimeout = 60\n") ==
        "notify.toml:3:11: notify.timeout: must be at most 30 (got 60)");
  CHECK(error_of("[notify]\nwebhook = \"https://x.org\"\ntimeout = 0\n") ==
        "notify.toml:3:11: notify.timeout: must be at least 1 (got 0)");
  CHECK(error_of("[notify]\nwebhok = \"https://x.org\"\n") ==
        "notify.toml:2:10: notify.webhok: unknown key (did you mean \"webhook\"?)");
  CHECK(error_of("notify = \"https://x.org\"\n") == "notify.toml:1:10: notify: expected a table, got a string");
}
