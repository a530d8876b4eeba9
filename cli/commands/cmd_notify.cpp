// trainctl notify RUN --event EVENT: sends the run's notification of EVENT where its config's
// [notify] says, if [notify] on names the event; --print shows the message instead. The batch
// script runs it once per event, on the node where it happens. A notification that cannot be
// delivered is one line on stderr and exit 0: it never fails the job it tells of.
#include <fmt/format.h>

#include "commands.h"
#include "config_reader.h"
#include "errors.h"
#include "notify_spec.h"
#include "runs/notification.h"
#include "runs/notification_delivery.h"
#include "runs/run_dir.h"

namespace trainctl {

void add_notify_command(CLI::App& app) {
  auto* command = app.add_subcommand(
      "notify", "send the run's notification of an event as its [notify] says (test it with --event completed)");
  struct Options {
    std::string run, event, job;
    bool print = false;
  };
  auto options = std::make_shared<Options>();
  command->add_option("run", options->run, "run directory")->type_name(path_kind::kDirectory)->required();
  command->add_option("--event", options->event, "the event")->check(CLI::IsMember(kNotifyEvents))->required();
  command->add_option("--job", options->job,
                      "the event's job (default: the SLURM job this runs in, else the run's job_id)");
  command->add_flag("--print", options->print, "print the message that would be sent; send nothing");
  command->callback([options] {
    const RunDir run_dir(options->run);
    if (!run_dir.exists())
      throw UsageError(fmt::format("{} is not a run directory (no {})", options->run, run_file::kConfig));
    const std::optional<NotifySpec> notify = parse_notify_spec(parse_config_file(run_dir.config()), run_dir.config());
    if (!notify) throw UsageError(fmt::format("{} has no [notify] table: there is nowhere to send", run_dir.config()));
    const std::string& event = options->event;
    if (!notify->sends(event)) {
      if (options->print) fmt::print(stderr, "trainctl: notify {}: not sent, [notify] on leaves it out\n", event);
      return;
    }
    const std::optional<std::string> job = options->job.empty() ? std::nullopt : std::optional(options->job);
    const std::string message = notification_message(notification_record(run_dir, event, job), notify->format);
    if (options->print) {
      fmt::print(stderr, "trainctl: notify {}: would send to {}\n", event, printable(notify->destination()));
      fmt::print("{}", message);
      return;
    }
    try {
      deliver_notification(*notify, message);
      fmt::print(stderr, "trainctl: notified {} to {}\n", event, printable(notify->target()));
    } catch (const std::exception& error) {
      fmt::print(stderr, "trainctl: notify {}: {}\n", event, printable(error.what()));
    }
  });
}

}  // namespace trainctl
