#!/usr/bin/env bash
# The node check's cost at a job's start, reported in docs/benchmarks.md (issue 33: at most 5 s on
# a one-node job). On the local cluster (scripts/cluster.sh, brought up, or reshaped, to one node
# with one fake GPU), `srun --mpi=pmix` starts the ranks of a run of one step, the way the
# batch script starts them, with TRAINCTL_NODE_CHECK_TIMEOUT set (the check) and unset (none),
# alternately, REPS times each after one unrecorded warm-up of each; reported: the median and min
# wall time of the srun, their difference, and the check's own time as rank 0 logs it
# ("node check passed in S s"). Three runs: 1 rank on cpu, 2 ranks on cpu, 1 rank on cuda (the
# CPU implementation of CUDA).
# Usage: [REPS=5] scripts/bench_node_check.sh [new or empty workdir]
set -euo pipefail
export LC_ALL=C  # a '.' in $EPOCHREALTIME
cd "$(dirname "$0")/.."
source=$PWD
reps=${REPS:-5}
work=${1:-$(mktemp -d /tmp/trainctl-bench-node-check.XXXXXX)}
mkdir -p "$work"
scripts/build.sh >/dev/null
scripts/cluster.sh up --nodes 1 --gpus 1 >/dev/null
trainctl=$source/build/cli/trainctl
runtime=$source/build/runtime/trainctl-runtime
export TRAINCTL_CUDA_BACKEND=cpu
cd "$work"
"$trainctl" data synth -o train.h5 --samples 1024 --features 32 --classes 4 --seed 1 >/dev/null

# run_dir NAME DEVICE: a run directory of a one-step MLP on DEVICE, as submit prepares it.
run_dir() {
  mkdir -p "$1"
  cat >"$1/config.toml" <<TOML
[job]
name = "$1"
[model]
inputs = 32
hidden = [64]
classes = 4
[data]
train = "$work/train.h5"
[train]
steps = 1
micro_batch = 32
device = "$2"
[checkpoint]
every_steps = 1000
TOML
}

# seconds RANKS DEVICE CHECK: the wall time of one srun of the ranks, with the check or without.
seconds() {
  local dir=run-$2-$1-$3 start
  rm -rf "$dir"
  run_dir "$dir" "$2"
  local gres=()
  [ "$2" = cuda ] && gres=(--gpus-per-node=1)
  start=$EPOCHREALTIME
  if [ "$3" = check ]; then
    TRAINCTL_NODE_CHECK_TIMEOUT=300 srun -N 1 -n "$1" "${gres[@]}" --mpi=pmix "$runtime" --run-dir "$work/$dir" >"$dir.log" 2>&1
  else
    srun -N 1 -n "$1" "${gres[@]}" --mpi=pmix "$runtime" --run-dir "$work/$dir" >"$dir.log" 2>&1
  fi
  echo "$EPOCHREALTIME - $start" | bc -l
}

median_min() { sort -g | awk '{ v[NR] = $1 } END { printf "%.3f %.3f\n", v[int((NR + 1) / 2)], v[1] }'; }

printf '%-14s %10s %10s %10s %10s %12s %16s\n' run "none med" "none min" "check med" "check min" "difference" "check's own"
for shape in "1 cpu" "2 cpu" "1 cuda"; do
  read -r ranks device <<<"$shape"
  seconds "$ranks" "$device" none >/dev/null
  seconds "$ranks" "$device" check >/dev/null
  none=() check=() own=()
  for ((rep = 0; rep < reps; rep++)); do
    none+=("$(seconds "$ranks" "$device" none)")
    check+=("$(seconds "$ranks" "$device" check)")
    own+=("$(sed -nE 's/.*node check passed in ([0-9.]+) s.*/\1/p' "run-$device-$ranks-check.log")")
  done
  read -r none_median none_min < <(printf '%s\n' "${none[@]}" | median_min)
  read -r check_median check_min < <(printf '%s\n' "${check[@]}" | median_min)
  read -r own_median _ < <(printf '%s\n' "${own[@]}" | median_min)
  printf '%-14s %10s %10s %10s %10s %12.3f %16s\n' "$ranks x $device" "$none_median" "$none_min" "$check_median" \
    "$check_min" "$(echo "$check_median - $none_median" | bc -l)" "$own_median"
done
echo "(seconds; median and min of $reps srun starts each; $(nproc) CPUs, $(date -u +%Y-%m-%d))"
