// The [notify] schema: see notify_spec.h.
#include "notify_spec.h"

#include <algorithm>
#include <cctype>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "config_reader.h"

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

// No value is echoed: a webhook's URL often holds its secret token.
void check_webhook(const TableReader& reader, const std::string& url) {
  if (url.size() > kMaxUrlLength)
    reader.fail("webhook", fmt::format("must be at most {} characters (got {})", kMaxUrlLength, url.size()));
  if (std::none_of(std::begin(kSchemes), std::end(kSchemes),
                   [&](std::string_view scheme) { return starts_with_ignoring_case(url, scheme); }))
    reader.fail("webhook", "must be an http:// or https:// URL");
  const auto bad = std::find_if_not(url.begin(), url.end(), is_url_char);
  if (bad != url.end())
    reader.fail("webhook", fmt::format("character {}, {}, cannot appear in a URL unencoded; percent-encode it",
                                       bad - url.begin() + 1, printable(fmt::format("{:?}", *bad))));
  if (authority_host(url).empty()) reader.fail("webhook", "names no host");
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

std::string NotifySpec::target() const { return webhook ? std::string(authority_host(*webhook)) : command.front(); }

std::optional<NotifySpec> parse_notify_spec(const toml::table& root, const std::string& file) {
  TableReader reader = TableReader::child(root, "notify", file);
  if (!reader.present()) return std::nullopt;
  NotifySpec notify;
  notify.on = parse_events(reader);
  notify.webhook = reader.optional_string("webhook");
  if (notify.webhook) check_webhook(reader, *notify.webhook);
  notify.command = reader.string_list("command", notify.command);
  if (reader.has("command") && (notify.command.empty() || notify.command.front().empty()))
    reader.fail("command",
                "must name a program first: an array such as [\"/path/to/notify.sh\", \"--channel\", \"ml\"]");
  notify.format = reader.choice("format", {"json", "slack"}, notify.format);
  notify.timeout = reader.integer("timeout", notify.timeout, 1, kMaxNotifySeconds);
  // A misspelt key is told first: "needs a webhook" would not say that "webhok" is why.
  reader.reject_unknown();
  if (notify.webhook && !notify.command.empty()) reader.fail("command", "give a webhook or a command, not both");
  if (!notify.webhook && notify.command.empty())
    reader.fail("webhook", "[notify] needs a webhook (an http:// or https:// URL) or a command (an argv array)");
  if (notify.format == "slack" && !notify.webhook)
    reader.fail("format", "\"slack\" is a webhook's message format; a command gets the JSON record on its stdin");
  return notify;
}

}  // namespace trainctl
