#!/usr/bin/env bash
# A user's program with GPUs, on the real two-node cluster with 2 fake GPUs per node
# (scripts/cluster.sh up --gpus 2: SLURM's gres/gpu over device files that stand in for GPUs).
# - A [program] job with gpus_per_node = 2 and 2 ranks per node: SLURM sets every rank's
#   CUDA_VISIBLE_DEVICES to its node's 2 GPUs, and trainctl-launch passes it on with LOCAL_RANK,
#   so the GPU each rank takes (entry LOCAL_RANK of the list, torch.cuda.set_device(LOCAL_RANK))
#   is a different one on each node: 4 distinct (node, GPU) pairs.
#   trainctl-launch's node check passed on each rank's GPU first.
# - SLURM schedules the GPUs: a job that wants a GPU of a node whose GPUs are all taken waits
#   for Resources, though that node has a free CPU.
# - A job asking for 3 GPUs per node is refused at submission with SLURM's reason; nothing is
#   queued and no run directory is left behind, so the corrected config submits as a new run.
source "$(dirname "$0")/lib.sh"
require_cluster 2 2
# trainctl-launch checks each rank's GPU before it starts the program (job.check_nodes): on the
# CPU implementation of CUDA here, which sbatch passes on.
export TRAINCTL_CUDA_BACKEND=cpu

# Each rank records what it sees, as a JSON list (a variable that is not set reads null).
write_gpu_config() {  # write_gpu_config FILE NAME GPUS_PER_NODE
  cat >"$1" <<TOML
[job]
name = "$2"
nodes = 2
ranks_per_node = 2
gpus_per_node = $3

[program]
command = ["/usr/bin/python3", "-c", """
import json, os
names = ('RANK', 'LOCAL_RANK', 'LOCAL_WORLD_SIZE', 'SLURMD_NODENAME', 'CUDA_VISIBLE_DEVICES', 'SLURM_STEP_GPUS')
seen = [os.environ.get(name) for name in names]
open(os.path.join(os.environ['TRAINCTL_RUN_DIR'], 'gpus.' + os.environ['RANK']), 'w').write(json.dumps(seen))
"""]
TOML
}

write_gpu_config gpus.toml gpus 2
job=$(submit gpus.toml)
wait_for_job "$job" 60 COMPLETED FAILED CANCELLED
log=$(cat "runs/gpus/logs/slurm-$job.out")
[ "$(job_field "$job" JobState)" = COMPLETED ] || fail "job ended $(job_field "$job" JobState): $log"
grep -qx '#SBATCH --gpus-per-node=2' runs/gpus/job.sbatch || fail "the batch script does not ask for the GPUs"
/usr/bin/python3 - runs/gpus <<'PY' || fail "the ranks did not see their GPUs"
import json, sys
ranks = {}
for rank in range(4):
    values = json.load(open(f"{sys.argv[1]}/gpus.{rank}"))
    ranks[rank] = dict(zip(("rank", "local", "local_size", "node", "visible", "step_gpus"), values))
    print(ranks[rank])
pairs = set()
for rank, seen in ranks.items():
    assert seen["rank"] == str(rank), seen
    assert seen["local_size"] == "2", seen
    visible = (seen["visible"] or "").split(",")
    # The node's 2 GPUs (both are the job's), as SLURM set them for the step.
    assert sorted(visible) == ["0", "1"] and seen["visible"] == seen["step_gpus"], seen
    pairs.add((seen["node"], visible[int(seen["local"])]))
by_node = sorted((seen["node"], seen["local"]) for seen in ranks.values())
assert by_node == [("n1", "0"), ("n1", "1"), ("n2", "0"), ("n2", "1")], by_node
assert len(pairs) == 4, f"ranks share a GPU: {sorted(pairs)}"
print("distinct (node, GPU) pairs:", sorted(pairs))
PY

# GPUs are scheduled, not just named: n1's 2 GPUs taken by a 1-CPU job, a 1-CPU job that wants
# one GPU on n1 waits for Resources (n1 has 2 CPUs).
blocker=$(sbatch --parsable -w n1 -N 1 -n 1 --gpus-per-node=2 --time=2 -o /dev/null --wrap 'sleep 120')
waiter=""
# lib.sh's cleanup reads the test's exit status from $?; set +e lets (exit) hand it on.
trap 'rc=$?; scancel $blocker $waiter 2>/dev/null; set +e; (exit $rc); cleanup' EXIT
wait_for_job "$blocker" 30 RUNNING
waiter=$(sbatch --parsable -w n1 -N 1 -n 1 --gpus-per-node=1 --time=1 -o /dev/null --wrap true)
deadline=$((SECONDS + 15))
until [ "$(job_field "$waiter" Reason)" = Resources ]; do
  [ "$(job_field "$waiter" JobState)" = PENDING ] || fail "the job wanting a taken GPU is $(job_field "$waiter" JobState)"
  [ $SECONDS -lt $deadline ] || fail "the job wanting a taken GPU waits for $(job_field "$waiter" Reason), not Resources"
  sleep 0.5
done
scancel "$blocker"
wait_for_job "$waiter" 30 COMPLETED

# More GPUs per node than a node has: sbatch refuses the job, and submit says why.
write_gpu_config too_many.toml too-many 3
expect_exit 1 "$TRAINCTL" submit too_many.toml
grep -qF "sbatch --parsable $work/runs/too-many/job.sbatch failed (exit 1): sbatch: error: Batch job submission failed: Requested node configuration is not available" err.txt ||
  fail "unclear refusal: $(cat err.txt)"
[ ! -e runs/too-many ] || fail "a refused job leaves its run directory: $(ls runs/too-many)"
[ -z "$(squeue -h -n too-many)" ] || fail "the refused job is queued: $(squeue -n too-many)"
# Corrected, it is submitted as a new run, not refused as one already there.
write_gpu_config too_many.toml too-many 2
job=$(submit too_many.toml)
wait_for_job "$job" 60 COMPLETED
echo "PASS"
