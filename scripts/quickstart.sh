#!/usr/bin/env bash
# The main job on a fresh Debian 12 machine (README): installs the dependencies, builds, starts
# the embedded one-node SLURM cluster when no SLURM is reachable, makes the demo dataset,
# submits configs/mlp_demo.toml, follows its log until it ends, and prints the final loss and
# where the checkpoints and metrics are.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
echo "== building (log: build.log)"
scripts/build.sh >build.log 2>&1 || { cat build.log; echo "quickstart: the build failed (above)" >&2; exit 1; }
trainctl=build/cli/trainctl

if ! timeout 10 sinfo -h >/dev/null 2>&1; then
  echo "== no SLURM reachable: starting the local one-node cluster (scripts/cluster.sh)"
  scripts/cluster.sh up --nodes 1
fi

if [ ! -f data/demo_train.h5 ]; then
  mkdir -p data
  "$trainctl" data synth -o data/demo_train.h5 --val-out data/demo_val.h5 --samples 16384 --seed 0
fi

run_dir=runs/mlp-demo-$(date +%Y%m%d-%H%M%S)
"$trainctl" validate configs/mlp_demo.toml
"$trainctl" submit configs/mlp_demo.toml --run-dir "$run_dir"
job=$(cat "$run_dir/job_id")

echo "== following job $job (trainctl logs $run_dir -f)"
log="$run_dir/logs/slurm-$job.out"
tail -n +1 -F "$log" 2>/dev/null &
tail_pid=$!
trap 'kill $tail_pid 2>/dev/null || true' EXIT
state=PENDING
while true; do
  state=$("$trainctl" status "$run_dir" --json | sed -nE 's/.*"state":"([A-Z_]+)".*/\1/p')
  case $state in COMPLETED | FAILED | CANCELLED | TIMEOUT | OUT_OF_MEMORY | NODE_FAIL) break ;; esac
  sleep 2
done
sleep 1
kill $tail_pid 2>/dev/null || true

echo
"$trainctl" status "$run_dir"
echo
echo "job $job: $state"
echo "final loss:   $(grep '"loss":' "$run_dir/metrics.jsonl" | tail -n 1 | sed -E 's/.*"loss":([-0-9.e+]+).*/\1/')"
echo "checkpoints:  $run_dir/checkpoints/ ($("$trainctl" ckpt ls "$run_dir" | wc -l) kept)"
echo "metrics:      $run_dir/metrics.jsonl"
[ "$state" = COMPLETED ]
