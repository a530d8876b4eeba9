// The node check before step 0, which the batch script asks for with TRAINCTL_NODE_CHECK_TIMEOUT
// ([job] check_nodes; docs/runtime.md, "The node check"). Each rank checks its own device
// (kernels/device_check.h: visible, a GEMM equal to the CPU's, the free memory the run needs) and
// the ranks agree on the results; then they run one all-reduce and one all-gather of exactly
// representable values through the collectives training uses (Comm's MPI on the CPU, the device's
// NCCL on CUDA), each rank checking the result as nccl-tests do, and agree again. A failure ends
// every rank together with exit 76, an infrastructure fault that the batch script requeues
// elsewhere, after rank 0 has appended a bad.nodes line for each failing rank's node.
//
// A deadline bounds it all, since a bad node may hang rather than fail: a rank still waiting in
// one of the check's collectives when the timeout passes ends by itself with exit 76, the lowest
// such rank first blaming the nodes of the ranks that never reached that collective. Who reached
// it is known from arrival markers in the run directory's node-check/ (rank 0 empties it first),
// since the ranks cannot ask each other once a collective hangs.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "comm.h"
#include "device_binding.h"
#include "run_layout.h"
#include "train_spec.h"

namespace trainctl {

class NodeCheck {
 public:
  // Rank 0 empties node-check/. Make no collective call in between, and every rank's markers come
  // after it: a collective call ends on no rank before rank 0 has entered it.
  NodeCheck(const RunLayout& layout, Comm& comm, int64_t timeout_seconds);

  // This rank's device bound as DeviceBinding binds it, where a GPU that is not visible (null
  // returned) is this rank's failed check rather than bad input. Makes no collective call.
  std::unique_ptr<DeviceBinding> bind(const RunSpec& spec);

  // The check itself, of the device bind() returned on this rank. Throws BadNode on the ranks that
  // failed and FailedOnAnotherRank (exit code 76) on the others, every rank knowing of the failure
  // (Comm::note_failure_on_every_rank). Rank 0 logs how long a check that passed took.
  void check(const RunSpec& spec, const DeviceBinding* binding);

 private:
  enum class Stage { kDevice, kDeviceAgreement, kAllReduce, kAllGather, kCollectiveAgreement };
  static const char* stage_name(Stage stage);

  std::optional<std::string> check_collectives(const Device& device);
  // Marks this rank as having reached `stage`, a collective one, for the ranks that may time out in it.
  void reach(Stage stage);
  // The ranks agree whether any failed, `failure` being this rank's.
  void agree(Stage stage, const std::optional<std::string>& failure);
  // Past the timeout: blames what it can and ends this rank with exit 76.
  [[noreturn]] void expire();
  std::string marker(Stage stage, int rank) const;
  void blame(int rank, const std::string& reason) const;

  const RunLayout& layout_;
  Comm& comm_;
  const int64_t timeout_seconds_;
  std::string device_label_;
  std::optional<std::string> not_visible_;
  std::atomic<Stage> stage_{Stage::kDevice};
};

}  // namespace trainctl
