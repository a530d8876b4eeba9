#!/usr/bin/env bash
# ZeRO-3's schedule on the device, as the CPU implementation of CUDA's queue log records it
# (TRAINCTL_CUDA_ON_CPU_QUEUE_LOG, cuda_on_cpu/include/cuda_on_cpu/activity.h): a GPT-2 of 4
# blocks on 2 fake GPUs, two steps with train.zero = 3. In the order each rank asked its device:
# - every layer's gather (ncclBroadcast into a gathered layer's buffer) is issued on a stream of
#   its own, not the compute stream, and before the compute of the layer before it is all queued:
#   a kernel or GEMM reading another gathered buffer follows it (the prefetch);
# - the numbered layers (the blocks and ln_f) are gathered into two buffers of the largest
#   layer's size and no more, so at most two layers' gathered weights are allocated at once,
#   besides the kept embeddings' (wte is also the head), and neither is freed between gathers;
# - the weights of a layer are gathered again for backward (reshard_after_forward), except the
#   two that forward left in the buffers.
source "$(dirname "$0")/lib.sh"
require_mpi
make_token_data
write_config zero3.toml zero3 model.kind='"gpt2"' model.n_layer=4 job.ranks_per_node=2 job.gpus_per_node=2 \
  train.device='"cuda"' train.zero=3 train.steps=2 checkpoint.every_steps=0
TRAINCTL_CUDA_BACKEND=cpu CUDA_VISIBLE_DEVICES=0,1 TRAINCTL_CUDA_ON_CPU_QUEUE_LOG=$PWD/queue \
  "$TRAINCTL" run zero3.toml --ranks 2 >run.log 2>&1 || { cat run.log; fail "the zero = 3 run failed"; }
logs=(queue.*)
[ "${#logs[@]}" = 2 ] || fail "expected a queue log of each of the 2 ranks, found ${logs[*]}"
# write_config's GPT-2: n_embd 32, block_size 32, vocab 256 (no padding: a multiple of 128).
python3 - "${logs[@]}" <<'PY' || fail "the queue log does not show the prefetch and the two buffers (above)"
import sys
C = 32
layer_bytes = 4 * (12 * C * C + 13 * C)  # a block, the largest layer
kept_bytes = 4 * (256 + 32) * C          # wte and wpe
problems = []
for path in sys.argv[1:]:
    sizes, freed, events = {}, {}, []
    for line in open(path):
        words = line.split()
        if words[0] == "alloc":
            sizes[words[1]] = int(words[2])
        elif words[0] == "free":
            freed[words[1]] = len(events)
        else:
            events.append((words[0], words[1], words[2:]))
    gathers = []  # (index, stream, buffer): consecutive broadcasts into one buffer are one gather
    for i, (kind, stream, buffers) in enumerate(events):
        if kind == "ncclBroadcast" and sizes.get(buffers[0]) in (layer_bytes, kept_bytes):
            if not (gathers and gathers[-1][2] == buffers[0] and events[i - 1][0] == "ncclBroadcast"):
                gathers.append((i, stream, buffers[0]))
    layer_buffers = {b for _, _, b in gathers if sizes[b] == layer_bytes}
    gathered = {b for _, _, b in gathers}
    compute = {stream for kind, stream, _ in events if kind == "matmul"}
    print(f"{path}: {len(gathers)} gathers into {len(layer_buffers)} layer buffers of {layer_bytes} bytes "
          f"and {len(gathered - layer_buffers)} kept one; compute on {sorted(compute)}")
    if len(layer_buffers) != 2:
        problems.append(f"{path}: the layers were gathered into {len(layer_buffers)} buffers, not 2")
    if any(freed.get(b, len(events)) <= gathers[-1][0] for b in layer_buffers):
        problems.append(f"{path}: a layer buffer was freed between gathers")
    # 2 steps x (5 forward + 3 backward): the blocks and ln_f, less the two forward leaves.
    if len([g for g in gathers if g[2] in layer_buffers]) != 16:
        problems.append(f"{path}: {len([g for g in gathers if g[2] in layer_buffers])} layer gathers, not 2 x 8")
    for n, (i, stream, buffer) in enumerate(gathers):
        if stream in compute:
            problems.append(f"{path}: event {i}: a gather on the compute stream {stream}")
        if buffer not in layer_buffers:
            continue
        end = gathers[n + 1][0] if n + 1 < len(gathers) else len(events)
        if not any(kind in ("kernel", "matmul") and set(buffers) & (gathered - {buffer})
                   for kind, _, buffers in events[i + 1:end]):
            problems.append(f"{path}: event {i}: a gather issued after the layer before it was all queued")
for problem in problems:
    print("FAIL:", problem)
sys.exit(1 if problems else 0)
PY
echo "PASS"
