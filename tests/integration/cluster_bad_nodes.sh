#!/usr/bin/env bash
# Bad nodes on the real four-node cluster, one fake GPU per node (scripts/cluster.sh up --nodes 4
# --gpus 1). The test hook TRAINCTL_TEST_FAIL_NODE_CHECK (docs/runtime.md) makes the node check's
# GEMM come out wrong on the nodes it names, as a bad GPU's would:
# - more bad nodes than job.max_excluded_nodes: the job fails at once, naming them;
# - a 2-node CPU job whose check fails on n1: requeued as an infrastructure fault, the requeued job
#   excludes n1, runs on two other nodes, completes, and ends bitwise equal to an uninterrupted
#   2-rank run; `trainctl status` names the excluded node and why;
# - a 1-node job on device "cuda" (the CPU implementation of CUDA) whose GPU on n1 fails the check:
#   the check ran on cuda, the node is excluded, and the requeued job's check passes on another.
source "$(dirname "$0")/lib.sh"
require_cluster 4 1
make_data
export TRAINCTL_CUDA_BACKEND=cpu
settings=(job.nodes=2 job.ranks_per_node=1 job.env='{ OMPI_MCA_btl = "self,tcp" }' train.steps=60)
write_config too_many.toml too-many "${settings[@]}" job.max_excluded_nodes=1
write_config excluded.toml excluded "${settings[@]}"
write_config reference.toml reference "${settings[@]}"
write_config gpu.toml gpu job.nodes=1 job.ranks_per_node=1 job.gpus_per_node=1 train.device='"cuda"' train.steps=20

# Both nodes of the first start fail their check: two bad nodes, one more than may be excluded.
job=$(TRAINCTL_TEST_FAIL_NODE_CHECK=n1,n2 submit too_many.toml)
wait_for_job "$job" 120 COMPLETED FAILED CANCELLED
[ "$(job_field "$job" JobState)" = FAILED ] || fail "job $job did not fail: $(cat runs/too-many/job.outcome)"
outcome=$(sed -n 1p runs/too-many/job.outcome)
[[ $outcome =~ ^failed:\ 2\ bad\ nodes,\ more\ than\ max_excluded_nodes\ \(1\):\ n1\ \(node\ check:\ .*GEMM.*\),\ n2\ \(node\ check:\ .*\)$ ]] ||
  fail "job.outcome does not name both bad nodes: $outcome"
echo "too many bad nodes: $outcome"

# The uninterrupted run meanwhile, with the same world size and thread counts.
"$TRAINCTL" run reference.toml --ranks 2 >reference.log 2>&1 &
reference=$!

# A 2-node job lands on the lowest idle nodes, n1 and n2. Once it has started again without n1,
# n1 is the lowest idle node, where the GPU job lands.
job=$(TRAINCTL_TEST_FAIL_NODE_CHECK=n1 submit excluded.toml)
deadline=$((SECONDS + 120))
until grep -q "^trainctl: job $job run 1 starting" runs/excluded/logs/slurm-"$job".out 2>/dev/null; do
  [ $SECONDS -lt $deadline ] || fail "job $job did not start again within 120 s: $(cat runs/excluded/job.outcome)"
  sleep 0.2
done
gpu_job=$(TRAINCTL_TEST_FAIL_NODE_CHECK=n1 submit gpu.toml)
wait_for_job "$job" 240 COMPLETED FAILED CANCELLED
log=$(cat runs/excluded/logs/slurm-"$job".out)
[ "$(job_field "$job" JobState)" = COMPLETED ] || { echo "$log"; fail "job $job did not complete"; }
printf 'completed\nrequeued: node check failed on n1\n' | cmp -s - runs/excluded/job.outcome ||
  fail "job.outcome: $(cat runs/excluded/job.outcome)"
grep -qE "^trainctl: job $job run 0 starting at step 0 on n\[1-2\]$" <<<"$log" || fail "the first start was not on n[1-2]"
grep -q "^trainctl: the requeued job excludes n1$" <<<"$log" || { echo "$log"; fail "the requeue did not exclude n1"; }
second_nodes=$(sed -nE "s/^trainctl: job $job run 1 starting at step 0 on (.*)$/\1/p" <<<"$log")
[ -n "$second_nodes" ] && ! grep -qx n1 <<<"$(scontrol show hostnames "$second_nodes")" ||
  fail "the requeued job ran on '$second_nodes'"
grep -qE "node check passed in [0-9.]+ s \(2 ranks on n[2-4],n[2-4]; device cpu\)" <<<"$log" ||
  { echo "$log"; fail "the requeued job's node check did not pass"; }
"$TRAINCTL" status runs/excluded | tee status.txt
grep -qE "^excluded nodes: n1 \(node check: rank 0 .*GEMM.*\)$" status.txt || fail "status does not name the excluded node"
"$TRAINCTL" status runs/excluded --json >status.json
grep -q '"excluded_nodes":\[{"node":"n1","reason":"node check: rank 0' status.json ||
  fail "status --json does not list the excluded node"
wait "$reference" || fail "the reference run failed: $(cat reference.log)"
"$TRAINCTL" ckpt diff "$(checkpoint_of runs/reference 60)" "$(checkpoint_of runs/excluded 60)"

wait_for_job "$gpu_job" 240 COMPLETED FAILED CANCELLED
gpu_log=$(cat runs/gpu/logs/slurm-"$gpu_job".out)
[ "$(job_field "$gpu_job" JobState)" = COMPLETED ] || { echo "$gpu_log"; fail "GPU job $gpu_job did not complete"; }
grep -q "^n1	node check: rank 0 (cuda device 0): GEMM" runs/gpu/bad.nodes || fail "bad.nodes: $(cat runs/gpu/bad.nodes)"
grep -q "^trainctl: the requeued job excludes n1$" <<<"$gpu_log" || { echo "$gpu_log"; fail "the GPU job did not exclude n1"; }
grep -qE "node check passed in [0-9.]+ s \(1 ranks on n[234]; device cuda\)" <<<"$gpu_log" ||
  { echo "$gpu_log"; fail "the requeued GPU job's check did not pass on cuda"; }
echo "PASS"
