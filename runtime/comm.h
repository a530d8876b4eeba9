// Comm: the process bootstrap and the collectives the trainer needs. With MPI (srun --mpi=pmix
// or mpirun) it knows rank, world size and local rank; without MPI it is a world of one, so
// the same trainer runs on a laptop. Every MPI call goes through MPI_CHECK, and each collective
// marks the rank as waiting in it for its hang report (rank_activity.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace trainctl {

class Comm {
 public:
  Comm(int* argc, char*** argv);
  ~Comm();
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  // Index among the ranks on this node: SLURM_LOCALID or Open MPI's, else by comparing node names.
  int local_rank() const { return local_rank_; }
  // Ranks on this node (by node name).
  int local_size() const;
  // The node each rank runs on, in rank order: SLURM's name for it (SLURMD_NODENAME) where SLURM
  // started the rank, else the host name. (Two SLURM nodes may share a host, as on the local
  // test cluster.)
  const std::vector<std::string>& node_names() const { return node_names_; }
  const std::string& node_name() const { return node_names_[static_cast<size_t>(rank_)]; }

  void allreduce_sum(float* data, size_t count);
  void allreduce_sum(double* data, size_t count);
  void broadcast(void* data, size_t bytes, int root = 0);
  // Rank r's values are [bounds[r], bounds[r + 1]) of a buffer laid out alike on every rank
  // (bounds has world_size() + 1 entries, bounds[0] = 0).
  //   reduce_scatter_sum: this rank's range of `data` becomes the sum over ranks of theirs, each
  //   element's summed in rank order whatever the bounds (so a part of a buffer sums as the whole
  //   does); the rest of `data` is left as it was.
  //   all_gather: every rank's range of `data` becomes that rank's values.
  void reduce_scatter_sum(float* data, const std::vector<int64_t>& bounds);
  void all_gather(float* data, const std::vector<int64_t>& bounds);
  // Every rank's `value`, in rank order.
  std::vector<double> all_gather(double value);
  // Rank 0 receives every rank's `bytes` bytes at `mine` into `all`, in rank order.
  void gather(const void* mine, void* all, size_t bytes);
  void barrier();
  // The lowest rank where `here` is true, or world_size() where it is true on none.
  int lowest_rank_where(bool here);
  // Ends every rank of the job with `exit_code`: at once (MPI_Abort), since a failure on one rank
  // must not leave the others waiting in a collective call; or, after
  // note_failure_on_every_rank(), each rank by itself (rank_failure.h says why).
  [[noreturn]] void abort(int exit_code);
  // Every rank is failing at the same point, and knows it (an agreed loss that is not finite,
  // all_or_none).
  void note_failure_on_every_rank() { failure_on_every_rank_ = true; }

 private:
  int rank_ = 0;
  int world_size_ = 1;
  int local_rank_ = 0;
  std::vector<std::string> node_names_;
  bool failure_on_every_rank_ = false;
  // reduce_scatter_sum's pieces of one round from every rank, kept for the next call: a fresh
  // buffer a step would cost its page faults every time.
  static constexpr int64_t kReduceRoundBytes = int64_t{16} << 20;
  std::vector<float> reduce_scatter_pieces_;
};

}  // namespace trainctl
