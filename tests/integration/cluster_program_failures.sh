#!/usr/bin/env bash
# A user's program that fails is not requeued; one that keeps exiting 75 without progress stops
# requeuing after its second run (docs/programs.md). On the real one-node cluster, both at once:
# - rank 0 exits 1 while rank 1 still runs: srun's --kill-on-bad-exit terminates rank 1 (srun
#   itself exits 143), yet the job fails with rank 0's code 1, unrequeued, and `status` says so;
# - a program that exits 75 and never writes progress.step is requeued once, then stopped;
# - `trainctl cancel` ends a program that is still running.
source "$(dirname "$0")/lib.sh"
require_cluster 1
cat >fails.toml <<'TOML'
[job]
name = "fails"
ranks_per_node = 2

[program]
command = ["sh", "-c", "if [ \"$RANK\" = 0 ]; then sleep 1; exit 1; fi; exec sleep 60"]
TOML
cat >stalls.toml <<'TOML'
[job]
name = "stalls"
max_requeues = 5

[program]
command = ["sh", "-c", "exit \"$TRAINCTL_EXIT_REQUEUE\""]
TOML
cat >waits.toml <<'TOML'
[job]
name = "waits"

[program]
command = ["sleep", "300"]
TOML
failing=$(submit fails.toml)
stalling=$(submit stalls.toml)
waiting=$(submit waits.toml)

wait_for_job "$failing" 60 FAILED COMPLETED CANCELLED
log=$(cat "runs/fails/logs/slurm-$failing.out")
[ "$(job_field "$failing" JobState)" = FAILED ] || fail "the failing job ended $(job_field "$failing" JobState): $log"
grep -q "trainctl-launch: rank 0 on .*: sh exited with code 1" <<<"$log" || fail "no word of rank 0's exit: $log"
grep -q "trainctl-launch: rank 1 on .*: sh was killed by signal 15 (Terminated)" <<<"$log" ||
  fail "rank 1 was not terminated by srun: $log"
grep -q "^trainctl: program failed with exit code 1$" <<<"$log" || fail "not failed with rank 0's code: $log"
! grep -q "requeuing" <<<"$log" || fail "a failed program was requeued: $log"
[ "$(job_field "$failing" Restarts)" = 0 ] || fail "Restarts $(job_field "$failing" Restarts)"
"$TRAINCTL" status runs/fails | tee status.txt
grep -qE "^runs/fails +$failing FAILED +0 +- +- +-  failed: exit 1$" status.txt || fail "status does not say exit 1"

wait_for_job "$stalling" 90 FAILED COMPLETED CANCELLED
log=$(cat "runs/stalls/logs/slurm-$stalling.out")
grep -q "^trainctl: saved at step 0; requeuing job $stalling (requeue 1 of 5)$" <<<"$log" || fail "no first requeue: $log"
grep -q "^trainctl: saved at step 0; not requeuing: 2 requeues in a row without step progress$" <<<"$log" ||
  fail "the no-progress guard did not stop the job: $log"
[ "$(job_field "$stalling" Restarts)" = 1 ] || fail "Restarts $(job_field "$stalling" Restarts)"
"$TRAINCTL" status runs/stalls | tee status.txt
grep -q "FAILED .* stopped: no progress; requeued: saved at step 0$" status.txt || fail "status does not say why it stopped"
wait_for_job "$waiting" 30 RUNNING
[ "$("$TRAINCTL" cancel runs/waits)" = "cancelled job $waiting" ] || fail "trainctl cancel did not cancel job $waiting"
wait_for_job "$waiting" 30 CANCELLED
"$TRAINCTL" status runs/waits >status.txt && grep -q " $waiting CANCELLED " status.txt || fail "status does not show the cancelled job"
echo "PASS"
