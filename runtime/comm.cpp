// Comm: see comm.h.
#include "comm.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <stdexcept>

#include "check.h"
#include "rank_activity.h"

#ifdef TRAINCTL_HAVE_MPI
#include <mpi.h>

#define MPI_CHECK(statement)                                                           \
  do {                                                                                 \
    int mpi_check_result_ = (statement);                                               \
    if (mpi_check_result_ != MPI_SUCCESS) {                                            \
      char mpi_message_[MPI_MAX_ERROR_STRING];                                         \
      int mpi_message_length_ = 0;                                                     \
      MPI_Error_string(mpi_check_result_, mpi_message_, &mpi_message_length_);         \
      ::trainctl::report_check_failure(#statement, __FILE__, __LINE__,                 \
                                       std::string(mpi_message_, mpi_message_length_)); \
    }                                                                                  \
  } while (0)
#endif

namespace trainctl {

namespace {
constexpr size_t kHostNameBytes = 256;

int environment_int(const char* name, int fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? std::atoi(value) : fallback;
}
}  // namespace

int Comm::local_size() const {
  return static_cast<int>(std::count(node_names_.begin(), node_names_.end(), node_names_[static_cast<size_t>(rank_)]));
}

#ifdef TRAINCTL_HAVE_MPI

Comm::Comm(int* argc, char*** argv) {
  MPI_CHECK(MPI_Init(argc, argv));
  // Errors come back to MPI_CHECK, which names the failing call before the job is aborted.
  MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
  MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &world_size_));
  set_reporting_rank(rank_);

  std::vector<char> names(kHostNameBytes * static_cast<size_t>(world_size_));
  std::string mine = this_node_name();
  mine.resize(kHostNameBytes, '\0');
  MPI_CHECK(MPI_Allgather(mine.data(), kHostNameBytes, MPI_CHAR, names.data(), kHostNameBytes, MPI_CHAR,
                          MPI_COMM_WORLD));
  int same_node_before_me = 0;
  for (int r = 0; r < world_size_; ++r) {
    node_names_.emplace_back(names.data() + kHostNameBytes * static_cast<size_t>(r));
    if (r < rank_ && node_names_.back() == node_names_[static_cast<size_t>(rank_)]) ++same_node_before_me;
  }
  // The launcher knows the placement best; node names are the fallback.
  local_rank_ = environment_int("SLURM_LOCALID", environment_int("OMPI_COMM_WORLD_LOCAL_RANK", same_node_before_me));
}

Comm::~Comm() { MPI_Finalize(); }

void Comm::allreduce_sum(float* data, size_t count) {
  if (world_size_ == 1) return;
  const InCollective waiting(Collective::kAllReduce);
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD));
}

void Comm::allreduce_sum(double* data, size_t count) {
  if (world_size_ == 1) return;
  const InCollective waiting(Collective::kAllReduce);
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(count), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
}

void Comm::broadcast(void* data, size_t bytes, int root) {
  if (world_size_ == 1) return;
  const InCollective waiting(Collective::kBroadcast);
  // MPI's count is an int: a model's state of more than 2 GiB goes in parts.
  constexpr size_t kPart = size_t{1} << 30;
  auto* part = static_cast<char*>(data);
  for (size_t done = 0; done < bytes; done += kPart)
    MPI_CHECK(MPI_Bcast(part + done, static_cast<int>(std::min(kPart, bytes - done)), MPI_BYTE, root, MPI_COMM_WORLD));
}

void Comm::barrier() {
  const InCollective waiting(Collective::kBarrier);
  MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
}

namespace {
// MPI's counts and displacements are ints.
std::pair<std::vector<int>, std::vector<int>> counts_and_displacements(const std::vector<int64_t>& bounds) {
  std::vector<int> counts, displacements;
  for (size_t r = 0; r + 1 < bounds.size(); ++r) {
    if (bounds[r + 1] > INT32_MAX)
      throw std::runtime_error("a buffer of more than 2^31 - 1 elements needs MPI's large-count calls");
    counts.push_back(static_cast<int>(bounds[r + 1] - bounds[r]));
    displacements.push_back(static_cast<int>(bounds[r]));
  }
  return {counts, displacements};
}
}  // namespace

// MPI_Reduce_scatter picks its algorithm, and with it the order of each element's additions, by
// the message's size and the rank count: a layer's reduction would then differ from the whole
// buffer's in the last bit. Here every element is summed in rank order, x0 + x1 + ... + x(W-1),
// whatever the buffer and its split: the pieces each rank owns are exchanged (MPI_Alltoallv) in
// rounds of at most kReduceRoundBytes in all, and added up by their owner.
void Comm::reduce_scatter_sum(float* data, const std::vector<int64_t>& bounds) {
  if (world_size_ == 1) return;
  counts_and_displacements(bounds);  // the int range check
  const auto ranks = static_cast<size_t>(world_size_), me = static_cast<size_t>(rank_);
  int64_t widest = 0;
  for (size_t r = 0; r < ranks; ++r) widest = std::max(widest, bounds[r + 1] - bounds[r]);
  const int64_t round = std::max<int64_t>(1, kReduceRoundBytes / static_cast<int64_t>(sizeof(float) * ranks));
  reduce_scatter_pieces_.resize(static_cast<size_t>(std::min(widest, round)) * ranks);
  std::vector<int> send_counts(ranks), send_displacements(ranks), receive_counts(ranks), receive_displacements(ranks);
  const InCollective waiting(Collective::kReduceScatter);
  for (int64_t first = 0; first < widest; first += round) {
    const auto piece = [&](size_t r) { return std::clamp(bounds[r + 1] - bounds[r] - first, int64_t{0}, round); };
    const int64_t mine = piece(me);
    for (size_t r = 0; r < ranks; ++r) {
      send_counts[r] = static_cast<int>(piece(r));
      send_displacements[r] = static_cast<int>(bounds[r] + std::min(first, bounds[r + 1] - bounds[r]));
      receive_counts[r] = static_cast<int>(mine);
      receive_displacements[r] = static_cast<int>(static_cast<int64_t>(r) * mine);
    }
    MPI_CHECK(MPI_Alltoallv(data, send_counts.data(), send_displacements.data(), MPI_FLOAT,
                            reduce_scatter_pieces_.data(), receive_counts.data(), receive_displacements.data(),
                            MPI_FLOAT, MPI_COMM_WORLD));
    float* sums = data + bounds[me] + first;
    for (int64_t i = 0; i < mine; ++i) {
      float sum = reduce_scatter_pieces_[static_cast<size_t>(i)];
      for (size_t r = 1; r < ranks; ++r) sum += reduce_scatter_pieces_[r * static_cast<size_t>(mine) + static_cast<size_t>(i)];
      sums[i] = sum;
    }
  }
}

void Comm::all_gather(float* data, const std::vector<int64_t>& bounds) {
  if (world_size_ == 1) return;
  const auto [counts, displacements] = counts_and_displacements(bounds);
  const InCollective waiting(Collective::kAllGather);
  MPI_CHECK(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, counts.data(), displacements.data(), MPI_FLOAT,
                           MPI_COMM_WORLD));
}

void Comm::gather(const void* mine, void* all, size_t bytes) {
  if (world_size_ == 1) {
    std::memcpy(all, mine, bytes);
    return;
  }
  const InCollective waiting(Collective::kGather);
  MPI_CHECK(MPI_Gather(mine, static_cast<int>(bytes), MPI_BYTE, all, static_cast<int>(bytes), MPI_BYTE, 0,
                       MPI_COMM_WORLD));
}

std::vector<double> Comm::all_gather(double value) {
  std::vector<double> values(static_cast<size_t>(world_size_), value);
  if (world_size_ == 1) return values;
  const InCollective waiting(Collective::kAllGather);
  MPI_CHECK(MPI_Allgather(&value, 1, MPI_DOUBLE, values.data(), 1, MPI_DOUBLE, MPI_COMM_WORLD));
  return values;
}

int Comm::lowest_rank_where(bool here) {
  int lowest = here ? rank_ : world_size_;
  if (world_size_ == 1) return lowest;
  const InCollective waiting(Collective::kAllReduce);
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &lowest, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
  return lowest;
}

void Comm::abort(int exit_code) {
  if (world_size_ > 1 && !failure_on_every_rank_) MPI_Abort(MPI_COMM_WORLD, exit_code);
  MPI_Finalize();
  std::exit(exit_code);
}

#else

// Started by a launcher as one of several ranks, a build without MPI would train that many
// independent copies and race on one run directory; it refuses instead.
Comm::Comm(int*, char***) {
  for (const char* launcher_size : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "SLURM_STEP_NUM_TASKS"}) {
    const int ranks = environment_int(launcher_size, 1);
    if (ranks > 1)
      throw std::runtime_error("this trainctl-runtime was built without MPI (-Dmpi=disabled) but started as one of " +
                               std::to_string(ranks) + " ranks (" + launcher_size + "); rebuild with MPI");
  }
  node_names_.push_back(this_node_name());
}
Comm::~Comm() = default;
void Comm::allreduce_sum(float*, size_t) {}
void Comm::allreduce_sum(double*, size_t) {}
void Comm::broadcast(void*, size_t, int) {}
void Comm::barrier() {}
void Comm::reduce_scatter_sum(float*, const std::vector<int64_t>&) {}
void Comm::all_gather(float*, const std::vector<int64_t>&) {}
std::vector<double> Comm::all_gather(double value) { return {value}; }
void Comm::gather(const void* mine, void* all, size_t bytes) { std::memcpy(all, mine, bytes); }
int Comm::lowest_rank_where(bool here) { return here ? 0 : 1; }
void Comm::abort(int exit_code) { std::exit(exit_code); }

#endif

}  // namespace trainctl
