// What a run's notification says ([notify], slurm/notify_spec.h): the JSON record of an event,
// read from the run directory on the node where the event happened, and the message a webhook
// or command gets in the config's format.
#pragma once

#include <optional>
#include <string>

#include "json.h"
#include "runs/run_dir.h"

namespace trainctl {

// {"run", "job", "event", "step", "loss", "outcome", "host", "time"}: the run directory, the job
// (`job`, else the one this process runs in as the batch script names it, else the run's
// job_id), the event, the last logged step and train loss, job.outcome's first line (each null
// when unknown), this host and now in UTC (ISO 8601).
Json notification_record(const RunDir& run_dir, const std::string& event, const std::optional<std::string>& job);

// The bytes sent: the record (format "json"), or Slack's and Mattermost's incoming-webhook
// message {"text": "trainctl: run RUN job J EVENT at step S (loss L): OUTCOME"} ("slack").
std::string notification_message(const Json& record, const std::string& format);

}  // namespace trainctl
