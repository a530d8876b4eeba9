#!/usr/bin/env bash
# Writes configs/gpt2_124m.toml's run for one CPU rank: the model (GPT-2 124M, vocabulary 50257)
# and optimizer as they are, only the GPU-cluster settings changed: one rank, no GPUs, fp32,
# micro_batch 1 without accumulation, STEPS steps without warmup or evaluation, a log line per
# step, and DATA (an llm.c token file) as data.train. The 124M test and the CPU benchmark run it.
# Usage: scripts/gpt2_124m_on_cpu.sh OUT.toml DATA STEPS
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: $0 OUT.toml DATA STEPS" >&2; exit 2; }
out=$1 data=$2 steps=$3
sed -e "s|^train = .*|train = \"$data\"|" -e '/^val = /d' -e '/^tokenizer = /d' \
  -e 's/^ranks_per_node = .*/ranks_per_node = 1/' -e '/^gpus_per_node = /d' \
  -e "s/^steps = .*/steps = $steps/" -e 's/^micro_batch = .*/micro_batch = 1/' -e 's/^grad_accum = .*/grad_accum = 1/' \
  -e 's/^warmup_steps = .*/warmup_steps = 0/' -e 's/^eval_every = .*/eval_every = 0/' -e 's/^log_every = .*/log_every = 1/' \
  -e 's/^device = .*/device = "cpu"/' -e 's/^precision = .*/precision = "fp32"/' -e 's/^keep_best = .*/keep_best = false/' \
  "$(dirname "$0")/../configs/gpt2_124m.toml" >"$out"
grep -qx 'n_embd = 768' "$out" && grep -qx 'vocab_size = 50257' "$out" && grep -qx 'block_size = 1024' "$out" ||
  { echo "$0: configs/gpt2_124m.toml is not GPT-2 124M's shape" >&2; exit 1; }
