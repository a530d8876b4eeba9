#!/usr/bin/env bash
# The main job on a fresh Debian 12 machine (README): installs the dependencies, builds and
# installs trainctl (/usr/local as root, else ~/.local, or $TRAINCTL_PREFIX), starts
# the embedded one-node SLURM cluster when no SLURM is reachable, tokenizes the demo text (the
# licences under /usr/share/common-licenses), and submits configs/gpt2_demo.toml: a byte-level
# GPT-2 on 2 ranks. Then the headline: midway it signals the job as SLURM does before a time
# limit or a preemption, and the job saves, requeues itself, resumes from its checkpoint and
# completes. It prints the final loss, the requeue count and a sample of the trained model's text.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== installing the Debian packages (scripts/install-deps.sh)"
scripts/install-deps.sh
echo "== building (scripts/build.sh)"
scripts/build.sh || { echo "quickstart: the build failed (above)" >&2; exit 1; }
trainctl=build/cli/trainctl

# Installed, trainctl is on PATH, as the README's "Using it" runs it: system-wide as root, else
# under ~/.local; TRAINCTL_PREFIX chooses another prefix.
prefix=${TRAINCTL_PREFIX:-$([ "$(id -u)" -eq 0 ] && echo /usr/local || echo "$HOME/.local")}
echo "== installing trainctl into $prefix (meson install)"
meson configure build --prefix "$prefix" >/dev/null
meson install -C build --quiet >/dev/null
if [ "$(command -v trainctl)" != "$prefix/bin/trainctl" ]; then
  echo "== to run trainctl by name: export PATH=\"$prefix/bin:\$PATH\""
fi

if ! timeout 10 sinfo -h >/dev/null 2>&1; then
  echo "== no SLURM reachable: starting the local one-node cluster (scripts/cluster.sh)"
  scripts/cluster.sh up --nodes 1
fi

if [ ! -f demo-data/licenses_train.bin ]; then
  echo "== tokenizing the demo text, the licences in /usr/share/common-licenses, into demo-data/"
  mkdir -p demo-data
  mapfile -t texts < <(find /usr/share/common-licenses -maxdepth 1 -type f | sort)
  "$trainctl" data tokenize "${texts[@]}" -o demo-data/licenses_train.bin --val-out demo-data/licenses_val.bin
fi

run_dir=runs/gpt2-demo-$(date +%Y%m%d-%H%M%S)
echo "== submitting configs/gpt2_demo.toml into $run_dir"
"$trainctl" validate configs/gpt2_demo.toml
"$trainctl" submit configs/gpt2_demo.toml --run-dir "$run_dir"
job=$(cat "$run_dir/job_id")

echo "== following job $job (trainctl logs $run_dir -f)"
log="$run_dir/logs/slurm-$job.out"
tail -n +1 -F "$log" 2>/dev/null &
tail_pid=$!
trap 'kill $tail_pid 2>/dev/null || true' EXIT

last_step() { sed -nE 's/^\{"step":([0-9]+),"loss".*/\1/p' "$run_dir/metrics.jsonl" 2>/dev/null | tail -n 1; }
state_of_run() { "$trainctl" status "$run_dir" --json | sed -nE 's/.*"state":"([A-Z_]+)".*/\1/p'; }
finished() { case $1 in COMPLETED | FAILED | CANCELLED | TIMEOUT | OUT_OF_MEMORY | NODE_FAIL) return 0 ;; esac; return 1; }

log_size() { stat -c %s "$log" 2>/dev/null || echo 0; }

# The preemption: once the job is a third of the way through (step 400 of 1200), SIGTERM to its ranks, which is
# what SLURM sends (#SBATCH --signal) before a time limit or when it preempts the job.
preempt_at=400
signalled=0
state=PENDING
size=0
news_at=$SECONDS
said_at=$SECONDS
until finished "$state"; do
  step=$(last_step)
  if [ $signalled = 0 ] && [ -n "${step:-}" ] && [ "$step" -ge "$preempt_at" ]; then
    echo "== step $step: signalling job $job (scancel -s TERM), as SLURM does before preempting it"
    scancel -s TERM "$job"
    signalled=1
  fi
  sleep 1
  state=$(state_of_run)
  # The log is quiet while the job waits to start, and again while a requeued job is held (~10 s)
  # and starts up: a line at least every 15 s says so (this loop comes round every second or so,
  # and SECONDS counts whole seconds).
  if [ "$(log_size)" != "$size" ]; then
    size=$(log_size)
    news_at=$SECONDS said_at=$SECONDS
  elif ((SECONDS - said_at >= 13)); then
    echo "== job $job: $state, last step ${step:-none}; nothing new in its log for $((SECONDS - news_at)) s"
    said_at=$SECONDS
  fi
done
sleep 1
kill $tail_pid 2>/dev/null || true

echo
"$trainctl" status "$run_dir"
echo
echo "job $job: $state"
echo "final loss:   $(grep '"loss":' "$run_dir/metrics.jsonl" | tail -n 1 | sed -E 's/.*"loss":([-0-9.e+]+).*/\1/')"
echo "requeues:     $(cat "$run_dir/requeue.count")"
echo "checkpoints:  $run_dir/checkpoints/ ($("$trainctl" ckpt ls "$run_dir" | wc -l) kept)"
echo "metrics:      $run_dir/metrics.jsonl"
[ "$state" = COMPLETED ]
echo
echo "== a sample of the trained model (trainctl sample $run_dir --prompt ...)"
"$trainctl" sample "$run_dir" --prompt "This License" --tokens 300 --temperature 0.8 --top-k 40 --seed 1
