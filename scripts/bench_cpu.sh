#!/usr/bin/env bash
# CPU benchmarks of issue 2, reported in docs/benchmarks.md:
#  1. training throughput (samples/s) at 1 and 2 ranks, side by side with PyTorch (Debian's
#     python3-torch, eager) training the same MLP on the same data and global batch in one
#     process, one thread per process everywhere: the demo MLP (32-128-128-4, where per-op
#     overhead dominates) and a wider one (32-1024-1024-4, batch 512, where GEMMs do);
#  2. checkpoint write MB/s of a ~50 MB checkpoint against `dd ... conv=fsync` of the same size
#     on the same disk, in the same run.
# Usage: [TRAINCTL=path] scripts/bench_cpu.sh [workdir]    (builds first unless TRAINCTL is given)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench_lib.sh
work=${1:-$(mktemp -d /tmp/trainctl-bench.XXXXXX)}
mkdir -p "$work"
source_dir=$PWD
cd "$work"
steps=3000
"$trainctl" data synth -o train.h5 --samples 16384 --features 32 --classes 4 --seed 0 >/dev/null

# config NAME HIDDEN MICRO_BATCH EVERY_STEPS: the demo model without validation, logging every 100 steps.
config() {
  cat >"$1.toml" <<TOML
[job]
name = "$1"
[model]
inputs = 32
hidden = $2
classes = 4
activation = "gelu"
[data]
train = "train.h5"
[train]
steps = $steps
micro_batch = $3
optimizer = "adamw"
lr = 1e-3
weight_decay = 0.01
log_every = 100
[checkpoint]
every_steps = $4
keep_last = 2
TOML
}

# compare HIDDEN_TOML HIDDEN_ARGS BATCH LABEL: trainctl at 1 and 2 ranks against PyTorch, same global batch.
compare() {
  config "one_$4" "$1" "$3" $steps
  config "two_$4" "$1" $(($3 / 2)) $steps
  OPENBLAS_NUM_THREADS=1 "$trainctl" run "one_$4.toml" >/dev/null
  OPENBLAS_NUM_THREADS=1 "$trainctl" run "two_$4.toml" --ranks 2 >/dev/null
  local one two torch torch_rate
  one=$(mean_logged_rate "runs/one_$4" samples_per_s)
  two=$(mean_logged_rate "runs/two_$4" samples_per_s)
  # shellcheck disable=SC2086  # HIDDEN_ARGS is a list of widths
  # OPENBLAS_NUM_THREADS too: Debian's PyTorch reaches OpenBLAS, which torch.set_num_threads does not govern.
  torch=$(OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 /usr/bin/python3 "$source_dir/scripts/bench_torch_mlp.py" --data train.h5 --hidden $2 --classes 4 \
    --batch "$3" --steps $steps --threads 1)
  torch_rate=$(sed -E 's/.*"samples_per_s": ([0-9.]+).*/\1/' <<<"$torch")
  echo "== MLP 32-${2// /-}-4 (gelu), AdamW, global batch $3, $steps steps, 1 thread per process"
  printf "trainctl 1 rank:   %8.0f samples/s\n" "$one"
  printf "trainctl 2 ranks:  %8.0f samples/s (%.2fx of 1 rank)\n" "$two" "$(bc -l <<<"$two / $one")"
  printf "PyTorch %s eager, 1 process: %8.0f samples/s\n" "$(sed -E 's/.*"torch": "([^"]+)".*/\1/' <<<"$torch")" \
    "$torch_rate"
  printf "ratio trainctl / PyTorch at 1 process: %.2f\n" "$(bc -l <<<"$one / $torch_rate")"
}
compare '[128, 128]' '128 128' 128 demo
steps=300
compare '[1024, 1024]' '1024 1024' 512 wide

echo "== checkpoint write: MLP 32-2048-2048-4 with AdamW state, a save after each of 6 steps"
steps=6
config big '[2048, 2048]' 8 1
OPENBLAS_NUM_THREADS=1 "$trainctl" run big.toml >/dev/null
grep '"event":"checkpoint"' runs/big/metrics.jsonl | sed -E 's/.*"detail":"[^(]*\((.*)\)".*/trainctl save: \1/'
bytes=$(stat -c %s runs/big/checkpoints/step-00000006.h5)
dd_line=$(dd if=/dev/zero of=dd.out bs=1M count=$((bytes / 1048576)) conv=fsync 2>&1 | tail -n 1)
echo "dd conv=fsync, same size and disk: $dd_line"
rm -f dd.out
echo "$(machine_line); disk: $(df -h . | tail -n 1 | awk '{print $1}')"
