#!/usr/bin/env bash
# GPT-2 on GPUs across the real two-node cluster, 2 nodes x 2 fake GPUs (scripts/cluster.sh
# --gpus 2; SLURM schedules them and sets CUDA_VISIBLE_DEVICES), with train.device = "cuda" on
# the CPU implementation of CUDA (TRAINCTL_CUDA_BACKEND=cpu, which sbatch passes on): 4 ranks
# reduce their gradients over NCCL (on MPI, here over TCP between the nodes). Signalled mid-run
# (scancel -s TERM), the job saves, requeues itself, resumes from that checkpoint and ends with
# weights bitwise equal to an uninterrupted 4-rank run's. Each rank says which GPU it took: the
# four (node, GPU) pairs are distinct, two GPUs on each node.
source "$(dirname "$0")/lib.sh"
require_cluster 2 2
make_token_data
export TRAINCTL_CUDA_BACKEND=cpu
settings=(model.kind='"gpt2"' job.nodes=2 job.ranks_per_node=2 job.gpus_per_node=2 job.cpus_per_rank=1
  job.env='{ OMPI_MCA_btl = "self,tcp" }' train.device='"cuda"' train.steps=60 train.lr=1e-3 train.log_every=5
  checkpoint.every_steps=20)
write_config preempted.toml gpus-preempted "${settings[@]}"
write_config reference.toml gpus-reference "${settings[@]}"

# The test hook holds rank 0 at the start of step 10 until the signal: it lands mid-run however
# fast the machine trains.
job=$(TRAINCTL_TEST_PAUSE_IN=step@10 submit preempted.toml)
grep -q -- "--gpus-per-node=2" runs/gpus-preempted/job.sbatch || fail "the batch script asks for no GPUs"
wait_until_paused runs/gpus-preempted step@10 240
scancel -s TERM "$job"
wait_for_job "$job" 300 COMPLETED FAILED CANCELLED
log=runs/gpus-preempted/logs/slurm-$job.out
[ "$(job_field "$job" JobState)" = COMPLETED ] || { cat "$log"; fail "job $job did not complete"; }
expect_one_signal_requeue "$job" runs/gpus-preempted
stop_step=$(sed -nE 's/.*"step":([0-9]+),"event":"stop".*/\1/p' runs/gpus-preempted/metrics.jsonl)
[ "$stop_step" = 11 ] || fail "stopped at step '$stop_step', not at 11"
grep -q "\"step\":$stop_step,\"event\":\"resume\"" runs/gpus-preempted/metrics.jsonl || fail "no resume at $stop_step"
echo "signalled, saved and resumed at step $stop_step"

# "trainctl-runtime: rank R of 4 on NODE: CUDA on CPU ... (visible GPU L of
# CUDA_VISIBLE_DEVICES="0,1", PCI ..., GPU-...)", once per rank and run.
grep -m 4 "^trainctl-runtime: rank [0-3] of 4 on " "$log" >gpus.txt
sed -nE 's/^trainctl-runtime: rank ([0-3]) of 4 on ([^:]+): .*\(visible GPU ([0-9]) of CUDA_VISIBLE_DEVICES="0,1", .*(GPU-[0-9a-f-]+)\)$/\1 \2 \3 \4/p' \
  gpus.txt >taken.txt
cat taken.txt
[ "$(wc -l <taken.txt)" = 4 ] || fail "not every rank said which GPU it took: $(cat gpus.txt)"
[ "$(cut -d' ' -f2,4 taken.txt | sort -u | wc -l)" = 4 ] || fail "two ranks took the same GPU"
[ "$(cut -d' ' -f2 taken.txt | sort | uniq -c | awk '{print $1}' | sort -u)" = 2 ] ||
  fail "the ranks are not two on each node"

"$TRAINCTL" run reference.toml --ranks 4 >reference.log 2>&1 || fail "the uninterrupted run failed: $(cat reference.log)"
"$TRAINCTL" ckpt diff "$(checkpoint_of runs/gpus-reference 60)" "$(checkpoint_of runs/gpus-preempted 60)"
echo "PASS"
