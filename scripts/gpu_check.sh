#!/usr/bin/env bash
# The GPU checks of the CUDA runtime (issue 9), as steps that fit in the device tool's calls.
#
# Here:   scripts/gpu_check.sh --pack
#   builds build-gpu-pack/ (or $PACK_BUILD_DIR; CUDA, no MPI and no NCCL: every check uses one
#   GPU, the device machine has no Open MPI, and NCCL's library (218 MB) is too large to carry),
#   gives its programs and the CUDA backend library (libtrainctl-cuda.so, which they open from
#   their lib/) an RPATH of $ORIGIN/../lib or $ORIGIN, then /usr/local/cuda/lib64 (patchelf:
#   scripts/install-deps.sh --bench), and packs them with the shared libraries they need, apart
#   from glibc's own and CUDA's, and the source's git revision, into gpu-pack.tar.gz
#   (git-ignored), for the device tool to carry. With LLMC_SOURCE=DIR (a copy of llm.c's source,
#   outside the repository), llm.c's train_gpt2cu too, for the peers step.
# There:  scripts/gpu_check.sh STEP... (or `all`)
#   unpacks gpu-pack.tar.gz into /tmp (without one it runs build/'s programs), prints the pack's
#   revision, nvidia-smi and what the programs' libraries resolve to (misses first), then runs
#   each STEP under `timeout`, goes on after one fails, and prints a table of the steps last. It
#   exits 0 only when every step passed. What it prints also goes to $OUT/gpu-check.log (OUT:
#   the device tool's folder of files to bring back; /tmp/gpu-check-out without one); the
#   fp32 step's loss curves to $OUT/fp32-curve.tsv, and the runs' metrics to $OUT/runs.tar.gz.
#   Nothing is put on LD_LIBRARY_PATH: PyTorch, in the same call, keeps its own CUDA libraries.
#
# Steps, with the time each took on one H200 (2026-11-26, the first GPU run), and its limit:
#   tensorcores  the tensor-core instructions of kernels/cuda/tensor_cores.cuh (mma, ldmatrix,
#                cp.async, dynamic shared memory) against exact references (test_tensor_cores):
#                the check of the fragment layouts cuda_on_cpu emulates; run it first. Then
#                cuobjdump -sass: the tensor-core attention kernels (flash_attention.cuh) hold
#                HMMA instructions                                        (not yet run), 1 min
#   attention    attention forward and backward in bf16 at GPT-2 124M's shape (B 8, T 1024, 12
#                heads of 64), at B 4, T 2048, 16 heads of 128, and at Llama 3.2 1B's (B 4,
#                T 2048, 32 query heads of 64 sharing 8 key/value heads): TFLOP/s (causal FLOPs)
#                of trainctl's (bench_attention) beside PyTorch's scaled_dot_product_attention
#                (scripts/bench_attention_torch.py; grouped-query with enable_gqa where that
#                PyTorch has it, and with the key/value heads repeated) in the same call, and a
#                rerun bitwise the same; $OUT/attention.jsonl             (not yet run), 2 min
#   kernels      every CUDA op against its CPU reference (test_cuda_kernels)        3 s, 3 min
#   large        the same at the benchmark's shapes (test_cuda_kernels --large)   241 s, 7 min
#   memcheck     test_cuda_kernels under compute-sanitizer memcheck                 3 s, 8 min
#   racecheck    test_cuda_kernels under compute-sanitizer racecheck               24 s, 8 min
#   fp32         200 steps on the GPU against the same on the CPU: every step's loss within
#                FP32_TOLERANCE (1e-4) relative; the whole curve in $OUT/fp32-curve.tsv
#                                                                                   3 s, 4 min
#   bf16         a bf16 run whose final loss is within 2% of the fp32 run's          1 s, 3 min
#   gpt2         a GPT-2 (2 layers x 128, block 64, bytes of this repository's docs) for 100
#                steps on the GPU against the same on the CPU: every step's loss within
#                GPT2_TOLERANCE (1e-3) relative in fp32, GPT2_BF16_TOLERANCE (2e-2) in bf16;
#                recompute bitwise the same as without; the curves in $OUT/gpt2-curve.tsv and
#                $OUT/gpt2-bf16-curve.tsv                                            7 s, 5 min
#   sigterm      a stop signal raised at step 233 (TRAINCTL_TEST_SIGNAL_AT_STEP) must stop the
#                run there; resumed, it ends bitwise equal to an uninterrupted run    3 s, 4 min
#   crossdevice  a checkpoint the GPU wrote resumes on the CPU, and the reverse; each ends within
#                FP32_TOLERANCE of the run that never changed device                4 s, 4 min
#   bench        the MLP of 4 x 8192 hidden, batch 8192, fp32 and bf16: samples/s, TFLOP/s and
#                MFU, beside PyTorch eager and torch.compile (scripts/bench_gpu_mlp.py)
#                                                                                  87 s, 8 min
#   gpt2bench    GPT-2 124M's shape (12 x 768, 12 heads, block 1024, its 50257 tokens' vocabulary
#                padded to 50304), micro-batch 8, on random tokens, fp32 and bf16: tokens/s and
#                MFU, beside PyTorch eager and torch.compile with fused attention, in bf16
#                (scripts/bench_gpu_lm.py); and the bf16 run's peak_device_mb against what
#                nvidia-smi saw the GPU use beyond its idle use, sampled every 100 ms: the
#                runtime's count must not exceed it                                  93 s, 8 min
#   zero3        one rank's step time with train.zero = 3 beside zero = 0, gpt2bench's bf16 run
#                (40 steps each, the median after 10): on one GPU a layer's gather is the rank's
#                copy of its shard into the layer's buffer and the bf16 conversion, so the
#                difference is ZeRO-3's bookkeeping alone; for docs/benchmarks.md  (not yet run), 5 min
#   llama        Llama 3.2 1B's shapes (4 x 2048 tokens, 2048 wide, 32 query heads of 64 in 8 groups,
#                an MLP of 8192, its vocabulary of 128256): every new kernel and the GEMMs against
#                their CPU ops (test_cuda_kernels --llama); then a bf16 training run of the 1B
#                shape, tied, micro-batch 4, on random tokens: tokens/s and MFU, beside PyTorch
#                eager and torch.compile of the same model with fused attention, in bf16
#                (scripts/bench_gpu_lm.py)                                  (not yet run), 9 min
#   peers        GPT-2 124M in bf16 at micro-batch 8 and 16: trainctl's tokens/s beside llm.c's
#                (the pack's, with LLMC_SOURCE) and torch.compile's, in the issue's form
#                `result (CARD, DATE, micro-batch N): R× llm.c, R× torch.compile` (not yet run), 8 min
#   profile      each kernel's GPU time under Nsight Compute, grouped by kernel (scripts/
#                kernel_profile.py), for 2 steps of gpt2bench's bf16 run and 12 of bench's; the
#                per-launch tables in $OUT/*-kernels.csv               GPT-2's 3 steps: 233 s, 5 min
# A call starts no step with less than 30 s left of GPU_CHECK_BUDGET (570 s: the tool's
# 10 minutes, less the unpacking), and shortens the limit of the last one to fit; what it skips
# shows as SKIP in the table.
#
# The device calls, in order (each `run` with carry ["gpu-pack.tar.gz"]), as they fitted in the
# first lent GPU's 15 minutes (a start took about 30 s):
#   1. scripts/gpu_check.sh kernels fp32 bf16 gpt2 sigterm crossdevice gpt2bench memcheck bench
#                                                           correctness, sanitizer, speed: 206 s
#      (tensorcores, added since, goes first)
#   2. scripts/gpu_check.sh racecheck large                          the benchmark's shapes: 266 s
#   3. scripts/gpu_check.sh profile                                  where the GPU time goes
#      (zero3, added since, goes with it)
#   4. scripts/gpu_check.sh peers                     trainctl against llm.c and torch.compile
#      (added since; its pack made with LLMC_SOURCE)
# DEVICE=cpu runs the training steps on the CPU alone, at a small size, and the attention step's
# programs at small shapes (trainctl's on the CPU implementation of CUDA, PyTorch's on the CPU),
# and skips the others: a check of this script and of the pack on a machine without a GPU.
set -uo pipefail
cd "$(dirname "$0")/.."
self=$PWD/scripts/gpu_check.sh
pack_build=${PACK_BUILD_DIR:-build-gpu-pack}

# Step limits in seconds.
declare -A step_limit=([tensorcores]=60 [attention]=120 [kernels]=180 [large]=420 [memcheck]=480 [racecheck]=480 [fp32]=240 [bf16]=180
  [gpt2]=300 [sigterm]=240 [crossdevice]=240 [bench]=480 [gpt2bench]=480 [zero3]=300 [peers]=480 [llama]=540 [profile]=300)
all_steps=(tensorcores attention kernels large memcheck racecheck fp32 bf16 gpt2 sigterm crossdevice bench gpt2bench zero3 peers
  llama profile)

if [ "${1:-}" = --pack ]; then
  set -e
  export PATH="$PATH:/usr/local/cuda/bin"
  [ -f "$pack_build/build.ninja" ] ||
    meson setup "$pack_build" -Dcuda=enabled -Dmpi=disabled -Dnccl=disabled -Dcuda-on-cpu=disabled >/dev/null
  ninja -C "$pack_build" cli/trainctl runtime/trainctl-runtime tests/test_cuda_kernels tests/test_tensor_cores \
    tests/bench_attention kernels/libtrainctl-cuda.so >/dev/null
  rm -rf gpu-pack && mkdir -p gpu-pack/bin gpu-pack/lib
  packed=("$pack_build/cli/trainctl" "$pack_build/runtime/trainctl-runtime" "$pack_build/tests/test_cuda_kernels"
    "$pack_build/tests/test_tensor_cores" "$pack_build/tests/bench_attention")
  cp "${packed[@]}" gpu-pack/bin/
  cp "$pack_build/kernels/libtrainctl-cuda.so" gpu-pack/lib/
  packed+=("$pack_build/kernels/libtrainctl-cuda.so")
  # llm.c, the peers step's peer, from a copy of its source (karpathy/llm.c at f1e2ace) in
  # LLMC_SOURCE, built outside the repository with what CUDA 13 and a machine without NVML need
  # (../shared/notes/gpu-peers.md): cudaMemAdvise's location as a cudaMemLocation, no -lnvidia-ml
  # (llmc/mfu.h finds no nvml.h here and counts without it).
  if [ -n "${LLMC_SOURCE:-}" ]; then
    llmc_build=$(mktemp -d)
    cp -r "$LLMC_SOURCE"/. "$llmc_build"
    sed -i 's/^  NVCC_LDFLAGS += -lnvidia-ml$/  NVCC_LDFLAGS +=/' "$llmc_build/Makefile"
    sed -i 's/cudaMemAdviseSetPreferredLocation, cudaCpuDeviceId)/cudaMemAdviseSetPreferredLocation, cudaMemLocation{cudaMemLocationTypeHost, 0})/' \
      "$llmc_build/llmc/cuda_utils.cuh"
    ! grep -q -- '-lnvidia-ml' "$llmc_build/Makefile" && grep -q cudaMemLocationTypeHost "$llmc_build/llmc/cuda_utils.cuh" ||
      { echo "LLMC_SOURCE is not the llm.c these changes were made for (f1e2ace)" >&2; exit 1; }
    make -C "$llmc_build" train_gpt2cu NO_MULTI_GPU=1 NO_USE_MPI=1 USE_CUDNN=0 GPU_COMPUTE_CAPABILITY=90 >/dev/null
    cp "$llmc_build/train_gpt2cu" gpu-pack/bin/
    packed+=("$llmc_build/train_gpt2cu")
  fi
  # Only the pack's libraries and CUDA's, in that order, not the build machine's directories
  # that meson put first. DT_RPATH (--force-rpath), not RUNPATH: it also serves the packed
  # libraries' own needs (libhdf5's libsz, ...), which the programs' RUNPATH would not, and the
  # programs' dlopen of the backend.
  # shellcheck disable=SC2016 # $ORIGIN is for ld.so
  patchelf --force-rpath --set-rpath '$ORIGIN/../lib:/usr/local/cuda/lib64' gpu-pack/bin/*
  # shellcheck disable=SC2016
  patchelf --force-rpath --set-rpath '$ORIGIN:/usr/local/cuda/lib64' gpu-pack/lib/libtrainctl-cuda.so
  # Left out: glibc's own libraries, which must be the device machine's (they go with its
  # ld-linux), and CUDA's, which must match its driver and are too large to carry.
  ldd "${packed[@]}" | awk '/=> \// { print $3 }' | sort -u |
    grep -vE '/(libc|libm|libmvec|libresolv|libpthread|libdl|librt|libutil|libanl|ld-linux[^/]*)\.so|^/usr/local/cuda' |
    xargs -I{} cp -L {} gpu-pack/lib/
  echo "$(git describe --always --dirty --abbrev=12) $(git log -1 --format=%cI) packed $(date -u +%FT%TZ)" >gpu-pack/REVISION
  tar -czf gpu-pack.tar.gz gpu-pack && rm -rf gpu-pack ${llmc_build:+"$llmc_build"}
  echo "gpu-pack.tar.gz: $(du -h gpu-pack.tar.gz | cut -f1), $(tar -tzf gpu-pack.tar.gz | grep -c '/lib/.') libraries"
  exit 0
fi

# ---- One step, run by the loop below as `gpu_check.sh --step NAME` under `timeout`; its
# ---- settings come from the environment the loop exports. Each fails at its first error.

# config NAME DEVICE PRECISION STEPS [CHECKPOINT_EVERY]: a one-rank config in $work/NAME.toml,
# of $hidden and $batch, saving every 50 steps unless told otherwise.
config() {
  cat >"$work/$1.toml" <<EOF
[job]
name = "$1"
gpus_per_node = $([ "$2" = cuda ] && echo 1 || echo 0)
cpus_per_rank = $threads
[model]
inputs = $features
hidden = $hidden
classes = $classes
activation = "gelu"
[data]
train = "$work/$data"
[train]
steps = $4
micro_batch = $batch
optimizer = "adamw"
lr = 1e-3
weight_decay = 0.01
warmup_steps = 10
grad_clip = 1.0
seed = 5
log_every = 1
device = "$2"
precision = "$3"
[checkpoint]
every_steps = ${5:-50}
keep_last = 2
EOF
}
# train NAME [--resume]: the run of config NAME in $work/runs/NAME; what trainctl printed is in
# $work/NAME.out, and its end is shown when the run exits non-zero.
train() {
  local code=0
  "$trainctl" run "$work/$1.toml" --run-dir "$work/runs/$1" "${@:2}" >>"$work/$1.out" 2>&1 || code=$?
  [ "$code" -eq 0 ] || { echo "trainctl run $*: exit $code; its last lines:"; tail -n 5 "$work/$1.out"; }
  return "$code"
}
# A run of config NAME, unless an earlier step of this call made it (one it cut short is redone).
trained() {
  [ -f "$work/runs/$1/completed.step" ] && return
  rm -rf "$work/runs/$1" "$work/$1.out"
  train "$1"
}
# stopped_at STEP NAME: the run of config NAME, whose rank 0 raises SIGTERM once STEP is done
# (the runtime's test hook): it must stop at exactly that step, saved, for a resume.
stopped_at() {
  local step=$1 name=$2 stopped
  TRAINCTL_TEST_SIGNAL_AT_STEP=$step "$trainctl" run "$work/$name.toml" --run-dir "$work/runs/$name" \
    >>"$work/$name.out" 2>&1 && { echo "$name: the run ignored the stop signal raised at step $step"; return 1; }
  stopped=$(sed -nE 's/.*"step":([0-9]+),"event":"stop".*/\1/p' "$work/runs/$name/metrics.jsonl")
  echo "$name: asked to stop at step $step; stopped at step ${stopped:-(none)}"
  [ "$stopped" = "$step" ] && grep -q "stopped by a signal after saving" "$work/$name.out" ||
    { tail -n 5 "$work/$name.out"; return 1; }
}
losses() { sed -nE 's/.*"loss":([-0-9.e+]+).*/\1/p' "$work/runs/$1/metrics.jsonl"; }
final_checkpoint() { printf '%s/runs/%s/checkpoints/step-%08d.h5' "$work" "$1" "$2"; }
needs_gpu() { [ "$device" = cuda ] || { echo "SKIP: needs a GPU (DEVICE=$device)"; exit 77; }; }

# The small runs' data and shapes: one rank, 200 steps in seconds on either device.
small_runs() {
  features=64 classes=16 data=train.h5
  if [ "$device" = cuda ]; then hidden='[1024, 1024]' batch=256; else hidden='[64, 64]' batch=32; fi
  [ -f "$work/$data" ] ||
    "$trainctl" data synth -o "$work/$data" --samples 16384 --features "$features" --classes "$classes" --seed 3 >/dev/null
}

# The benchmark's MLP (1024 -> 4 x 8192 -> 1024, batch 8192) and SAMPLES of data for it.
bench_runs() {
  features=1024 classes=1024 hidden='[8192, 8192, 8192, 8192]' batch=8192 data=bench.h5
  "$trainctl" data synth -o "$work/$data" --samples "$1" --features "$features" --classes "$classes" --seed 3 >/dev/null
}

# The fp32 runs on the CPU and on $device, 200 steps each.
fp32_runs() {
  small_runs
  config cpu cpu fp32 200
  config fp32 "$device" fp32 200
  trained cpu
  trained fp32
}

# Succeeds when `actual` is within FP32_TOLERANCE relative of `expected`; prints both.
within_fp32_tolerance() {
  python3 -c '
import sys
what, expected, actual, tolerance = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
relative = abs(actual - expected) / abs(expected)
print(f"{what}: {actual:.9g} against {expected:.9g}, relative {relative:.3g} (tolerance {tolerance:g})")
sys.exit(0 if relative <= tolerance else 1)' "$@" "$fp32_tolerance"
}

step_tensorcores() {
  needs_gpu
  "$tensor_core_test" || return 1
  # The tensor-core attention kernels' machine code: each holds HMMA (bf16 mma.sync).
  local cuobjdump
  cuobjdump=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
  "$cuobjdump" -sass "$cuda_backend" >"$out/backend.sass" || return 1
  python3 - "$out/backend.sass" <<'PY'
import re, sys
functions = re.split(r"\n\s*Function : ", open(sys.argv[1]).read())[1:]
flash = [body for body in functions if "flash" in body.split("\n", 1)[0]]
failed = not flash
for body in flash:
    name, count = body.split("\n", 1)[0].strip(), len(re.findall(r"\bHMMA\.", body))
    print(f"{'FAIL' if count == 0 else ' OK '} {name}: {count} HMMA")
    failed = failed or count == 0
sys.exit(1 if failed else 0)
PY
}

step_attention() {
  local failed=0 torch_code=0 arguments=()
  # DEVICE=cpu: both programs at small shapes, trainctl's on the CPU implementation of CUDA and
  # PyTorch's on the CPU, a check of this step. There a PyTorch before 2.0 (Debian 12's 1.13), which
  # has no scaled_dot_product_attention, makes the script exit 77, and trainctl's side is checked
  # alone.
  if [ "$device" = cpu ]; then
    arguments=(--reps 2 "2,96,4,32" "1,80,4,2,64")
    export TRAINCTL_CUDA_BACKEND=cpu
  fi
  "$attention_bench" "${arguments[@]}" | tee "$out/attention.jsonl" || failed=1
  python3 scripts/bench_attention_torch.py --device "$device" "${arguments[@]}" | tee -a "$out/attention.jsonl" ||
    torch_code=$?
  [ "$torch_code" = 0 ] || { [ "$device" = cpu ] && [ "$torch_code" = 77 ]; } || failed=1
  python3 - "$out/attention.jsonl" <<'PY' || failed=1
import json, sys
lines = [json.loads(line) for line in open(sys.argv[1]) if line.startswith("{")]
key = lambda line: (line["batch"], line["seq"], line["heads"], line.get("kv_heads", line["heads"]), line["head_size"])
ours = {key(line): line for line in lines if line["implementation"] == "trainctl"}
theirs = {}
for line in lines:
    if line["implementation"] == "pytorch_sdpa":
        theirs.setdefault(key(line), []).append(line)
milliseconds = lambda line: line["forward_ms"] + line["backward_ms"]
for shape, line in ours.items():
    peers = [f"{milliseconds(peer) / milliseconds(line):.2f}x the speed of {peer['implementation']}"
             f"{' (' + peer['gqa'] + ')' if peer.get('gqa') else ''} ({milliseconds(line):.3f} vs "
             f"{milliseconds(peer):.3f} ms)" for peer in theirs.get(shape, [])]
    print(f"B {shape[0]} T {shape[1]} H {shape[2]} KV {shape[3]} D {shape[4]}: trainctl {line['total_tflops']} "
          f"TFLOP/s (forward {line['forward_tflops']}, backward {line['backward_tflops']}), bitwise rerun "
          f"{line['bitwise_rerun']}; " + ("; ".join(peers) or "no PyTorch line"))
sys.exit(0 if ours and all(line["bitwise_rerun"] for line in ours.values()) else 1)
PY
  return "$failed"
}

step_kernels() {
  needs_gpu
  "$kernel_test"
}

step_large() {
  needs_gpu
  "$kernel_test" --large
}

# sanitize TOOL ARGS...: the kernel test under compute-sanitizer's TOOL; any error it reports fails.
sanitize() {
  needs_gpu
  local sanitizer
  sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  "$sanitizer" --tool "$@" --error-exitcode 1 "$kernel_test"
}
step_memcheck() { sanitize memcheck; }
step_racecheck() { sanitize racecheck --racecheck-report all; }

# compare_curves REFERENCE RUN STEPS TOLERANCE [CURVE_FILE]: every logged loss of run RUN within
# TOLERANCE relative of run REFERENCE's at the same step (scripts/compare_curves.py); the whole
# curve goes to CURVE_FILE.
compare_curves() {
  python3 scripts/compare_curves.py "$work/runs/$1" "$work/runs/$2" --steps "$3" --tolerance "$4" ${5:+--curve "$5"}
}

step_fp32() {
  fp32_runs
  compare_curves cpu fp32 200 "$fp32_tolerance" "$out/fp32-curve.tsv"
}

# gpt2_config NAME DEVICE [PRECISION [RECOMPUTE]]: a one-rank GPT-2 of 2 layers x 128 on byte
# tokens, 100 steps, fp32 without recompute unless told otherwise.
gpt2_config() {
  cat >"$work/$1.toml" <<EOF
[job]
name = "$1"
gpus_per_node = $([ "$2" = cuda ] && echo 1 || echo 0)
cpus_per_rank = $threads
[model]
kind = "gpt2"
n_layer = 2
n_head = 4
n_embd = 128
block_size = 64
vocab_size = 256
[data]
train = "$work/gpt2_tokens.bin"
[train]
steps = 100
micro_batch = 8
lr = 1e-3
warmup_steps = 10
grad_clip = 1.0
seed = 5
log_every = 1
device = "$2"
precision = "${3:-fp32}"
recompute = ${4:-false}
[checkpoint]
keep_last = 1
EOF
}

# The GPU's GPT-2 follows the CPU's: both sum in fp32, in different orders (cuBLAS against
# OpenBLAS, warp against sequential reductions), so the loss curves part by rounding alone; in
# bf16 also by operands that those differences move across a rounding boundary. On the CPU
# implementation of CUDA the same kind of runs part by 5e-9 (fp32) and 2e-5 (bf16) in 50 steps
# (tests/integration/cuda_on_cpu_gpt2.sh). The tolerances, 10x the MLP's in fp32, are to be
# confirmed by the first run on a GPU: the curve files show how the differences grow.
# Recompute runs the same kernels again, so it must not change a bit.
step_gpt2() {
  [ -f "$work/gpt2_tokens.bin" ] || "$trainctl" data tokenize README.md docs/*.md -o "$work/gpt2_tokens.bin" >/dev/null
  gpt2_config gpt2-cpu cpu
  gpt2_config gpt2-gpu "$device"
  gpt2_config gpt2-cpu-bf16 cpu bf16
  gpt2_config gpt2-gpu-bf16 "$device" bf16
  gpt2_config gpt2-gpu-recompute "$device" fp32 true
  local run failed=0
  for run in gpt2-cpu gpt2-gpu gpt2-cpu-bf16 gpt2-gpu-bf16 gpt2-gpu-recompute; do trained "$run"; done
  compare_curves gpt2-cpu gpt2-gpu 100 "$gpt2_tolerance" "$out/gpt2-curve.tsv" || failed=1
  compare_curves gpt2-cpu-bf16 gpt2-gpu-bf16 100 "$gpt2_bf16_tolerance" "$out/gpt2-bf16-curve.tsv" || failed=1
  echo "recompute on the GPU against keeping every block's activations:"
  compare_curves gpt2-gpu gpt2-gpu-recompute 100 0 && "$trainctl" ckpt diff "$(final_checkpoint gpt2-gpu 100)" \
    "$(final_checkpoint gpt2-gpu-recompute 100)" || failed=1
  return "$failed"
}

step_bf16() {
  fp32_runs
  config bf16 "$device" bf16 200
  trained bf16
  python3 -c '
import sys
fp32, bf16 = float(sys.argv[1]), float(sys.argv[2])
print(f"final loss fp32 {fp32:.6g} bf16 {bf16:.6g} ({(bf16 - fp32) / fp32:+.3%}; within 2% passes)")
sys.exit(0 if abs(bf16 - fp32) <= 0.02 * abs(fp32) else 1)' "$(losses fp32 | tail -n 1)" "$(losses bf16 | tail -n 1)"
}

step_sigterm() {
  small_runs
  config whole "$device" fp32 600
  config split "$device" fp32 600
  trained whole
  stopped_at 233 split
  train split --resume
  "$trainctl" ckpt diff "$(final_checkpoint whole 600)" "$(final_checkpoint split 600)"
}

# The run NAME on FROM stopped at step 100 and resumed on TO: it must end within FP32_TOLERANCE
# of the run that stayed on TO.
check_resume_across() {
  local name=$1 from=$2 to=$3 unchanged=$4
  config "$name" "$from" fp32 200
  config "$name-on-$to" "$to" fp32 200
  stopped_at 100 "$name" || return 1
  "$trainctl" run "$work/$name-on-$to.toml" --run-dir "$work/runs/$name" --resume >"$work/$name-resume.out" 2>&1 ||
    { tail -n 5 "$work/$name-resume.out"; return 1; }
  "$trainctl" ckpt verify "$(final_checkpoint "$name" 200)" >/dev/null || return 1
  within_fp32_tolerance "$name: final loss, stopped on $from at step 100 and resumed on $to, against $to alone" \
    "$(losses "$unchanged" | tail -n 1)" "$(losses "$name" | tail -n 1)"
}

step_crossdevice() {
  fp32_runs
  local failed=0
  check_resume_across gpu-to-cpu "$device" cpu cpu || failed=1
  check_resume_across cpu-to-gpu cpu "$device" fp32 || failed=1
  return "$failed"
}

step_bench() {
  needs_gpu
  bench_runs 65536
  local precision failed=0
  for precision in fp32 bf16; do
    config "bench-$precision" cuda "$precision" 60 0
    train "bench-$precision" || { failed=1; continue; }
    # The median after 10 warm-up steps. FLOPs per sample: 2 per multiply-add, forward and the
    # two backward GEMMs. MFU is the runtime's, against its device's dense peak for the precision.
    python3 -c '
import json, statistics, sys
lines = [json.loads(line) for line in open(sys.argv[1])]
steps = [line for line in lines if "loss" in line][10:]
widths = [1024, 8192, 8192, 8192, 8192, 1024]
flops = 6 * sum(a * b for a, b in zip(widths, widths[1:]))
rate = statistics.median(line["samples_per_s"] for line in steps)
mfu = [line["mfu"] for line in steps if line.get("mfu") is not None]
mfu_text = f"MFU {statistics.median(mfu):.1%}" if mfu else "MFU unknown (no peak for this GPU)"
print(f"trainctl {sys.argv[2]}: {rate:,.0f} samples/s, {rate * flops / 1e12:.1f} TFLOP/s, {mfu_text}")
' "$work/runs/bench-$precision/metrics.jsonl" "$precision"
    # Its checkpoint is 2.6 GB.
    rm -rf "$work/runs/bench-$precision/checkpoints"
  done
  python3 scripts/bench_gpu_mlp.py --features "$features" --classes "$classes" --hidden 8192 --layers 4 --batch 8192 ||
    failed=1
  return "$failed"
}

# GPT-2 124M's shape, its vocabulary padded to a multiple of 64 (as people train it: whole
# tiles and float4 rows), on one GPU, PRECISION, STEPS (40) without checkpoints but the last,
# train.zero ZERO (0), micro-batch MICRO_BATCH (8), in $work/gpt2bench-PRECISION.toml, with a ZERO
# given $work/gpt2bench-PRECISION-zeroZERO.toml, and with a MICRO_BATCH -mbMICRO_BATCH after that.
gpt2bench_config() {
  local name=gpt2bench-$1${3:+-zero$3}${4:+-mb$4}
  cat >"$work/$name.toml" <<EOF
[job]
name = "$name"
gpus_per_node = 1
cpus_per_rank = $threads
[model]
kind = "gpt2"
n_layer = 12
n_head = 12
n_embd = 768
block_size = 1024
vocab_size = 50304
[data]
train = "gpt2bench_tokens.bin"
[train]
steps = ${2:-40}
micro_batch = ${4:-8}
lr = 6e-4
grad_clip = 1.0
log_every = 1
device = "cuda"
precision = "$1"
zero = ${3:-0}
[checkpoint]
every_steps = 0
keep_last = 1
EOF
}

gpu_memory_used_mib() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | sed -n 1p; }

# bench_tokens NAME VOCAB: random tokens below VOCAB in llm.c's format ($work/NAME_tokens.bin):
# GPT-2's uint16 one, or Llama 3's uint32 one past 65536 ids. Speed does not depend on what they say.
bench_tokens() {
  python3 -c '
import sys
import numpy as np
vocab = int(sys.argv[2])
magic, version, dtype = (20240520, 1, "<u2") if vocab <= 65536 else (20240801, 7, "<u4")
header = np.zeros(256, dtype="<i4")
header[:3] = magic, version, 1 << 20
tokens = np.random.default_rng(5).integers(0, vocab, 1 << 20)
with open(sys.argv[1], "wb") as f:
    f.write(header.tobytes())
    f.write(tokens.astype(dtype).tobytes())' "$work/$1_tokens.bin" "$2"
}
gpt2bench_tokens() { bench_tokens gpt2bench 50257; }

step_gpt2bench() {
  needs_gpu
  gpt2bench_tokens
  local precision failed=0 idle_mib sampler trained
  idle_mib=$(gpu_memory_used_mib)
  for precision in fp32 bf16; do
    gpt2bench_config "$precision"
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 >"$work/used-$precision.txt" &
    sampler=$! trained=0
    train "gpt2bench-$precision" || trained=$?
    kill "$sampler" 2>/dev/null || true
    [ "$trained" = 0 ] || { failed=1; continue; }
    # The median after 10 warm-up steps; MFU is the runtime's, against its device's dense peak.
    python3 -c '
import json, statistics, sys
steps = [line for line in map(json.loads, open(sys.argv[1])) if "loss" in line][10:]
rate = statistics.median(line["tokens_per_s"] for line in steps)
mfu = [line["mfu"] for line in steps if line.get("mfu") is not None]
mfu_text = f"MFU {statistics.median(mfu):.1%}" if mfu else "MFU unknown (no peak for this GPU)"
memory = max(line.get("peak_device_mb", 0) for line in steps)
print(f"trainctl {sys.argv[2]}: {rate:,.0f} tokens/s, {mfu_text}, peak GPU memory {memory:,.0f} MiB")
# What the GPU held beyond its idle use also holds the CUDA context, cuBLASLt and the kernel
# images, which the runtime does not allocate: its own count must be less, by about those.
used = [int(line) for line in open(sys.argv[3]) if line.strip().isdigit()]
seen = max(used) - int(sys.argv[4]) if used else None
if seen is None:
    sys.exit("nvidia-smi gave no reading of the GPU memory used")
print(f"peak_device_mb {memory:,.0f} MiB; nvidia-smi: {seen:,} MiB used beyond the idle {sys.argv[4]} MiB, "
      f"at most, in {len(used)} readings; {seen - memory:+,.0f} MiB not counted by the runtime")
sys.exit(0 if memory <= seen else 1)
' "$work/runs/gpt2bench-$precision/metrics.jsonl" "$precision" "$work/used-$precision.txt" "$idle_mib" || failed=1
    rm -rf "$work/runs/gpt2bench-$precision/checkpoints"
  done
  python3 scripts/bench_gpu_lm.py --config "$work/gpt2bench-bf16.toml" --precisions bf16 || failed=1
  return "$failed"
}

# Llama 3.2 1B's shape (configs/llama3_2_1b.toml's model) on one GPU in bf16, micro-batch 4 x 2048
# tokens, recompute off, 30 steps without checkpoints but the last.
step_llama() {
  needs_gpu
  local failed=0
  "$kernel_test" --llama || failed=1
  bench_tokens llamabench 128256
  cat >"$work/llamabench.toml" <<TOML
[job]
name = "llamabench"
gpus_per_node = 1
cpus_per_rank = $threads
[model]
kind = "llama"
n_layer = 16
n_embd = 2048
n_head = 32
n_kv_head = 8
head_dim = 64
intermediate_size = 8192
vocab_size = 128256
block_size = 2048
rope_scaling = { rope_type = "llama3", factor = 32.0, low_freq_factor = 1.0, high_freq_factor = 4.0, original_max_position_embeddings = 8192 }
tie_embeddings = true
[data]
train = "llamabench_tokens.bin"
[train]
steps = 30
micro_batch = 4
lr = 2e-5
grad_clip = 1.0
log_every = 1
device = "cuda"
precision = "bf16"
[checkpoint]
every_steps = 0
keep_last = 1
TOML
  if train llamabench; then
    # The median after 10 warm-up steps; MFU is the runtime's, against its device's dense peak.
    python3 -c '
import json, statistics, sys
steps = [line for line in map(json.loads, open(sys.argv[1])) if "loss" in line][10:]
rate = statistics.median(line["tokens_per_s"] for line in steps)
mfu = [line["mfu"] for line in steps if line.get("mfu") is not None]
memory = max(line.get("peak_device_mb", 0) for line in steps)
mfu_text = f"MFU {statistics.median(mfu):.1%}" if mfu else "MFU unknown (no peak for this GPU)"
print(f"trainctl bf16: {rate:,.0f} tokens/s, {mfu_text}, peak GPU memory {memory:,.0f} MiB")
' "$work/runs/llamabench/metrics.jsonl" || failed=1
  else
    failed=1
  fi
  rm -rf "$work/runs/llamabench/checkpoints"
  python3 scripts/bench_gpu_lm.py --config "$work/llamabench.toml" --precisions bf16 --steps 20 || failed=1
  return "$failed"
}

step_zero3() {
  needs_gpu
  gpt2bench_tokens
  local zero
  for zero in 0 3; do
    gpt2bench_config bf16 40 "$zero"
    train "gpt2bench-bf16-zero$zero" || return 1
    rm -rf "$work/runs/gpt2bench-bf16-zero$zero/checkpoints"
  done
  python3 -c '
import json, statistics, sys
def of(path):
    steps = [line for line in map(json.loads, open(path)) if "loss" in line][10:]
    return (statistics.median(line["step_time_s"] for line in steps),
            max(line.get("peak_device_mb", 0) for line in steps))
(time0, memory0), (time3, memory3) = of(sys.argv[1]), of(sys.argv[2])
print(f"GPT-2 124M, bf16, micro-batch 8, one GPU: {time0 * 1e3:.1f} ms/step with zero = 0, {time3 * 1e3:.1f} ms "
      f"with zero = 3 ({time3 / time0 - 1:+.1%}); peak GPU memory {memory0:,.0f} and {memory3:,.0f} MiB")
' "$work/runs/gpt2bench-bf16-zero0/metrics.jsonl" "$work/runs/gpt2bench-bf16-zero3/metrics.jsonl"
}

# The issue's comparison: GPT-2 124M in bf16 at micro-batch 8 and 16, trainctl beside llm.c (the
# pack's train_gpt2cu, recompute off, no cuDNN; ../shared/notes/gpu-peers.md) and torch.compile
# (bench_gpu_lm.py), each the median step after 10 of 40; one line per micro-batch:
#   result (CARD, YYYY-MM-DD, micro-batch N): R× llm.c, R× torch.compile
step_peers() {
  needs_gpu
  [ -x "$llmc" ] || { echo "no llm.c in the pack: scripts/gpu_check.sh --pack with LLMC_SOURCE set"; return 1; }
  gpt2bench_tokens
  local micro_batch name card failed=0
  card=$(nvidia-smi --query-gpu=name --format=csv,noheader | sed -n 1p)
  for micro_batch in 8 16; do
    name=gpt2bench-bf16-zero0-mb$micro_batch
    gpt2bench_config bf16 40 0 "$micro_batch"
    train "$name" || { failed=1; continue; }
    rm -rf "$work/runs/$name/checkpoints"
    python3 scripts/bench_gpu_lm.py --config "$work/$name.toml" --precisions bf16 >"$work/$name-torch.out" 2>&1 ||
      { tail -n 5 "$work/$name-torch.out"; failed=1; continue; }
    cat "$work/$name-torch.out"
    # llm.c prints each step as "step   12/40 | ... | 27.49 ms | 24.2% bf16 MFU | 297904 tok/s".
    "$llmc" -i "$work/gpt2bench_tokens.bin" -j "$work/gpt2bench_tokens.bin" -e d12 -t 1024 -b "$micro_batch" \
      -r 0 -x 40 -v 1000 -m 1 -s 0 -h 0 >"$work/llmc-mb$micro_batch.out" 2>&1 ||
      { tail -n 5 "$work/llmc-mb$micro_batch.out"; failed=1; continue; }
    python3 - "$work/runs/$name/metrics.jsonl" "$work/$name-torch.out" "$work/llmc-mb$micro_batch.out" \
      "$card" "$micro_batch" <<'PY' || failed=1
import datetime, json, re, statistics, sys
metrics, torch_out, llmc_out, card, micro_batch = sys.argv[1:]
ours = statistics.median(line["tokens_per_s"] for line in [
    line for line in map(json.loads, open(metrics)) if "loss" in line][10:])
compiled = re.search(r"bf16 compile: ([\d,]+) tokens/s", open(torch_out).read())
# From each step's time, not llm.c's tok/s, which is a moving average.
llmc = [int(micro_batch) * 1024 / (float(ms) / 1e3) for step, ms in
        re.findall(r"^step +(\d+)/\d+ .*\| ([\d.]+) ms \|", open(llmc_out).read(), re.M) if int(step) > 10]
if not compiled or not llmc:
    sys.exit(f"no tokens/s of {'torch.compile' if not compiled else 'llm.c'} in its output")
compiled, llmc = float(compiled.group(1).replace(",", "")), statistics.median(llmc)
print(f"micro-batch {micro_batch}: trainctl {ours:,.0f}, llm.c {llmc:,.0f}, torch.compile {compiled:,.0f} tokens/s")
print(f"result ({card}, {datetime.date.today()}, micro-batch {micro_batch}): "
      f"{ours / llmc:.2f}× llm.c, {ours / compiled:.2f}× torch.compile")
PY
  done
  return "$failed"
}

# kernel_profile NAME: the run of config NAME under Nsight Compute, each kernel's GPU time at
# the clocks and caches it ran with (no clock locking, no cache flush), in $out/NAME-kernels.csv;
# printed grouped by kernel, the costliest first (scripts/kernel_profile.py).
kernel_profile() {
  local ncu
  ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
  "$ncu" --target-processes all --clock-control none --cache-control none --metrics gpu__time_duration.sum \
    --csv --page raw --log-file "$out/$1-kernels.csv" \
    "$trainctl" run "$work/$1.toml" --run-dir "$work/runs/$1" >"$work/$1.out" 2>&1 ||
    { tail -n 5 "$work/$1.out"; return 1; }
  python3 scripts/kernel_profile.py "$out/$1-kernels.csv"
}

step_profile() {
  needs_gpu
  gpt2bench_tokens
  gpt2bench_config bf16 2
  local failed=0
  echo "GPT-2 124M, bf16, micro-batch 8 x 1024 tokens, 2 steps:"
  kernel_profile gpt2bench-bf16 || failed=1
  bench_runs 16384
  # 12 steps: config's warmup_steps (10) must not exceed them.
  config bench-bf16 cuda bf16 12 0
  echo "the MLP of 4 x 8192 hidden, bf16, batch 8192, 12 steps:"
  kernel_profile bench-bf16 || failed=1
  return "$failed"
}

if [ "${1:-}" = --step ]; then
  set -e
  "step_$2"
  exit
fi

# ---- The loop: which steps, where the programs are, what they resolve to, then every step.
usage="usage: scripts/gpu_check.sh --pack | STEP... | all   (steps: ${all_steps[*]})"
[ $# -gt 0 ] || { echo "$usage" >&2; exit 2; }
steps=("$@")
[ "$*" = all ] && steps=("${all_steps[@]}")
for step in "${steps[@]}"; do
  [ -n "${step_limit[$step]:-}" ] || { echo "unknown step '$step'; $usage" >&2; exit 2; }
done

deadline=$((SECONDS + ${GPU_CHECK_BUDGET:-570}))
export device=${DEVICE:-cuda}
export out=${OUT:-/tmp/gpu-check-out}
export fp32_tolerance=${FP32_TOLERANCE:-1e-4} gpt2_tolerance=${GPT2_TOLERANCE:-1e-3}
export gpt2_bf16_tolerance=${GPT2_BF16_TOLERANCE:-2e-2}
export work threads
work=$(mktemp -d /tmp/trainctl-gpu.XXXXXX)
threads=$(nproc)
[ "$threads" -gt 8 ] && threads=8
mkdir -p "$out"
exec > >(tee "$out/gpu-check.log") 2>&1
log_writer=$!

if [ -f gpu-pack.tar.gz ]; then
  rm -rf /tmp/gpu-pack && tar -xzf gpu-pack.tar.gz -C /tmp
  programs=/tmp/gpu-pack/bin
  revision="pack $(cat /tmp/gpu-pack/REVISION)"
else
  programs=$PWD/build
  revision="build/ of $(git describe --always --dirty --abbrev=12 2>/dev/null || echo 'an unknown revision')"
fi
export trainctl=$programs/trainctl kernel_test=$programs/test_cuda_kernels tensor_core_test=$programs/test_tensor_cores
export attention_bench=$programs/bench_attention cuda_backend=$programs/../lib/libtrainctl-cuda.so
export llmc=$programs/train_gpt2cu
[ -x "$trainctl" ] || trainctl=$programs/cli/trainctl
[ -x "$kernel_test" ] || kernel_test=$programs/tests/test_cuda_kernels
[ -x "$tensor_core_test" ] || tensor_core_test=$programs/tests/test_tensor_cores
[ -x "$attention_bench" ] || attention_bench=$programs/tests/bench_attention
[ -f "$cuda_backend" ] || cuda_backend=$programs/kernels/libtrainctl-cuda.so
runtime=$(dirname "$trainctl")/trainctl-runtime
[ -x "$runtime" ] || runtime=$programs/runtime/trainctl-runtime

echo "== $(date -u +%FT%TZ) gpu_check ${steps[*]} on $device; $revision"
echo "== nvidia-smi"
if command -v nvidia-smi >/dev/null; then nvidia-smi 2>&1; else echo "no nvidia-smi: no GPU here"; fi
echo "== the programs' shared libraries"
for program in "$trainctl" "$runtime" "$kernel_test" "$tensor_core_test" "$attention_bench" "$llmc"; do
  [ -x "$program" ] || { echo "$program: missing"; continue; }
  resolved=$(ldd "$program" 2>&1)
  misses=$(grep 'not found' <<<"$resolved" | awk '{ print $1 }' | tr '\n' ' ')
  from_pack=$(grep -c "=> $(dirname "$program")/../lib/" <<<"$resolved")
  elsewhere=$(grep -vE "=> $(dirname "$program")/../lib/|not found|linux-vdso" <<<"$resolved" | awk '{ print $3 }' |
    tr '\n' ' ')
  echo "$(basename "$program"): MISSING: ${misses:-none}; $from_pack from the pack; the rest: $elsewhere"
done

declare -A result seconds
failures=0
for step in "${steps[@]}"; do
  limit=${step_limit[$step]}
  left=$((deadline - SECONDS))
  if [ "$left" -lt 30 ]; then
    result[$step]="SKIP (no time left in this call)" seconds[$step]=0
    continue
  fi
  [ "$left" -lt "$limit" ] && limit=$left
  echo
  echo "== $step (limit ${limit} s)"
  started=$SECONDS
  timeout --kill-after=10 "$limit" bash "$self" --step "$step"
  code=$?
  seconds[$step]=$((SECONDS - started))
  case $code in
    0) result[$step]=PASS ;;
    77) result[$step]=SKIP ;;
    124 | 137) result[$step]="FAIL (timed out after $limit s)" failures=$((failures + 1)) ;;
    *) result[$step]="FAIL (exit $code)" failures=$((failures + 1)) ;;
  esac
  echo "-- $step: ${result[$step]} in ${seconds[$step]} s"
done

# The runs' metrics and what trainctl printed, for a look afterwards.
(cd "$work" && find . -name metrics.jsonl -o -name '*.out' -o -name '*.toml' | tar -czf "$out/runs.tar.gz" -T -)
rm -rf "$work"
echo
echo "== summary: $revision, $device"
printf '%-12s %-36s %8s\n' step result seconds
for step in "${steps[@]}"; do printf '%-12s %-36s %8s\n' "$step" "${result[$step]}" "${seconds[$step]}"; done
echo "== $failures step(s) failed"
# The log is complete when tee has written the last line.
exec >&- 2>&-
wait "$log_writer"
exit $((failures > 0))
