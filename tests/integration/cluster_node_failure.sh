#!/usr/bin/env bash
# A node failure on the real two-node cluster: the slurmd of n2 is killed (SIGKILL) in the middle
# of a job with one rank on each node. Once n2 has not answered for SlurmdTimeout, slurmctld marks
# it down and requeues the job itself (the batch script on n1 is killed, with no word of its own);
# when n2's slurmd is back, the job starts again, resumes from its last checkpoint and completes
# with weights bitwise equal to an uninterrupted run's. job.outcome tells of SLURM's requeue.
# The test hook TRAINCTL_TEST_PAUSE_IN (docs/runtime.md) holds rank 0 (on n1) at the start of step
# 500 until SLURM's signal comes, so the job cannot finish before SLURM has noticed the dead node,
# however fast the machine trains; n2's rank waits in that step's gradient all-reduce meanwhile.
source "$(dirname "$0")/lib.sh"
require_cluster 2
make_data
# Both "nodes" share this machine's host name (see cluster_two_node.sh).
settings=(job.nodes=2 job.ranks_per_node=1 job.env='{ OMPI_MCA_btl = "self,tcp" }' model.hidden='[512, 512]'
  train.micro_batch=128 train.steps=1000 train.log_every=25 checkpoint.every_steps=250)
write_config node.toml node "${settings[@]}"
write_config reference.toml reference "${settings[@]}"

readonly n2_pid_file=/run/trainctl-cluster/slurmd-n2.pid
restart_n2() { pgrep -x slurmd >/dev/null && [ -s "$n2_pid_file" ] && kill -0 "$(cat "$n2_pid_file")" 2>/dev/null || slurmd -N n2; }
trap 'restart_n2 2>/dev/null || true; cleanup' EXIT

job=$(TRAINCTL_TEST_PAUSE_IN=step@500 submit node.toml)
wait_until_paused runs/node step@500 120
kill -9 "$(cat "$n2_pid_file")"
killed_at=$SECONDS
echo "killed slurmd of n2 with rank 0 held at the start of step 500"
# The uninterrupted run, with the same world size, while SLURM notices.
"$TRAINCTL" run reference.toml --ranks 2 >reference.log 2>&1 &
reference=$!

deadline=$((SECONDS + 60))
until [ "$(job_field "$job" Restarts)" = 1 ]; do
  [ $SECONDS -lt $deadline ] || { scontrol show job "$job"; fail "SLURM did not requeue job $job after n2's slurmd died"; }
  sleep 0.5
done
echo "SLURM requeued job $job $((SECONDS - killed_at)) s after n2's slurmd died; n2 is $(sinfo -h -n n2 -o %t)"
slurmd -N n2
wait_for_job "$job" 240 COMPLETED FAILED CANCELLED
echo "job $job ended (${SECONDS} s)"
log=$(cat runs/node/logs/slurm-"$job".out)
[ "$(job_field "$job" JobState)" = COMPLETED ] || { echo "$log"; fail "job $job did not complete"; }
[ "$(job_field "$job" Restarts)" = 1 ] || fail "expected one requeue, got $(job_field "$job" Restarts)"
[ "$(job_field "$job" NodeList)" = "n[1-2]" ] || fail "the job ended on $(job_field "$job" NodeList), not n[1-2]"

resume_step=$(sed -nE 's/.*"step":([0-9]+),"event":"resume".*/\1/p' runs/node/metrics.jsonl)
# n1's rank gets SLURM's SIGTERM as the job is requeued while n2's, out of slurmd's reach, trains
# on: when both still agree on a step, the stop is a save at the next step boundary; otherwise the
# job resumes from the last scheduled checkpoint.
[ "$resume_step" -ge 500 ] || fail "resumed at step '$resume_step'"
grep -qE '^requeued: by SLURM at step [0-9]+ \(the run before ended without the batch script.s word\)$' \
  runs/node/job.outcome || fail "job.outcome: $(cat runs/node/job.outcome)"
[ "$(head -n 1 runs/node/job.outcome)" = completed ] || fail "job.outcome: $(cat runs/node/job.outcome)"
"$TRAINCTL" status runs/node
echo "requeued by SLURM, resumed at step $resume_step"

wait "$reference" || fail "the reference run failed: $(cat reference.log)"
"$TRAINCTL" ckpt diff "$(checkpoint_of runs/reference 1000)" "$(checkpoint_of runs/node 1000)"
echo "PASS"
