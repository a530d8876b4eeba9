// The node check before step 0: see node_check.h.
#include "node_check.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "device_buffer.h"
#include "device_check.h"
#include "exit_codes.h"
#include "node_records.h"
#include "rank_activity.h"
#include "rank_failure.h"
#include "registry.h"
#include "signals.h"
#include "test_hooks.h"
#include "training_memory.h"

namespace trainctl {

namespace {

// A failure's text as the ranks gather it to rank 0; longer ones are cut.
constexpr size_t kReasonBytes = 512;
// The all-reduce's length, and each rank's share of the all-gather.
constexpr int64_t kAllReduceCount = 4096, kGatherShare = 256;
// How long a rank that never got past its own device check waits before it ends, so that the
// ranks waiting for it, whose deadlines pass at about the same time, blame it first: once one rank
// has ended, srun and mpirun end the others.
constexpr auto kStragglerGrace = std::chrono::seconds(10);

// Rank r's element i of the all-reduce: ((i + r) mod 8) + 1. Each varies with both, so a chunk
// summed from the wrong offset or rank shows, and the sums, integers below 2^24 for up to 2^21
// ranks, are exact in fp32 in any order.
float all_reduce_value(int64_t i, int rank) { return static_cast<float>((i + rank) % 8 + 1); }
float all_reduce_sum(int64_t i, int ranks) {
  int64_t sum = 0;
  for (int r = 0; r < ranks; ++r) sum += (i + r) % 8 + 1;
  return static_cast<float>(sum);
}
// The all-gather: element j of rank r's share holds r * kGatherShare + j, so every element names
// the rank it came from and its place there.
float gathered_value(int rank, int64_t j) { return static_cast<float>(rank * kGatherShare + j); }

// The first element of `got` that is not `expected(i)`, described; nullopt when all are.
std::optional<std::string> first_difference(const char* collective, const std::vector<float>& got,
                                            const std::function<float(int64_t)>& expected) {
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != expected(static_cast<int64_t>(i)))
      return fmt::format("the {}'s element {} is {}, not {}", collective, i, got[i], expected(static_cast<int64_t>(i)));
  return std::nullopt;
}

// Runs `expire` on a thread of its own unless destroyed within `timeout`.
class Deadline {
 public:
  Deadline(std::chrono::seconds timeout, std::function<void()> expire) {
    // Signals are for the thread that trains: its handlers record stop signals, its stack is the
    // hang report's.
    with_stop_signals_blocked([&] {
      thread_ = std::thread([this, timeout, expire = std::move(expire)] {
        std::unique_lock lock(mutex_);
        if (!cancelled_.wait_for(lock, timeout, [this] { return cancel_; })) expire();
      });
    });
  }
  ~Deadline() {
    {
      const std::lock_guard lock(mutex_);
      cancel_ = true;
    }
    cancelled_.notify_one();
    thread_.join();
  }
  Deadline(const Deadline&) = delete;
  Deadline& operator=(const Deadline&) = delete;

 private:
  std::mutex mutex_;
  std::condition_variable cancelled_;
  bool cancel_ = false;
  std::thread thread_;
};

// A group of the device's collectives over every rank, closed when it goes.
class CheckGroup {
 public:
  CheckGroup(const CollectiveOps& collectives, Comm& comm) : collectives_(collectives) {
    // NCCL starts proxy threads; they must not be the ones a stop signal is delivered to.
    with_stop_signals_blocked([&] {
      group_ = collectives.open_group(comm.rank(), comm.world_size(),
                                      [&comm](void* bytes, size_t size) { comm.broadcast(bytes, size); });
    });
  }
  ~CheckGroup() { collectives_.close_group(group_); }
  CheckGroup(const CheckGroup&) = delete;
  CheckGroup& operator=(const CheckGroup&) = delete;
  DeviceGroup* get() const { return group_; }

 private:
  const CollectiveOps& collectives_;
  DeviceGroup* group_ = nullptr;
};

}  // namespace

NodeCheck::NodeCheck(const RunLayout& layout, Comm& comm, int64_t timeout_seconds)
    : layout_(layout), comm_(comm), timeout_seconds_(timeout_seconds) {
  if (comm.rank() != 0) return;
  std::filesystem::remove_all(layout.node_check_markers());
  std::filesystem::create_directories(layout.node_check_markers());
}

std::unique_ptr<DeviceBinding> NodeCheck::bind(const RunSpec& spec) {
  device_label_ = device_label(spec.train.device, comm_.local_rank());
  try {
    return std::make_unique<DeviceBinding>(spec, comm_);
  } catch (const DeviceNotVisible& error) {
    not_visible_ = fmt::format("rank {} ({}): not visible: {}", comm_.rank(), device_label_, error.what());
    return nullptr;
  }
}

void NodeCheck::check(const RunSpec& spec, const DeviceBinding* binding) {
  note_phase(Phase::kNodeCheck);
  const auto started = std::chrono::steady_clock::now();
  const Deadline deadline(std::chrono::seconds(timeout_seconds_), [this] { expire(); });
  test_hang_point(layout_.path(), comm_.rank(), Phase::kNodeCheck, 0);

  std::optional<std::string> failure = not_visible_;
  if (binding != nullptr) {
    const ModelOptions options{spec.train.micro_batch, spec.train.precision, spec.train.recompute, Stream{}};
    const TrainingMemory needed =
        training_memory(spec.train, model_kind(spec.model).footprint(spec.model, options), comm_.world_size());
    const DeviceCheck device_check{needed.device_bytes(), test_fails_node_check(comm_.node_name())};
    if (std::optional<std::string> why = check_device(binding->device(), device_check))
      failure = fmt::format("rank {} ({}): {}", comm_.rank(), device_label_, *why);
  }
  agree(Stage::kDeviceAgreement, failure);
  // Past the agreement every rank has its device: one without would have ended them all there.
  failure = check_collectives(binding->device());
  agree(Stage::kCollectiveAgreement, failure);

  if (comm_.rank() != 0) return;
  std::vector<std::string> nodes;
  for (const std::string& node : comm_.node_names())
    if (std::find(nodes.begin(), nodes.end(), node) == nodes.end()) nodes.push_back(node);
  fmt::print("trainctl-runtime: node check passed in {:.2f} s ({} ranks on {}; device {})\n",
             std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(), comm_.world_size(),
             fmt::join(nodes, ","), binding->device().name);
  std::fflush(stdout);
}

const char* NodeCheck::stage_name(Stage stage) {
  switch (stage) {
    case Stage::kDevice: return "the device check";
    case Stage::kDeviceAgreement: return "the agreement on the device checks";
    case Stage::kAllReduce: return "the all-reduce";
    case Stage::kAllGather: return "the all-gather";
    case Stage::kCollectiveAgreement: return "the agreement on the collectives";
  }
  return "?";
}

std::optional<std::string> NodeCheck::check_collectives(const Device& device) {
  const int rank = comm_.rank(), ranks = comm_.world_size();
  const auto failed = [&](const std::optional<std::string>& difference) -> std::optional<std::string> {
    if (!difference) return std::nullopt;
    return fmt::format("rank {} ({}): {}", rank, device_label_, *difference);
  };
  std::vector<float> reduced(kAllReduceCount);
  for (int64_t i = 0; i < kAllReduceCount; ++i) reduced[static_cast<size_t>(i)] = all_reduce_value(i, rank);
  std::vector<int64_t> bounds;
  for (int r = 0; r <= ranks; ++r) bounds.push_back(r * kGatherShare);
  std::vector<float> gathered(static_cast<size_t>(bounds.back()), 0.0f);
  for (int64_t j = 0; j < kGatherShare; ++j) gathered[static_cast<size_t>(bounds[rank] + j)] = gathered_value(rank, j);
  const auto reduced_right = [&] {
    return failed(first_difference("all-reduce", reduced, [&](int64_t i) { return all_reduce_sum(i, ranks); }));
  };
  const auto gathered_right = [&] {
    return failed(first_difference("all-gather", gathered, [&](int64_t i) {
      return gathered_value(static_cast<int>(i / kGatherShare), i % kGatherShare);
    }));
  };

  // As training communicates: the device's collectives where it has them, on several ranks
  // (grad_sync.h), else Comm's over host memory.
  if (!device.collectives || ranks == 1) {
    reach(Stage::kAllReduce);
    comm_.allreduce_sum(reduced.data(), reduced.size());
    if (std::optional<std::string> wrong = reduced_right()) return wrong;
    reach(Stage::kAllGather);
    comm_.all_gather(gathered.data(), bounds);
    return gathered_right();
  }
  const CollectiveOps& collectives = *device.collectives;
  reach(Stage::kAllReduce);
  const CheckGroup group(collectives, comm_);
  DeviceBuffer<float> on_device(device, kAllReduceCount);
  on_device.upload(reduced.data(), kAllReduceCount);
  collectives.all_reduce_sum(group.get(), Stream{}, on_device.get(), kAllReduceCount);
  collectives.wait_reductions(group.get(), Stream{});
  {
    // The host waits for NCCL in the download.
    const InCollective waiting(Collective::kAllReduce);
    on_device.download(reduced.data(), kAllReduceCount);
  }
  if (std::optional<std::string> wrong = reduced_right()) return wrong;
  reach(Stage::kAllGather);
  DeviceBuffer<float> gathered_on_device(device, bounds.back());
  gathered_on_device.upload(gathered.data(), bounds.back());
  collectives.all_gather(group.get(), Stream{}, gathered_on_device.get(), bounds.data());
  collectives.wait_reductions(group.get(), Stream{});
  {
    const InCollective waiting(Collective::kAllGather);
    gathered_on_device.download(gathered.data(), bounds.back());
  }
  return gathered_right();
}

std::string NodeCheck::marker(Stage stage, int rank) const {
  return fmt::format("{}/{}.{}", layout_.node_check_markers(), static_cast<int>(stage), rank);
}

void NodeCheck::reach(Stage stage) {
  stage_.store(stage);
  std::ofstream(marker(stage, comm_.rank())) << comm_.node_name() << '\n';
}

void NodeCheck::blame(int rank, const std::string& reason) const {
  try {
    blame_node(layout_, comm_.node_names()[static_cast<size_t>(rank)], "node check: " + reason);
  } catch (const std::exception& error) {
    fmt::print(stderr, "trainctl-runtime: cannot blame node {} of rank {}: {}\n",
               comm_.node_names()[static_cast<size_t>(rank)], rank, error.what());
  }
}

void NodeCheck::agree(Stage stage, const std::optional<std::string>& failure) {
  reach(stage);
  const int first_failed = comm_.lowest_rank_where(failure.has_value());
  if (first_failed == comm_.world_size()) return;
  std::array<char, kReasonBytes> mine{};
  if (failure) failure->copy(mine.data(), mine.size() - 1);
  std::vector<char> all(comm_.rank() == 0 ? mine.size() * static_cast<size_t>(comm_.world_size()) : 0);
  comm_.gather(mine.data(), all.data(), mine.size());
  for (int r = 0; r < comm_.world_size() && comm_.rank() == 0; ++r)
    if (const char* reason = all.data() + static_cast<size_t>(r) * mine.size(); *reason != '\0') blame(r, reason);
  comm_.note_failure_on_every_rank();
  if (failure) throw BadNode(comm_.node_name(), *failure);
  throw FailedOnAnotherRank(first_failed, exit_code::kBadNode);
}

void NodeCheck::expire() {
  const Stage stage = stage_.load();
  const int rank = comm_.rank();
  if (stage == Stage::kDevice) {
    fmt::print(stderr, "trainctl-runtime: node check failed on {}: rank {} ({}): {} did not finish within {} s\n",
               comm_.node_name(), rank, device_label_, stage_name(stage), timeout_seconds_);
    std::this_thread::sleep_for(kStragglerGrace);
    // No rank got past its device check (else that one blames this one).
    bool anyone_waited = false;
    for (int r = 0; r < comm_.world_size(); ++r)
      anyone_waited = anyone_waited || std::filesystem::exists(marker(Stage::kDeviceAgreement, r));
    if (!anyone_waited)
      blame(rank, fmt::format("rank {} ({}): {} did not finish within {} s", rank, device_label_, stage_name(stage),
                              timeout_seconds_));
  } else {
    std::vector<int> missing;
    std::optional<int> first_arrived;
    for (int r = 0; r < comm_.world_size(); ++r) {
      if (!std::filesystem::exists(marker(stage, r)))
        missing.push_back(r);
      else if (!first_arrived)
        first_arrived = r;
    }
    fmt::print(stderr, "trainctl-runtime: node check failed on {}: rank {} waited {} s in {}{}\n", comm_.node_name(),
               rank, timeout_seconds_, stage_name(stage),
               missing.empty() ? std::string(", which every rank reached")
                               : fmt::format(" for rank(s) {}, which never reached it", fmt::join(missing, ",")));
    if (first_arrived == rank)
      for (int r : missing)
        blame(r, fmt::format("rank {} did not reach {} within {} s", r, stage_name(stage), timeout_seconds_));
  }
  std::fflush(stdout);
  // MPI cannot be finalized while the rank's own thread waits in it; srun and mpirun take an exit
  // without it as the rank's end.
  _exit(exit_code::kBadNode);
}

}  // namespace trainctl
