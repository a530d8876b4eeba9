#!/usr/bin/env bash
# Local data-parallel training without SLURM (trainctl run): the loss falls on synthetic data,
# and 2 ranks x grad_accum 1 gives the weights of 1 rank x grad_accum 2 (same global batch)
# to 1e-6 relative. The logged step time and peak RSS are plausible, the latter within what the
# kernel measured. The 2-rank run's Prometheus textfile passes promtool and holds exactly the
# values of its last metrics lines. data synth is deterministic from its seed. `plot` draws the
# run at the size asked for and refuses formats other than PNG and SVG.
source "$(dirname "$0")/lib.sh"
require_mpi
make_data
write_config two_ranks.toml two-ranks train.grad_accum=1 train.steps=60 data.val='"data/val.h5"'
printf '[metrics]\nprometheus = "metrics.prom"\n' >>two_ranks.toml
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

first_loss=$(grep -m 1 '"loss":' runs/two-ranks/metrics.jsonl | sed -E 's/.*"loss":([-0-9.e+]+).*/\1/')
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

# Written by rank 0 only, after the last step line and again after the final evaluation.
command -v promtool >/dev/null || fail "promtool is missing: scripts/install-deps.sh installs it (Debian package prometheus)"
promtool check metrics <runs/two-ranks/metrics.prom || fail "promtool rejects runs/two-ranks/metrics.prom (above)"
/usr/bin/python3 - runs/two-ranks <<'PY' || fail "runs/two-ranks/metrics.prom differs from metrics.jsonl (above)"
import json, os, re, socket, sys
run = sys.argv[1]
records = [json.loads(line) for line in open(f"{run}/metrics.jsonl")]
step = [record for record in records if "loss" in record][-1]
evaluation = [record for record in records if "val_loss" in record][-1]
labels = (os.environ.get("SLURM_JOB_ID", "two-ranks"), "two-ranks", socket.gethostname())
gauges = {}
for line in open(f"{run}/metrics.prom"):
    if line.startswith("#"):
        continue
    sample = re.fullmatch(r'(\w+)\{job="([^"]*)",run="([^"]*)",host="([^"]*)"\} (\S+)\n', line)
    assert sample and sample.group(2, 3, 4) == labels, f"unexpected sample {line!r}, labels {labels}"
    gauges[sample[1]] = float(sample[5])
expected = {"trainctl_step": step["step"], "trainctl_loss": step["loss"], "trainctl_val_loss": evaluation["val_loss"],
            "trainctl_samples_per_second": step["samples_per_s"], "trainctl_step_seconds": step["step_time_s"],
            "trainctl_peak_rss_bytes": step["peak_rss_mb"] * 2**20,
            "trainctl_requeues": int(os.environ.get("SLURM_RESTART_COUNT", "0"))}
if "mfu" in step:
    expected["trainctl_mfu"] = step["mfu"]
assert gauges == expected, f"metrics.prom {gauges}\nmetrics.jsonl {expected}"
print(f"metrics.prom: {len(gauges)} gauges equal to metrics.jsonl's last lines")
PY

"$TRAINCTL" ckpt diff "$(checkpoint_of runs/two-ranks 60)" "$(checkpoint_of runs/one-rank 60)" --rtol 1e-6
"$TRAINCTL" ckpt verify runs/two-ranks

# data synth is a function of its seed: the same seed writes the same samples.
"$TRAINCTL" data synth -o again.h5 --samples 8192 --features 32 --classes 4 --seed 11 >/dev/null
for dataset in x y; do
  cmp -s <(h5dump -d "/$dataset" data/train.h5 | tail -n +2) <(h5dump -d "/$dataset" again.h5 | tail -n +2) ||
    fail "data synth wrote a different /$dataset for the same seed"
done

# trainctl plot: a PNG of the requested size where status says it goes; other formats are refused.
"$TRAINCTL" status runs/two-ranks >status.txt &&
  grep -qxF "plot: trainctl plot runs/two-ranks  (writes runs/two-ranks/loss.png)" status.txt ||
  fail "status does not say where the plot goes"
[ "$("$TRAINCTL" plot runs/two-ranks --width 640 --height 360)" = "wrote runs/two-ranks/loss.png" ] ||
  fail "plot did not write runs/two-ranks/loss.png"
[ "$(png_size runs/two-ranks/loss.png)" = 640x360 ] || fail "the plot is $(png_size runs/two-ranks/loss.png), not 640x360"
expect_exit 2 "$TRAINCTL" plot runs/two-ranks -o bad.jpg
grep -q "plot writes .png or .svg files" err.txt || fail "plot -o bad.jpg: $(cat err.txt)"
echo "PASS"
