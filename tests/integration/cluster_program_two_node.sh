#!/usr/bin/env bash
# A user's program across the real two-node cluster: configs/program_demo.py with 1 rank on each
# node. Rank 0 runs on n1 and rank 1 on n2, each with LOCAL_RANK 0 of 1; both meet at MASTER_ADDR,
# n1's NodeAddr, on the job's port, and train to completion.
source "$(dirname "$0")/lib.sh"
require_cluster 2
require_torch
write_program_config spread.toml spread job.nodes=2 job.ranks_per_node=1 params.steps=40
job=$(submit spread.toml)
wait_for_job "$job" 120 COMPLETED FAILED CANCELLED
log=$(cat "runs/spread/logs/slurm-$job.out")
[ "$(job_field "$job" JobState)" = COMPLETED ] || fail "job ended $(job_field "$job" JobState): $log"
first_node_addr=$(scontrol show node -o n1 | sed -n 's/.* NodeAddr=\([^ ]*\).*/\1/p')
port=$((10000 + job % 20000))
for rank in 0 1; do
  grep -qF "program_demo: rank $rank of 2 (local 0 of 1) on n$((rank + 1)), master $first_node_addr:$port, restart 0" \
    <<<"$log" || fail "rank $rank: not on n$((rank + 1)) or not the rendezvous at $first_node_addr:$port: $log"
done
[ "$(last_metric runs/spread step)" = 40 ] || fail "did not train to step 40"
[ -s runs/spread/final.pt ] || fail "no final weights"
echo "PASS"
