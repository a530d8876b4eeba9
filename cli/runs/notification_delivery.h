// Sending a notification ([notify], slurm/notify_spec.h): a webhook gets an HTTP POST from curl,
// at most 3 tries; a command is run without a shell. Either reads the message on its stdin, and
// whatever still runs after notify.timeout seconds is killed, so that a notification can delay
// the batch script by that much and no more.
#pragma once

#include <stdexcept>
#include <string>

#include "notify_spec.h"

namespace trainctl {

// A notification that was not delivered; what() says why, in one line.
class NotificationFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Sends `message`. Throws NotificationFailure (curl or the command missing, failing or killed at
// the timeout), or std::system_error when this process cannot start it at all.
void deliver_notification(const NotifySpec& notify, const std::string& message);

}  // namespace trainctl
