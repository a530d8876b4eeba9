#!/usr/bin/env bash
# The CUDA backend is a library the runtime opens only for train.device = "cuda" (kernels/device.h):
# - trainctl-runtime links no CUDA library (ldd), and a CPU run, held in start-up after binding
#   its device (TRAINCTL_TEST_PAUSE_IN=startup), maps none (/proc/PID/maps): no libcudart,
#   libcublas, libcublasLt, libnccl or trainctl CUDA backend;
# - a CUDA run on the CPU implementation (TRAINCTL_CUDA_BACKEND=cpu) maps its backend library
#   and still none of CUDA's own;
# - with nothing CUDA in it, the memory the runtime holds once started (--startup-memory) is the
#   build without CUDA's (23 MiB measured; it was 172 MiB while the runtime linked CUDA): the
#   test holds it below 64 MiB.
source "$(dirname "$0")/lib.sh"
make_data
runtime=${TRAINCTL_RUNTIME:-$(dirname "$TRAINCTL")/../runtime/trainctl-runtime}
cuda_libraries='libcudart|libcublas|libnccl|libtrainctl-cuda'

if ldd "$runtime" | grep -E "$cuda_libraries"; then fail "trainctl-runtime links CUDA"; fi

# maps_while_starting NAME DEVICE: the libraries a run of DEVICE maps while held in start-up.
maps_while_starting() {
  local settings=(job.ranks_per_node=1 train.steps=5 train.device="\"$2\"")
  [ "$2" = cuda ] && settings+=(job.gpus_per_node=1)
  write_config "$1.toml" "$1" "${settings[@]}"
  TRAINCTL_TEST_PAUSE_IN=startup "$TRAINCTL" run "$1.toml" >"$1.log" 2>&1 &
  local run=$!
  wait_for_file "runs/$1/test-paused.startup" 60
  local pid
  pid=$(pgrep -f "trainctl-runtime --run-dir $work/runs/$1\$" | sed -n 1p)
  [ -n "$pid" ] || fail "no runtime process for runs/$1"
  awk '$6 ~ /\.so/ { print $6 }' "/proc/$pid/maps" | sort -u >"$1.maps"
  kill -TERM "$pid"
  wait "$run" || true
}

maps_while_starting cpu cpu
[ -s cpu.maps ] || fail "read no mappings"
if grep -E "$cuda_libraries" cpu.maps; then fail "a CPU run maps CUDA libraries"; fi
echo "a CPU run maps $(wc -l <cpu.maps) libraries, none of CUDA's"

TRAINCTL_CUDA_BACKEND=cpu maps_while_starting cuda cuda
grep -q "libtrainctl-cuda-on-cpu.so" cuda.maps || fail "a CUDA run does not map its backend: $(cat cuda.maps)"
if grep -E 'libcudart|libcublas|libnccl' cuda.maps; then fail "the CPU implementation of CUDA maps CUDA's libraries"; fi
echo "a CUDA run on the CPU implementation maps libtrainctl-cuda-on-cpu.so, and none of CUDA's libraries"

held=$("$runtime" --startup-memory)
echo "trainctl-runtime holds $((held / 1048576)) MiB once started"
[ "$held" -lt $((64 << 20)) ] || fail "the runtime holds $held bytes once started"
echo "PASS"
