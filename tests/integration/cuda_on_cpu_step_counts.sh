#!/usr/bin/env bash
# What GPT-2 124M's bf16 step asks of the device (12 layers x 768, 12 heads, the 50,257-token
# vocabulary; block 64 and micro-batch 1, since the counts do not depend on them), counted by the
# CPU implementation of CUDA (TRAINCTL_DEVICE_ACTIVITY, docs/runtime.md): kernel launches
# (memsets and device copies included), cuBLASLt calls apart, and the host's waits for the device,
# the batch's uploads apart, in each of two steps (the save that ends the run not counted): at most
# 320 launches each, no wait in step 1, and in step 2, which logs, one (the loss and the gradient
# norm, read together). Step 1 also converts the weights' first compute copy. docs/runtime.md's line
# "GPT-2 124M bf16 step: ..." must say what step 2 counted.
source "$(dirname "$0")/lib.sh"
make_token_data
export TRAINCTL_CUDA_BACKEND=cpu
write_config step.toml step model.kind='"gpt2"' model.n_layer=12 model.n_head=12 model.n_embd=768 model.block_size=64 \
  model.vocab_size=50257 job.ranks_per_node=1 job.gpus_per_node=1 train.device='"cuda"' train.precision='"bf16"' \
  train.micro_batch=1 train.steps=2 train.log_every=2 train.grad_clip=1.0 train.weight_decay=0.1 \
  checkpoint.every_steps=0
TRAINCTL_DEVICE_ACTIVITY=$PWD/activity.jsonl "$TRAINCTL" run step.toml >run.log 2>&1 || fail "the run failed: $(cat run.log)"
python3 - activity.jsonl "$TRAINCTL_SOURCE_DIR/docs/runtime.md" <<'PY' || fail "the step asks more of the device than it should, or the docs say otherwise (above)"
import json, re, sys
steps = {line["step"]: line for line in map(json.loads, open(sys.argv[1]))}
assert sorted(steps) == [1, 2], f"steps counted: {sorted(steps)}"
for step in (1, 2):
    s = steps[step]
    print(f"step {step}: {s['kernel_launches']} kernel launches, {s['blas_calls']} cuBLASLt calls, "
          f"{s['host_syncs']} host synchronisations, {s['upload_waits']} upload waits, "
          f"peak {s['peak_device_bytes'] / 2**20:.0f} MiB")
problems = []
for step, syncs in ((1, 0), (2, 1)):
    s = steps[step]
    if s["kernel_launches"] > 320:
        problems.append(f"step {step}: {s['kernel_launches']} kernel launches, more than 320")
    if s["host_syncs"] != syncs:
        problems.append(f"step {step}: {s['host_syncs']} host synchronisations, expected {syncs}")
    if s["upload_waits"] > 2:
        problems.append(f"step {step}: {s['upload_waits']} upload waits, more than the batch's tokens and targets")
logged = steps[2]
counted = (f"GPT-2 124M bf16 step: {logged['kernel_launches']} kernel launches, {logged['blas_calls']} cuBLASLt calls, "
           f"{logged['host_syncs']} host synchronisations")
documented = re.findall(r"GPT-2 124M bf16 step: [^\n]*", open(sys.argv[2]).read())
if documented != [counted]:
    problems.append(f"docs/runtime.md says {documented}, step 2 counted {counted!r}")
for problem in problems:
    print("FAIL:", problem)
sys.exit(1 if problems else 0)
PY
echo "PASS"
