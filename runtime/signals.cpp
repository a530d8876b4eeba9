// Stop signals: see signals.h.
#include "signals.h"

#include <csignal>
#include <initializer_list>

namespace trainctl {

namespace {
volatile std::sig_atomic_t stop_signal = 0;

extern "C" void record_stop_signal(int signal_number) {
  if (stop_signal == 0) stop_signal = signal_number;
}
}  // namespace

void install_stop_signal_handlers() {
  struct sigaction action {};
  action.sa_handler = record_stop_signal;
  sigemptyset(&action.sa_mask);
  // SA_RESTART: a signal must not make MPI's or HDF5's system calls fail with EINTR.
  action.sa_flags = SA_RESTART;
  for (int signal_number : {SIGTERM, SIGINT, SIGUSR1, SIGUSR2}) sigaction(signal_number, &action, nullptr);
}

int received_stop_signal() { return stop_signal; }

}  // namespace trainctl
