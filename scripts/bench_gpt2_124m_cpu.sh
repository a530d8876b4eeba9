#!/usr/bin/env bash
# GPT-2 124M on this CPU (issue 21), reported in docs/benchmarks.md: training tokens/s of
# trainctl (`trainctl run` of configs/gpt2_124m.toml's model and optimizer on one CPU rank,
# scripts/gpt2_124m_on_cpu.sh: micro_batch 1 x 1024 tokens, vocabulary 50257 padded to 50304)
# side by side with PyTorch eager (Debian's python3-torch, scripts/bench_torch_gpt2.py: the same
# model unpadded, tokens, init, AdamW and gradient clipping), on one thread and on all cores.
# REPS rounds (default 1: a step takes seconds) run the four in turn; the table gives medians.
# trainctl's tokens/s is the mean of its per-step log lines after the first; PyTorch is timed
# after one warm-up step.
# Usage: [REPS=1] [STEPS=6] [TRAINCTL=path] scripts/bench_gpt2_124m_cpu.sh [workdir]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench_lib.sh
reps=${REPS:-1}
steps=${STEPS:-6}
all_threads=$(nproc)
source_dir=$PWD
work=${1:-$(mktemp -d /tmp/trainctl-gpt2-124m-bench.XXXXXX)}
mkdir -p "$work"
cd "$work"
"$trainctl" data tokenize /usr/share/common-licenses/* -o train.bin >/dev/null
"$source_dir/scripts/gpt2_124m_on_cpu.sh" gpt2_124m.toml train.bin "$steps"

for rep in $(seq "$reps"); do
  for threads in 1 "$all_threads"; do
    measure "$threads" "trainctl-$threads" "$rep" "$trainctl" run gpt2_124m.toml --ranks 1 \
      --run-dir "runs/$threads-$rep" >/dev/null
    echo "$(mean_logged_rate "runs/$threads-$rep" tokens_per_s)" >"rate.trainctl-$threads.$rep"
    rm -rf "runs/$threads-$rep/checkpoints"  # 1.5 GB each
    measure "$threads" "torch-$threads" "$rep" /usr/bin/python3 "$source_dir/scripts/bench_torch_gpt2.py" \
      --config gpt2_124m.toml --threads "$threads" --warmup-steps 1 --steps $((steps - 1)) >"torch-$threads.$rep.json"
    sed -E 's/.*"tokens_per_s": ([0-9.]+).*/\1/' "torch-$threads.$rep.json" >"rate.torch-$threads.$rep"
  done
done

torch_version=$(sed -E 's/.*"torch": "([^"]+)".*/\1/' "torch-1.1.json")
echo "== GPT-2 124M (12 x 768, 12 heads, block 1024, vocabulary 50257): micro_batch 1 (1024 tokens a step)," \
  "AdamW, grad_clip 1; $steps steps a run; medians of $reps runs"
echo "| threads | trainctl tokens/s | PyTorch $torch_version eager tokens/s | trainctl / PyTorch | peak RSS trainctl / PyTorch |"
echo "| --- | --- | --- | --- | --- |"
for threads in 1 "$all_threads"; do
  printf "| %s | %.0f | %.0f | %s× | %s MB / %s MB |\n" "$threads" "$(rate "trainctl-$threads")" "$(rate "torch-$threads")" \
    "$(ratio "$(rate "trainctl-$threads")" "$(rate "torch-$threads")")" "$(peak_mb "trainctl-$threads")" \
    "$(peak_mb "torch-$threads")"
done
machine_line
