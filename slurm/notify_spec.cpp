// The [notify] schema: see notify_spec.h.
#include "notify_spec.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "bad_input.h"
#include "config_reader.h"
#include "regular_file.h"

namespace trainctl {

namespace {

constexpr size_t kMaxUrlLength = 8192;
constexpr std::string_view kSchemes[] = {"http://", "https://"};

// RFC 3986's characters: unreserved, reserved and '%'. Whatever else a URL holds must be
// percent-encoded, and refusing it keeps spaces, quotes and control characters out of curl's
// config (notification_delivery.cpp).
bool is_url_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) ||
         std::string_view("-._~:/?#[]@!$&'()*+,;=%").find(c) != std::string_view::npos;
}

bool starts_with_ignoring_case(std::string_view text, std::string_view prefix) {
  return text.size() >= prefix.size() && std::equal(prefix.begin(), prefix.end(), text.begin(), [](char a, char b) {
           return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
         });
}

// The URL's host and port: what follows the scheme, up to the path, without any user:password@.
std::string_view authority_host(std::string_view url) {
  std::string_view rest = url.substr(url.find("://") + 3);
  rest = rest.substr(0, rest.find_first_of("/?#"));
  const size_t at = rest.rfind('@');
  return at == std::string_view::npos ? rest : rest.substr(at + 1);
}

// What is wrong with `url` as a webhook's, or nothing. No message echoes it: a webhook's URL often
// holds its secret token.
std::optional<std::string> webhook_problem(const std::string& url) {
  if (url.size() > kMaxUrlLength)
    return fmt::format("must be at most {} characters (got {})", kMaxUrlLength, url.size());
  if (std::none_of(std::begin(kSchemes), std::end(kSchemes),
                   [&](std::string_view scheme) { return starts_with_ignoring_case(url, scheme); }))
    return "must be an http:// or https:// URL";
  const auto bad = std::find_if_not(url.begin(), url.end(), is_url_char);
  if (bad != url.end())
    return fmt::format("character {}, {}, cannot appear in a URL unencoded; percent-encode it", bad - url.begin() + 1,
                       printable(fmt::format("{:?}", *bad)));
  if (authority_host(url).empty()) return "names no host";
  return std::nullopt;
}

bool is_environment_name(std::string_view name) {
  return !name.empty() && !std::isdigit(static_cast<unsigned char>(name.front())) &&
         std::all_of(name.begin(), name.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

std::string absolute_webhook_file(const std::string& written, const std::string& base_dir) {
  // An absolute written path replaces base_dir.
  return std::filesystem::absolute(std::filesystem::path(base_dir) / written).lexically_normal().string();
}

// A webhook's secret file holds one URL; more is not one.
constexpr size_t kMaxWebhookFileBytes = 65536;

// The first line of webhook_file, a regular file that group and others may not read.
std::string webhook_file_url(const std::string& path) {
  std::string text;
  try {
    RegularFile file(path);
    if ((file.permissions() & (S_IRGRP | S_IROTH)) != 0)
      throw BadInput(fmt::format("notify.webhook_file: {} may be read by its group or by others (mode {:04o}), and it "
                                 "holds a secret; chmod 600 it, as ssh asks of its keys",
                                 path, file.permissions()));
    text = file.read_all(kMaxWebhookFileBytes);
  } catch (const RegularFileError& error) {
    throw BadInput(fmt::format("notify.webhook_file: {} {}", path, error.what()));
  }
  return text.substr(0, text.find_first_of("\r\n"));
}

std::vector<std::string> parse_events(TableReader& reader) {
  std::vector<std::string> on = reader.string_list("on", kNotifyEvents);
  if (on.empty()) reader.fail("on", "names no event; leave it out for all of them, or remove [notify]");
  for (auto event = on.begin(); event != on.end(); ++event) {
    if (std::find(kNotifyEvents.begin(), kNotifyEvents.end(), *event) == kNotifyEvents.end())
      reader.fail("on", fmt::format("element {} is {:?}, not an event: the events are \"{}\"", event - on.begin(),
                                    *event, fmt::join(kNotifyEvents, "\", \"")));
    if (std::find(on.begin(), event, *event) != event) reader.fail("on", fmt::format("names \"{}\" twice", *event));
  }
  return on;
}

}  // namespace

bool NotifySpec::sends(const std::string& event) const { return std::find(on.begin(), on.end(), event) != on.end(); }

std::optional<std::string> NotifySpec::webhook_url() const {
  if (webhook) return webhook;
  std::string url, where;
  if (webhook_env) {
    const char* value = std::getenv(webhook_env->c_str());
    if (value == nullptr || *value == '\0')
      throw BadInput(fmt::format("notify.webhook_env: ${} is not set here; the job reads the webhook's URL from the "
                                 "environment it inherits from `trainctl submit`: export {} first",
                                 *webhook_env, *webhook_env));
    url = value;
    where = fmt::format("notify.webhook_env: ${}", *webhook_env);
  } else if (webhook_file) {
    url = webhook_file_url(*webhook_file);
    where = fmt::format("notify.webhook_file: {}", *webhook_file);
  } else {
    return std::nullopt;
  }
  if (const std::optional<std::string> problem = webhook_problem(url))
    throw BadInput(printable(fmt::format("{}: the webhook's URL {}", where, *problem)));
  return url;
}

std::string NotifySpec::target() const {
  const std::optional<std::string> url = webhook_url();
  return url ? std::string(authority_host(*url)) : command.front();
}

std::string NotifySpec::destination() const {
  const std::optional<std::string> url = webhook_url();
  if (!url) return fmt::format("the command {}", command.front());
  const size_t authority = url->find("://") + 3;
  const size_t path = url->find_first_of("/?#", authority);
  const bool elided = path != std::string::npos && path + 1 < url->size();
  std::string text = fmt::format("{}{}{}", url->substr(0, authority), authority_host(*url), elided ? "/…" : "");
  if (webhook_env) text += fmt::format(" (from ${})", *webhook_env);
  if (webhook_file) text += fmt::format(" (from {})", *webhook_file);
  return text;
}

std::optional<NotifySpec> parse_notify_spec(const toml::table& root, const std::string& file) {
  TableReader reader = TableReader::child(root, "notify", file);
  if (!reader.present()) return std::nullopt;
  NotifySpec notify;
  notify.on = parse_events(reader);
  notify.webhook = reader.optional_string("webhook");
  if (notify.webhook)
    if (const std::optional<std::string> problem = webhook_problem(*notify.webhook)) reader.fail("webhook", *problem);
  notify.webhook_env = reader.optional_string("webhook_env");
  if (notify.webhook_env && !is_environment_name(*notify.webhook_env))
    reader.fail("webhook_env", fmt::format("{:?} is no environment variable's name: letters, digits and '_', not "
                                           "starting with a digit, such as \"SLACK_WEBHOOK\"",
                                           *notify.webhook_env));
  if (const std::optional<std::string> written = reader.optional_string("webhook_file")) {
    if (written->empty()) reader.fail("webhook_file", "is empty; give the path of the file that holds the URL");
    notify.webhook_file =
        absolute_webhook_file(*written, std::filesystem::absolute(file).parent_path().string());
  }
  notify.command = reader.string_list("command", notify.command);
  if (reader.has("command") && (notify.command.empty() || notify.command.front().empty()))
    reader.fail("command",
                "must name a program first: an array such as [\"/path/to/notify.sh\", \"--channel\", \"ml\"]");
  notify.format = reader.choice("format", {"json", "slack"}, notify.format);
  notify.timeout = reader.integer("timeout", notify.timeout, 1, kMaxNotifySeconds);
  // A misspelt key is told first: "needs a webhook" would not say that "webhok" is why.
  reader.reject_unknown();
  std::vector<std::string> given;
  for (const char* key : {"webhook", "webhook_env", "webhook_file", "command"})
    if (reader.has(key)) given.emplace_back(key);
  if (given.size() > 1)
    reader.fail(given[1], fmt::format("give one of webhook, webhook_env, webhook_file and command, not both {} and {}",
                                      given[0], given[1]));
  if (given.empty())
    reader.fail("webhook", "[notify] needs a webhook (an http:// or https:// URL, or webhook_env or webhook_file "
                           "naming where one is) or a command (an argv array)");
  if (notify.format == "slack" && !notify.has_webhook())
    reader.fail("format", "\"slack\" is a webhook's message format; a command gets the JSON record on its stdin");
  return notify;
}

void resolve_webhook_file(toml::table& root, const std::string& base_dir) {
  toml::table* notify = root["notify"].as_table();
  const toml::value<std::string>* written = notify ? (*notify)["webhook_file"].as_string() : nullptr;
  if (written != nullptr && !written->get().empty())
    notify->insert_or_assign("webhook_file", absolute_webhook_file(written->get(), base_dir));
}

bool holds_webhook_secret(const toml::table& root) { return root["notify"]["webhook"].is_string(); }

}  // namespace trainctl
