#!/usr/bin/env bash
# Checkpoint and ZeRO-1 benchmarks of issue 22, reported in docs/benchmarks.md:
#  1. The training stall per save, synchronous against asynchronous (checkpoint.async), on one
#     rank of an MLP whose checkpoint is 606 MB (50.5 M parameters, AdamW): the time the training
#     loop waits in a save (the runtime's checkpoint_stall event), and the time the whole run
#     loses per save against a run that saves only at its end (the writer thread competes for the
#     cores). Both as a fraction of a minute, the budget at one save a minute, and beside the time
#     PyTorch's torch.save (Debian's python3-torch) takes to write the same tensors, fsynced.
#     Saves are 30 steps apart, so each write has finished before the next save, as at one save a
#     minute. One BLAS thread: the other core is the writer's, as a GPU run leaves the CPU free.
#  2. Writing a 301 MB checkpoint from 4 ranks: every rank its shard in parallel
#     (checkpoint.sharded), beside rank 0 writing the same bytes alone, beside `dd conv=fsync`
#     of that many bytes, on the same disk in the same run; the median of 3.
#  3. Peak RSS per rank at 4 ranks with zero = 0 and zero = 1 (rank 0's, before the final save's
#     staging), beside the estimate's optimizer state.
# Usage: [TRAINCTL=path] scripts/bench_checkpoints.sh [workdir]   (builds first unless TRAINCTL is given)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench_lib.sh
# On the disk, not a tmpfs: what is measured is the write.
work=${1:-$(mktemp -d /var/tmp/trainctl-bench-checkpoints.XXXXXX)}
mkdir -p "$work"
cd "$work"
"$trainctl" data synth -o train.h5 --samples 4096 --features 32 --classes 4 --seed 0 >/dev/null
machine=$(machine_line)  # before OMP_NUM_THREADS, which nproc obeys
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1

# config NAME HIDDEN STEPS MICRO_BATCH KEY=VALUE...: an MLP without validation, a metrics line per
# step; each KEY=VALUE (TOML, KEY as table.key) is added to its table.
config() {
  local name=$1 hidden=$2 steps=$3 micro_batch=$4
  shift 4
  {
    printf '[job]\nname = "%s"\n' "$name"
    for pair in "$@"; do if [[ $pair == job.* ]]; then echo "${pair#job.}"; fi; done
    printf '[model]\ninputs = 32\nhidden = %s\nclasses = 4\n' "$hidden"
    printf '[data]\ntrain = "train.h5"\n[train]\nsteps = %s\nmicro_batch = %s\nlr = 1e-4\nlog_every = 1\n' \
      "$steps" "$micro_batch"
    for pair in "$@"; do if [[ $pair == train.* ]]; then echo "${pair#train.}"; fi; done
    echo "[checkpoint]"
    for pair in "$@"; do if [[ $pair == checkpoint.* ]]; then echo "${pair#checkpoint.}"; fi; done
  } >"$name.toml"
}
# save_seconds RUN STEP: the seconds of the save at STEP, from its checkpoint event.
save_seconds() {
  sed -nE "s/.*\"step\":$2,\"event\":\"checkpoint\",\"detail\":\"[^(]*\\([0-9.]+ MB in ([0-9.]+) s.*/\\1/p" \
    "$1/metrics.jsonl"
}
# train_seconds RUN FIRST LAST: the summed step_time_s of steps FIRST to LAST.
train_seconds() {
  sed -nE 's/^\{"step":([0-9]+),"loss".*"step_time_s":([0-9.e+-]+).*/\1 \2/p' "$1/metrics.jsonl" |
    awk -v first="$2" -v last="$3" '$1 >= first && $1 <= last { s += $2 } END { printf "%.3f", s }'
}
mean() { awk '{ s += $1; n++ } END { printf "%.3f", s / n }'; }

echo "== 1. the training stall per save (1 rank, 606 MB checkpoints, saves at steps 30, 60 and 90)"
wide='[4096, 4096, 4096, 4096]'
config nosave "$wide" 100 16
config sync "$wide" 100 16 checkpoint.every_steps=30
config async "$wide" 100 16 checkpoint.every_steps=30 checkpoint.async=true
for run in nosave sync async; do "$trainctl" run "$run.toml" --ranks 1 >/dev/null; done
bytes=$(stat -c %s runs/sync/checkpoints/step-00000100.h5)
step=$(train_seconds runs/nosave 2 99 | awk '{ printf "%.4f", $1 / 98 }')
sync_stall=$(grep -E '"step":(30|60|90),"event":"checkpoint_stall"' runs/sync/metrics.jsonl |
  sed -nE 's/.*"detail":"([0-9.]+) s".*/\1/p' | mean)
async_stall=$(grep -E '"step":(30|60|90),"event":"checkpoint_stall"' runs/async/metrics.jsonl |
  sed -nE 's/.*"detail":"([0-9.]+) s".*/\1/p' | mean)
# Steps 2-99 hold the three saves' stalls (each counted in the step after it) and the writes.
lost() { awk -v with="$(train_seconds "$1" 2 99)" -v without="$(train_seconds runs/nosave 2 99)" \
  'BEGIN { printf "%.3f", (with - without) / 3 }'; }
sync_lost=$(lost runs/sync) async_lost=$(lost runs/async)
torch_seconds=$(/usr/bin/python3 - "$bytes" <<'PY'
import os, sys, time, torch
# The same bytes as the checkpoint: weights and AdamW's two moments, float32.
floats = (int(sys.argv[1]) // 4) // 3
state = {name: torch.zeros(floats) for name in ("weights", "exp_avg", "exp_avg_sq")}
best = None
for _ in range(3):
    start = time.perf_counter()
    with open("torch.pt", "wb") as out:
        torch.save(state, out)
        out.flush()
        os.fsync(out.fileno())
    elapsed = time.perf_counter() - start
    best = elapsed if best is None else min(best, elapsed)
    os.remove("torch.pt")
print(f"{best:.3f}")
PY
)
awk -v mb="$(awk -v b="$bytes" 'BEGIN { printf "%.0f", b / 1e6 }')" -v step="$step" -v sync="$sync_stall" \
  -v async="$async_stall" -v sync_lost="$sync_lost" -v async_lost="$async_lost" -v torch="$torch_seconds" 'BEGIN {
  printf "checkpoint %s MB; step %.3f s\n", mb, step
  printf "sync:  stall %.3f s a save (%.2f%% of a minute); run loses %.3f s a save\n", sync, 100 * sync / 60, sync_lost
  printf "async: stall %.3f s a save (%.2f%% of a minute, %.1f%% of the sync stall); run loses %.3f s a save (%.2f%% of a minute)\n",
    async, 100 * async / 60, 100 * async / sync, async_lost, 100 * async_lost / 60
  printf "torch.save of the same bytes, fsynced (best of 3): %.3f s; trainctl sync stall / torch.save = %.2f\n",
    torch, sync / torch }'

echo "== 2. writing a checkpoint from 4 ranks (median of 3)"
medium='[4096, 4096, 2048]'
for rep in 1 2 3; do
  config "sharded$rep" "$medium" 3 4 train.zero=1
  config "whole$rep" "$medium" 3 4
  "$trainctl" run "sharded$rep.toml" --ranks 4 >/dev/null
  "$trainctl" run "whole$rep.toml" --ranks 4 >/dev/null
  save_seconds "runs/sharded$rep" 3 >>sharded.seconds
  save_seconds "runs/whole$rep" 3 >>whole.seconds
  shard_bytes=$(find runs/sharded1/checkpoints/step-00000003 -name 'shard-*' -printf '%s\n' | awk '{ s += $1 } END { print s }')
  start=$(date +%s.%N)
  dd if=/dev/zero of=dd.out bs=1M count=$((shard_bytes / 1048576)) conv=fsync status=none
  awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { print e - s }' >>dd.seconds
  rm dd.out
done
awk -v mb="$(awk -v b="$shard_bytes" 'BEGIN { printf "%.0f", b / 1e6 }')" -v sharded="$(median <sharded.seconds)" \
  -v whole="$(median <whole.seconds)" -v dd="$(median <dd.seconds)" 'BEGIN {
  printf "%s MB: 4 ranks in parallel %.3f s (%.0f MB/s); rank 0 alone %.3f s (%.0f MB/s); dd conv=fsync %.3f s (%.0f MB/s)\n",
    mb, sharded, mb / sharded, whole, mb / whole, dd, mb / dd
  printf "parallel / rank 0 alone: %.2fx faster; parallel / dd: %.2f of dd'"'"'s rate\n", whole / sharded, dd / sharded }'

echo "== 3. peak RSS per rank at 4 ranks, zero = 0 and 1 (the 301 MB model, 25.1 M parameters)"
for zero in 0 1; do
  config "rss$zero" "$medium" 3 4 train.zero=$zero job.ranks_per_node=4
  "$trainctl" run "rss$zero.toml" --ranks 4 >/dev/null
  "$trainctl" estimate "rss$zero.toml" | sed -n 's/^  optimizer state (adamw[^)]*)  *\([0-9.]*\)$/\1/p' >"estimate$zero"
done
peak() { sed -nE 's/.*"peak_rss_mb":([0-9.]+).*/\1/p' "runs/$1/metrics.jsonl" | tail -n 1; }
awk -v m0="$(peak rss0)" -v m1="$(peak rss1)" -v e0="$(cat estimate0)" -v e1="$(cat estimate1)" 'BEGIN {
  printf "zero = 0: %.0f MiB; zero = 1: %.0f MiB; %.0f MiB less, the estimate says %.0f (optimizer state %.0f -> %.0f MiB)\n",
    m0, m1, m0 - m1, e0 - e1, e0, e1 }'
echo "$machine"
echo "disk: $(df -h --output=source,fstype . | tail -n 1)"
