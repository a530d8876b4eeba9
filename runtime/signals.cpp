// Stop signals: see signals.h.
#include "signals.h"

#include <pthread.h>

#include <csignal>
#include <initializer_list>

namespace trainctl {

namespace {
constexpr std::initializer_list<int> kStopSignals{SIGTERM, SIGINT, SIGUSR1, SIGUSR2};
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
  for (int signal_number : kStopSignals) sigaction(signal_number, &action, nullptr);
}

void with_stop_signals_blocked(const std::function<void()>& start) {
  sigset_t stop_set, previous;
  sigemptyset(&stop_set);
  for (int signal_number : kStopSignals) sigaddset(&stop_set, signal_number);
  pthread_sigmask(SIG_BLOCK, &stop_set, &previous);
  try {
    start();
  } catch (...) {
    pthread_sigmask(SIG_SETMASK, &previous, nullptr);
    throw;
  }
  install_stop_signal_handlers();
  // A signal that arrived meanwhile is pending and is delivered here, to this thread.
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
}

int received_stop_signal() { return stop_signal; }

}  // namespace trainctl
