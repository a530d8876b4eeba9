#!/usr/bin/env bash
# What the runtime refuses or stops on:
#  - a loss that turns NaN or infinite stops the run with the step named and exit 1, logged as
#    null; nothing is saved after it, and the last good checkpoint still verifies and resumes;
#  - train.device = "cuda" without GPUs: `validate` asks for one rank per GPU (exit 2, naming the
#    key), and the runtime names why it cannot use CUDA here (exit 2): no GPU visible, or a build
#    without CUDA.
source "$(dirname "$0")/lib.sh"
make_data

# SGD with this learning rate overflows within a few steps; checkpoints every step until then.
write_config diverging.toml diverging job.ranks_per_node=1 train.optimizer='"sgd"' train.lr=1e30 train.steps=40 \
  checkpoint.every_steps=1 checkpoint.keep_last=40
expect_exit 1 "$TRAINCTL" run diverging.toml
bad_step=$(sed -nE 's/.*the training loss is (-?nan|-?inf) at step ([0-9]+);.*/\2/p' err.txt)
[ -n "$bad_step" ] || fail "no message naming the step: $(cat err.txt)"
# Logged, as null, for a sweep's schedule to stop the trial on (docs/sweeps.md).
grep -q "^{\"step\":$bad_step,\"loss\":null," runs/diverging/metrics.jsonl || fail "the bad loss is not logged as null"
last_saved=$(ls runs/diverging/checkpoints/*.h5 | sed -E 's/.*step-0*([0-9]+)\.h5/\1/' | sort -n | tail -n 1)
[ "$last_saved" -eq $((bad_step - 1)) ] || fail "loss went bad at step $bad_step but the last checkpoint is $last_saved"
"$TRAINCTL" ckpt verify runs/diverging >/dev/null || fail "the checkpoints before the bad step do not verify"
echo "stopped at step $bad_step; checkpoint $last_saved kept"

write_config gpu.toml gpu train.device='"cuda"' job.ranks_per_node=2
expect_exit 2 "$TRAINCTL" validate gpu.toml
grep -qF "job.gpus_per_node: train.device = \"cuda\" needs GPUs: set gpus_per_node, and ranks_per_node to the same number (one rank per GPU)" err.txt ||
  fail "unexpected message: $(cat err.txt)"
write_config gpu.toml gpu train.device='"cuda"' job.ranks_per_node=2 job.gpus_per_node=4
expect_exit 2 "$TRAINCTL" validate gpu.toml
grep -qF "job.ranks_per_node: train.device = \"cuda\" runs one rank per GPU, so ranks_per_node (2) must equal gpus_per_node (4)" err.txt ||
  fail "unexpected message: $(cat err.txt)"

# This test runs where there is no GPU (CI): the runtime must say so, not crash.
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  echo "a GPU is visible; the no-GPU check does not apply"
else
  write_config gpu.toml gpu train.device='"cuda"' job.ranks_per_node=1 job.gpus_per_node=1
  "$TRAINCTL" validate gpu.toml >/dev/null
  expect_exit 2 "$TRAINCTL" run gpu.toml
  grep -qE 'train.device = "cuda": (no usable CUDA device|no CUDA device visible|this trainctl-runtime was built without it)' err.txt ||
    fail "the runtime did not name why CUDA is unusable: $(cat err.txt)"
  grep -E 'train.device' err.txt
fi
echo "PASS"
