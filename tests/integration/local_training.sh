#!/usr/bin/env bash
# Local data-parallel training without SLURM (trainctl run): the loss falls on synthetic data,
# and 2 ranks x grad_accum 1 gives the weights of 1 rank x grad_accum 2 (same global batch)
# to 1e-6 relative. The logged step time and peak RSS are plausible, the latter within what the
# kernel measured. data synth is deterministic from its seed.
source "$(dirname "$0")/lib.sh"
require_mpi
make_data
write_config two_ranks.toml two-ranks train.grad_accum=1 train.steps=60
write_config one_rank.toml one-rank train.grad_accum=2 train.steps=60
"$TRAINCTL" run two_ranks.toml --ranks 2 >two_ranks.log
# One rank, one process: its peak RSS as the kernel measured it (the largest waited-for
# descendant's), against the peak its metrics logged. The logged peak is the one so far at the
# last logged step; the final checkpoint write and the shutdown after it add about 50 MiB here.
/usr/bin/python3 - "$TRAINCTL" >measured_rss <<'PY'
import resource, subprocess, sys
with open("one_rank.log", "w") as log:
    subprocess.run([sys.argv[1], "run", "one_rank.toml", "--ranks", "1"], stdout=log, check=True)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)
PY

first_loss=$(grep '"loss":' runs/two-ranks/metrics.jsonl | head -n 1 | sed -E 's/.*"loss":([-0-9.e+]+).*/\1/')
final_loss=$(last_metric runs/two-ranks loss)
echo "loss: first logged $first_loss, final $final_loss"
awk -v first="$first_loss" -v final="$final_loss" 'BEGIN { exit !(final < 0.85 * first) }' ||
  fail "the loss did not fall: $first_loss -> $final_loss"
grep -q '"global_batch":64' runs/two-ranks/metrics.jsonl || fail "global batch 32 x 1 x 2 = 64 not logged"
logged_mib=$(last_metric runs/one-rank peak_rss_mb)
awk -v logged="$logged_mib" -v measured="$(cat measured_rss)" \
  'BEGIN { ratio = logged * 1048576 / measured; printf "peak RSS: logged %.1f MiB, measured %.1f MiB (%.3f)\n", logged, measured / 1048576, ratio; exit !(ratio > 0.5 && ratio <= 1.0) }' ||
  fail "the logged peak RSS is not within the measured one"
awk -v step_time="$(last_metric runs/one-rank step_time_s)" 'BEGIN { exit !(step_time > 0 && step_time < 10) }' ||
  fail "no plausible step_time_s logged"
grep -q ' ms/step | peak RSS [0-9]* MiB | ETA ' one_rank.log || fail "the progress line shows no step time and peak RSS"

"$TRAINCTL" ckpt diff "$(checkpoint_of runs/two-ranks 60)" "$(checkpoint_of runs/one-rank 60)" --rtol 1e-6
"$TRAINCTL" ckpt verify runs/two-ranks

# data synth is a function of its seed: the same seed writes the same samples.
"$TRAINCTL" data synth -o again.h5 --samples 8192 --features 32 --classes 4 --seed 11 >/dev/null
for dataset in x y; do
  cmp -s <(h5dump -d "/$dataset" data/train.h5 | tail -n +2) <(h5dump -d "/$dataset" again.h5 | tail -n +2) ||
    fail "data synth wrote a different /$dataset for the same seed"
done
echo "PASS"
