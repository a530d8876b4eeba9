#!/usr/bin/env bash
# The GPU checks of the CUDA runtime, as one command for the device machine:
#   1. every CUDA kernel against its CPU reference (build/tests/test_cuda_kernels: the worst
#      element of each op, within a stated tolerance per dtype);
#   2. a 1-GPU fp32 run against the same run on the CPU: losses within 1e-4 relative at each
#      of 200 steps;
#   3. a bf16 run whose final loss is within 2% of the fp32 run's;
#   4. SIGTERM mid-run, then resume: final weights bitwise equal to an uninterrupted GPU run;
#   5. samples/s and TFLOP/s of a compute-bound MLP (4 x 8192 hidden, batch 8192) in fp32 and
#      bf16, beside PyTorch eager and torch.compile on the same GPU (scripts/bench_gpu_mlp.py).
#
# Here:   scripts/gpu_check.sh --pack
#   builds build-gpu/ (CUDA, no MPI: every check uses one GPU, and the device machine has no
#   Open MPI) and packs its three programs, with the shared libraries they need apart from
#   CUDA's and the C library's, into gpu-pack.tar.xz (13 MB; git-ignored) for the device tool
#   to carry: `run` with carry ["gpu-pack.tar.xz"] and command `scripts/gpu_check.sh`.
# There:  scripts/gpu_check.sh
#   unpacks gpu-pack.tar.xz (else runs from build/), takes CUDA's libraries from the image's
#   Python packages (nvidia-*), and writes what it prints to $OUT/gpu-check.log as well. DEVICE=cpu runs
#   steps 2-4 on the CPU at a small size, which checks this script on a machine without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = --pack ]; then
  export PATH="$PATH:/usr/local/cuda/bin"
  [ -f build-gpu/build.ninja ] || meson setup build-gpu -Dcuda=enabled -Dmpi=disabled >/dev/null
  ninja -C build-gpu >/dev/null
  rm -rf gpu-pack && mkdir -p gpu-pack/lib
  programs=(build-gpu/cli/trainctl build-gpu/runtime/trainctl-runtime build-gpu/tests/test_cuda_kernels)
  cp "${programs[@]}" gpu-pack/
  ldd "${programs[@]}" | awk '/=> \// { print $3 }' | sort -u |
    grep -vE '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*|libcuda[^/]*|libcublas[^/]*|libnccl[^/]*)\.so' |
    xargs -I{} cp -L {} gpu-pack/lib/
  tar -cJf gpu-pack.tar.xz gpu-pack && rm -rf gpu-pack
  du -h gpu-pack.tar.xz
  exit 0
fi

if [ -f gpu-pack.tar.xz ]; then
  tar -xJf gpu-pack.tar.xz -C /tmp
  programs=/tmp/gpu-pack
  export LD_LIBRARY_PATH="$programs/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
else
  programs=$PWD/build
fi
trainctl=$programs/trainctl
[ -x "$trainctl" ] || trainctl=$programs/cli/trainctl
kernel_test=$programs/test_cuda_kernels
[ -x "$kernel_test" ] || kernel_test=$programs/tests/test_cuda_kernels
# CUDA's libraries as the image's PyTorch has them (pip's nvidia-* packages), when present.
nvidia_root=$(python3 -c 'import nvidia, os; print(os.path.dirname(nvidia.__file__ or nvidia.__path__[0]))' 2>/dev/null || true)
for lib in "$nvidia_root"/nvidia/*/lib; do
  [ -d "$lib" ] && export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$lib"
done
device=${DEVICE:-cuda}
out=${OUT:-$PWD/gpu-check-out}
mkdir -p "$out"
work=$(mktemp -d /tmp/trainctl-gpu.XXXXXX)
exec > >(tee "$out/gpu-check.log") 2>&1
echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || echo 'no GPU')"
failures=0
# check LABEL COMMAND...
check() {
  local label=$1
  shift
  if "$@"; then echo "PASS: $label"; else echo "FAIL: $label"; failures=$((failures + 1)); fi
}

if [ "$device" = cuda ]; then
  echo "== 1. kernels against their CPU references"
  check "kernels within tolerance of the CPU reference" "$kernel_test"
fi

# config NAME DEVICE PRECISION STEPS HIDDEN BATCH: a one-rank config in $work/NAME.toml.
config() {
  cat >"$work/$1.toml" <<EOF
[job]
name = "$1"
gpus_per_node = $([ "$2" = cuda ] && echo 1 || echo 0)
[model]
inputs = $features
hidden = $5
classes = $classes
activation = "gelu"
[data]
train = "$work/train.h5"
[train]
steps = $4
micro_batch = $6
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
every_steps = 50
keep_last = 2
EOF
}
train() { "$trainctl" run "$work/$1.toml" --run-dir "$work/runs/$1" "${@:2}"; }
losses() { sed -nE 's/.*"loss":([-0-9.e+]+).*/\1/p' "$work/runs/$1/metrics.jsonl"; }

features=64 classes=16
[ "$device" = cuda ] && hidden='[1024, 1024]' batch=256 || hidden='[64, 64]' batch=32
"$trainctl" data synth -o "$work/train.h5" --samples 16384 --features $features --classes $classes --seed 3 >/dev/null

echo "== 2. $device fp32 against the CPU, 200 steps, 1e-4 relative"
config cpu cpu fp32 200 "$hidden" $batch
config fp32 "$device" fp32 200 "$hidden" $batch
train cpu >/dev/null
train fp32 >/dev/null
losses cpu >"$work/cpu.losses"
losses fp32 >"$work/fp32.losses"
check "loss curve within 1e-4 of the CPU's" python3 -c '
import sys
cpu = [float(v) for v in open(sys.argv[1])]
gpu = [float(v) for v in open(sys.argv[2])]
assert len(cpu) == len(gpu) == 200, (len(cpu), len(gpu))
worst = max(range(200), key=lambda i: abs(gpu[i] - cpu[i]) / abs(cpu[i]))
rel = abs(gpu[worst] - cpu[worst]) / abs(cpu[worst])
print(f"worst step {worst + 1}: cpu {cpu[worst]:.9g} gpu {gpu[worst]:.9g} relative {rel:.3g}")
sys.exit(0 if rel <= 1e-4 else 1)' "$work/cpu.losses" "$work/fp32.losses"

echo "== 3. bf16 against fp32: final loss within 2%"
config bf16 "$device" bf16 200 "$hidden" $batch
train bf16 >/dev/null
check "bf16 final loss within 2% of fp32" python3 -c '
import sys
fp32, bf16 = float(sys.argv[1]), float(sys.argv[2])
print(f"final loss fp32 {fp32:.6g} bf16 {bf16:.6g} ({(bf16 - fp32) / fp32:+.3%})")
sys.exit(0 if abs(bf16 - fp32) <= 0.02 * abs(fp32) else 1)' "$(losses fp32 | tail -n 1)" "$(losses bf16 | tail -n 1)"

echo "== 4. SIGTERM mid-run, resume, bitwise equal to an uninterrupted run"
config whole "$device" fp32 600 "$hidden" $batch
config split "$device" fp32 600 "$hidden" $batch
train whole >/dev/null
train split >/dev/null 2>&1 &
runner=$!
until [ "$(losses split 2>/dev/null | wc -l)" -ge 150 ]; do sleep 0.05; done
pkill -TERM -f "trainctl-runtime --run-dir $work/runs/split" || true
wait "$runner" || true
stopped=$(sed -nE 's/.*"step":([0-9]+),"event":"stop".*/\1/p' "$work/runs/split/metrics.jsonl")
echo "stopped at step ${stopped:-?}"
train split --resume >/dev/null
check "resumed weights bitwise equal" "$trainctl" ckpt diff "$work/runs/whole/checkpoints/step-00000600.h5" "$work/runs/split/checkpoints/step-00000600.h5"

if [ "$device" = cuda ]; then
  echo "== 5. throughput: MLP 4 x 8192 hidden, batch 8192, against PyTorch"
  features=1024 classes=1024
  "$trainctl" data synth -o "$work/train.h5" --samples 65536 --features $features --classes $classes --seed 3 >/dev/null
  for precision in fp32 bf16; do
    config "big-$precision" cuda $precision 60 '[8192, 8192, 8192, 8192]' 8192
    train "big-$precision" >/dev/null
    # The median of the logged rates after the first 10 steps (warm-up), and FLOPs per sample:
    # 2 per multiply-add, forward plus two backward GEMMs.
    python3 -c '
import json, statistics, sys
rates = [json.loads(l)["samples_per_s"] for l in open(sys.argv[1]) if "\"loss\"" in l][10:]
widths = [1024, 8192, 8192, 8192, 8192, 1024]
flops = 6 * sum(a * b for a, b in zip(widths, widths[1:]))
rate = statistics.median(rates)
print(f"trainctl {sys.argv[2]}: {rate:,.0f} samples/s, {rate * flops / 1e12:.1f} TFLOP/s, MFU {rate * flops / 989e12:.1%} of 989 TFLOP/s")
' "$work/runs/big-$precision/metrics.jsonl" "$precision"
  done
  python3 scripts/bench_gpu_mlp.py --features $features --classes $classes --hidden 8192 --layers 4 --batch 8192 ||
    echo "FAIL: the PyTorch peer did not run"
fi

echo "== $failures check(s) failed"
rm -rf "$work"
exit $((failures > 0))
