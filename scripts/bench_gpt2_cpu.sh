#!/usr/bin/env bash
# CPU benchmark of issue 8, reported in docs/benchmarks.md: GPT-2 training throughput in
# tokens/s of trainctl (`trainctl run`, one rank) side by side with PyTorch (Debian's
# python3-torch, eager: scripts/bench_torch_gpt2.py, the GPT-2 of tests/integration/gpt2_peer.py)
# on the same shape (4 layers, 256 wide, 4 heads, block 256, byte vocabulary), the same tokens
# (Debian's licence texts, unshuffled), micro-batch, init, AdamW and gradient clipping, one
# thread each; and trainctl with train.recompute = true, for its cost in tokens/s and its saving
# in memory. REPS rounds (default 3) each run the three in turn; the table gives medians.
# trainctl's tokens/s is the mean of its logged windows of 5 steps after the first; PyTorch is
# timed after as many warm-up steps. Peak memory is /usr/bin/time's maximum resident set size of
# each process (PyTorch's includes the libraries it loads).
# Usage: [REPS=3] [STEPS=30] [MICRO_BATCH=8] [TRAINCTL=path] scripts/bench_gpt2_cpu.sh [workdir]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench_lib.sh
reps=${REPS:-3}
steps=${STEPS:-30}
micro_batch=${MICRO_BATCH:-8}
log_every=5
source_dir=$PWD
work=${1:-$(mktemp -d /tmp/trainctl-gpt2-bench.XXXXXX)}
mkdir -p "$work"
cd "$work"
"$trainctl" data tokenize /usr/share/common-licenses/* -o train.bin >/dev/null

# config NAME RECOMPUTE: the benchmark's model and training, saving only at the end.
config() {
  cat >"$1.toml" <<TOML
[job]
name = "$1"
[model]
kind = "gpt2"
n_layer = 4
n_head = 4
n_embd = 256
block_size = 256
vocab_size = 256
[data]
train = "train.bin"
shuffle = false
[train]
steps = $steps
micro_batch = $micro_batch
optimizer = "adamw"
lr = 1e-3
weight_decay = 0.1
grad_clip = 1.0
seed = 1
log_every = $log_every
recompute = $2
[checkpoint]
keep_last = 1
TOML
}
config plain false
config recompute true

for rep in $(seq "$reps"); do
  for variant in plain recompute; do
    measure 1 "$variant" "$rep" "$trainctl" run "$variant.toml" --ranks 1 --run-dir "runs/$variant-$rep" >/dev/null
    echo "$(mean_logged_rate "runs/$variant-$rep" tokens_per_s)" >"rate.$variant.$rep"
  done
  measure 1 torch "$rep" /usr/bin/python3 "$source_dir/scripts/bench_torch_gpt2.py" --config plain.toml \
    --warmup-steps $log_every --steps $((steps - log_every)) >"torch.$rep.json"
  sed -E 's/.*"tokens_per_s": ([0-9.]+).*/\1/' "torch.$rep.json" >"rate.torch.$rep"
done

torch_version=$(sed -E 's/.*"torch": "([^"]+)".*/\1/' torch.1.json)
echo "== GPT-2: 4 layers, 256 wide, 4 heads, block 256, vocabulary 256; micro_batch $micro_batch" \
  "($((micro_batch * 256)) tokens a step), AdamW, grad_clip 1; $steps steps a run, one thread; medians of $reps runs"
echo "| program | tokens/s | runs | peak RSS |"
echo "| --- | --- | --- | --- |"
printf "| trainctl | %.0f | %s | %s MB |\n" "$(rate plain)" "$(runs plain)" "$(peak_mb plain)"
printf "| trainctl, recompute = true | %.0f (%s× of without) | %s | %s MB (%s× of without) |\n" "$(rate recompute)" \
  "$(ratio "$(rate recompute)" "$(rate plain)")" "$(runs recompute)" "$(peak_mb recompute)" \
  "$(ratio "$(peak_mb recompute)" "$(peak_mb plain)")"
printf "| PyTorch %s eager | %.0f | %s | %s MB |\n" "$torch_version" "$(rate torch)" "$(runs torch)" "$(peak_mb torch)"
echo "trainctl / PyTorch: $(ratio "$(rate plain)" "$(rate torch)")×"
machine_line
