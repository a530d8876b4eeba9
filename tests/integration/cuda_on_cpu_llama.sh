#!/usr/bin/env bash
# A Llama with train.device = "cuda" on the CPU implementation of CUDA (TRAINCTL_CUDA_BACKEND=cpu),
# in bf16, against the CPU device: 2 layers, 4 query heads sharing 2 key/value heads of 16 (the
# tensor-core attention's smallest head), byte tokens, block 32, every step logged.
# - 40 steps: each step's loss within 2e-2 relative of the CPU device's bf16 run. Both store the
#   activations in bf16 and multiply bf16 operands exactly in fp32; CUDA's attention runs on
#   tensor cores, which round P and dS to bf16 inside the attention where the CPU's keeps them in
#   fp32, and sums go in other orders (RMSNorm's, the column sums, the GEMMs').
# - Stopped by a signal at step 20 and resumed: bitwise the uninterrupted run.
# - 2 CUDA ranks (NCCL over MPI) with ZeRO-1, sharded asynchronous checkpoints and recompute, each
#   rank half the micro-batch: within 2e-2 of the same global batch on one CPU rank.
source "$(dirname "$0")/lib.sh"
make_token_data
export TRAINCTL_CUDA_BACKEND=cpu
compare_curves() { python3 "$TRAINCTL_SOURCE_DIR/scripts/compare_curves.py" "$@"; }

llama=(model.kind='"llama"' model.n_embd=64 job.ranks_per_node=1 train.steps=40 train.log_every=1 train.lr=1e-3
  train.precision='"bf16"' checkpoint.every_steps=40)
cuda=(train.device='"cuda"' job.gpus_per_node=1)
write_config cpu.toml cpu "${llama[@]}"
write_config cuda.toml cuda "${llama[@]}" "${cuda[@]}"
write_config stopped.toml stopped "${llama[@]}" "${cuda[@]}"
for name in cpu cuda; do
  "$TRAINCTL" run "$name.toml" >"$name.log" 2>&1 || fail "$name: $(cat "$name.log")"
done
echo "bf16: CUDA against the CPU"
compare_curves runs/cpu runs/cuda --tolerance 2e-2 --steps 40 || fail "bf16: CUDA is off the CPU's curve"

stop_and_resume runs/stopped 20 40 runs/cuda stopped.toml
echo "bf16 on CUDA: stopped at 20 and resumed, bitwise the uninterrupted run"

if [ "$TRAINCTL_HAVE_MPI" = 1 ]; then
  write_config zero.toml zero "${llama[@]}" train.device='"cuda"' job.ranks_per_node=2 job.gpus_per_node=2 \
    train.micro_batch=2 train.zero=1 train.recompute=true checkpoint.async=true
  "$TRAINCTL" run zero.toml --ranks 2 >zero.log 2>&1 || fail "ZeRO-1 bf16 on CUDA: $(cat zero.log)"
  compare_curves runs/cpu runs/zero --tolerance 2e-2 --steps 40 || fail "ZeRO-1 on 2 CUDA ranks is off the CPU's curve"
  echo "bf16 on 2 CUDA ranks with ZeRO-1, recompute and asynchronous checkpoints: on the CPU's curve"
fi
echo "PASS"
