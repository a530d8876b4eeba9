#!/usr/bin/env bash
# On the real one-node cluster: trainctl submit runs a 2-rank job to completion through
# sbatch and srun --mpi=pmix; status (table, --json, and every run under runs/) and logs (also
# followed) report it; a second submit to the same run directory is refused; cancel ends a
# running job. A job that stops early is COMPLETED, never requeued, and status says so.
source "$(dirname "$0")/lib.sh"
require_cluster 1
make_data
write_config job.toml submit-test data.val='"data/val.h5"' train.eval_every=20
job=$(submit job.toml)
wait_for_job "$job" 120 COMPLETED FAILED CANCELLED
[ "$(job_field "$job" JobState)" = COMPLETED ] || { cat runs/submit-test/logs/*; fail "job $job did not complete"; }

"$TRAINCTL" status runs/submit-test | tee status.txt
grep -qE "submit-test +$job +COMPLETED +0 +40 " status.txt || fail "status does not show the completed job at step 40"
"$TRAINCTL" status runs/submit-test --json >status.json
grep -q "\"job_id\":\"$job\",\"state\":\"COMPLETED\"" status.json || fail "status --json: $(cat status.json)"
grep -q '"step":40,"loss":' status.json || fail "status --json lacks step and loss"
grep -q '"val_loss":' status.json || fail "status --json lacks val_loss"

"$TRAINCTL" status >status.txt && grep -qE "^runs/submit-test +$job +COMPLETED" status.txt || fail "status without arguments misses the run"

"$TRAINCTL" logs runs/submit-test >log.txt
grep -q "trainctl: training complete" log.txt || fail "the log lacks the completion line"
# -f keeps following until stopped; what it printed by then is the whole log.
timeout 2 "$TRAINCTL" logs runs/submit-test -f >followed.txt || [ $? -eq 124 ] || fail "logs -f failed"
cmp -s log.txt followed.txt || fail "logs -f printed something else than logs"
grep -q "step 40/40 | loss" log.txt || fail "the log lacks the progress lines"
[ "$(cat runs/submit-test/job.outcome)" = completed ] || fail "job.outcome is not 'completed'"

write_early_stop_config early.toml early-stop-test
early_job=$(submit early.toml)
wait_for_job "$early_job" 120 COMPLETED FAILED CANCELLED
"$TRAINCTL" status runs/early-stop-test | tee early_status.txt
grep -qE "early-stop-test +$early_job +COMPLETED +0 +55 .*completed; stopped early at step 55" early_status.txt ||
  fail "the early-stopped job is not COMPLETED at step 55 without requeues"
"$TRAINCTL" ckpt inspect runs/submit-test >inspect.txt && grep -q "world_size 2, global_batch 64" inspect.txt || fail "checkpoint meta"

if "$TRAINCTL" submit job.toml 2>refused.txt; then fail "a second submit reused the run directory"; fi
grep -q "already holds a run; pass --resume" refused.txt || fail "unclear refusal: $(cat refused.txt)"

write_config long.toml long-test train.steps=1000000 train.log_every=100
long_job=$(submit long.toml)
wait_for_step runs/long-test 100 60
[ "$("$TRAINCTL" cancel runs/long-test)" = "cancelled job $long_job" ] || fail "cancel did not confirm"
wait_for_job "$long_job" 60 CANCELLED
"$TRAINCTL" status runs/long-test >status.txt && grep -qE "^runs/long-test +$long_job +CANCELLED" status.txt || fail "status after cancel"
echo "PASS"
