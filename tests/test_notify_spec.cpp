// Tests for the [notify] schema (slurm/notify_spec.cpp): the defaults, a full table, the target
// messages name, and the exact error text, position and key included, for events that do not
// exist, a webhook and a command together or neither, URLs that are not http(s) or not URLs (the
// URL itself never echoed), an empty command, "slack" for a command and a misspelt key; the URL
// read from webhook_env or webhook_file, a file that others may read refused.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>

#include "bad_input.h"
#include "config_reader.h"
#include "error_message.h"
#include "notify_spec.h"

using trainctl::ConfigError;
using trainctl::NotifySpec;

namespace {

std::optional<NotifySpec> parse(std::string_view text) {
  return trainctl::parse_notify_spec(trainctl::parse_config_text(text, "notify.toml"), "notify.toml");
}

std::string error_of(std::string_view text) {
  return error_message<ConfigError>([&] { (void)parse(text); });
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

TEST_CASE("exactly one of webhook, webhook_env, webhook_file and command") {
  CHECK(error_of("[notify]\non = [\"failed\"]\n") ==
        "notify.toml:1:1: notify.webhook: [notify] needs a webhook (an http:// or https:// URL, or webhook_env or "
        "webhook_file naming where one is) or a command (an argv array)");
  CHECK(error_of("[notify]\nwebhook = \"https://x.org\"\ncommand = [\"notify.sh\"]\n") ==
        "notify.toml:3:11: notify.command: give one of webhook, webhook_env, webhook_file and command, not both "
        "webhook and command");
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

TEST_CASE("webhook_env and webhook_file say where the URL is, read when it is sent; the file is its owner's alone") {
  setenv("TRAINCTL_TEST_WEBHOOK", "https://hooks.example.org/services/T0/B0/secret", 1);
  const NotifySpec from_env = *parse("[notify]\nwebhook_env = \"TRAINCTL_TEST_WEBHOOK\"\nformat = \"slack\"\n");
  CHECK_FALSE(from_env.webhook.has_value());
  CHECK(from_env.webhook_url() == "https://hooks.example.org/services/T0/B0/secret");
  CHECK(from_env.target() == "hooks.example.org");
  CHECK(from_env.destination() == "https://hooks.example.org/… (from $TRAINCTL_TEST_WEBHOOK)");
  setenv("TRAINCTL_TEST_WEBHOOK", "ftp://hooks.example.org/secret", 1);
  CHECK_THROWS_WITH_AS(
      from_env.webhook_url(),
      "notify.webhook_env: $TRAINCTL_TEST_WEBHOOK: the webhook's URL must be an http:// or https:// URL",
      trainctl::BadInput);
  unsetenv("TRAINCTL_TEST_WEBHOOK");
  CHECK_THROWS_WITH_AS(from_env.webhook_url(),
                       "notify.webhook_env: $TRAINCTL_TEST_WEBHOOK is not set here; the job reads the webhook's URL "
                       "from the environment it inherits from `trainctl submit`: export TRAINCTL_TEST_WEBHOOK first",
                       trainctl::BadInput);

  // A relative webhook_file is relative to the config's folder.
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("trainctl-test-notify-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string url_file = (dir / "hook.url").string();
  std::ofstream(url_file) << "https://hooks.example.org/services/T0/B0/secret\nnot read\n";
  std::filesystem::permissions(url_file, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  const std::string config = (dir / "notify.toml").string();
  const NotifySpec from_file = *trainctl::parse_notify_spec(
      trainctl::parse_config_text("[notify]\nwebhook_file = \"hook.url\"\n", config), config);
  CHECK(from_file.webhook_file == url_file);
  CHECK(from_file.webhook_url() == "https://hooks.example.org/services/T0/B0/secret");
  CHECK(from_file.destination() == "https://hooks.example.org/… (from " + url_file + ")");
  std::filesystem::permissions(url_file, std::filesystem::perms::group_read, std::filesystem::perm_options::add);
  CHECK_THROWS_WITH_AS(from_file.webhook_url(),
                       ("notify.webhook_file: " + url_file + " may be read by its group or by others (mode 0640), and "
                        "it holds a secret; chmod 600 it, as ssh asks of its keys").c_str(),
                       trainctl::BadInput);
  std::filesystem::remove(url_file);
  CHECK_THROWS_WITH_AS(from_file.webhook_url(), ("notify.webhook_file: " + url_file + " does not exist").c_str(),
                       trainctl::BadInput);
  std::filesystem::remove_all(dir);
  // The config's own copy of a run holds no secret unless it holds the URL itself.
  CHECK(trainctl::holds_webhook_secret(trainctl::parse_config_text("[notify]\nwebhook = \"https://x.org\"\n", "n")));
  CHECK_FALSE(trainctl::holds_webhook_secret(trainctl::parse_config_text("[notify]\nwebhook_env = \"X\"\n", "n")));

  CHECK(error_of("[notify]\nwebhook_env = \"1HOOK\"\n") ==
        "notify.toml:2:15: notify.webhook_env: \"1HOOK\" is no environment variable's name: letters, digits and '_', "
        "not starting with a digit, such as \"SLACK_WEBHOOK\"");
  CHECK(error_of("[notify]\nwebhook_file = \"\"\n") ==
        "notify.toml:2:16: notify.webhook_file: is empty; give the path of the file that holds the URL");
  CHECK(error_of("[notify]\nwebhook = \"https://x.org\"\nwebhook_file = \"hook.url\"\n") ==
        "notify.toml:3:16: notify.webhook_file: give one of webhook, webhook_env, webhook_file and command, not both "
        "webhook and webhook_file");
}
