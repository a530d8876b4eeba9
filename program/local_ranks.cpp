// trainctl run's ranks of a [program]: see local_ranks.h.
#include "local_ranks.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <optional>
#include <system_error>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "program_rank.h"

namespace trainctl {

namespace {

volatile sig_atomic_t pending_signal = 0;

constexpr std::chrono::seconds kKillWait{10};  // SLURM's default KillWait

// A port no socket on this machine holds now, for the ranks' rendezvous.
int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "cannot open a socket");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  const bool bound = bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
                     getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0;
  const int bind_errno = errno;
  close(fd);
  if (!bound) throw std::system_error(bind_errno, std::generic_category(), "cannot find a free port");
  return ntohs(address.sin_port);
}

}  // namespace

int run_local_ranks(const RunLayout& run, int64_t ranks, int64_t restart) {
  std::filesystem::remove_all(run.rank_exits());
  RankPlace place;
  place.world_size = place.local_world_size = ranks;
  place.master_addr = "127.0.0.1";
  place.master_port = free_port();
  place.restart = restart;

  struct sigaction action {};
  action.sa_handler = [](int signal) { pending_signal = signal; };
  sigemptyset(&action.sa_mask);
  for (int signal : kStopSignals) sigaction(signal, &action, nullptr);

  std::vector<Child> running;
  for (int64_t rank = 0; rank < ranks; ++rank) {
    place.rank = place.local_rank = rank;
    // Its own group, so that a terminal's Ctrl-C reaches the rank once, through this process.
    // A background group that read the terminal would be stopped, unseen: stdin is /dev/null,
    // as in a batch job.
    running.push_back(start_function({.stdin_from_null = true, .own_process_group = true}, [&run, place] {
      try {
        return run_program_rank(run, place);
      } catch (const std::exception& error) {
        fmt::print(stderr, "trainctl: rank {}: {}\n", place.rank, error.what());
        return 1;
      }
    }));
  }

  int first_failure = 0;
  std::optional<std::chrono::steady_clock::time_point> kill_at;
  const auto signal_all = [&](int signal) {
    for (const Child& rank : running) rank.signal(signal);
  };
  while (!running.empty()) {
    if (const int signal = pending_signal; signal != 0) {
      pending_signal = 0;
      signal_all(signal);
    }
    if (kill_at && std::chrono::steady_clock::now() >= *kill_at) {
      signal_all(SIGKILL);
      kill_at.reset();
    }
    const std::optional<std::pair<Child, ProcessEnd>> ended = take_ended(running);
    if (!ended) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    const int code = ended->second.shell_code();
    if (code != 0 && first_failure == 0) {
      first_failure = code;
      signal_all(SIGTERM);
      kill_at = std::chrono::steady_clock::now() + kKillWait;
    }
  }
  return first_failure;
}

}  // namespace trainctl
