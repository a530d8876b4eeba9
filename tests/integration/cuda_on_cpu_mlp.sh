#!/usr/bin/env bash
# The MLP with train.device = "cuda" on the CPU implementation of CUDA (TRAINCTL_CUDA_BACKEND=cpu:
# the CUDA backend's own sources, built against cuda_on_cpu/), against the CPU device:
# - fp32, 200 steps, every step logged: each step's loss within 1e-6 relative of the CPU's. The
#   two compute the same GEMMs (OpenBLAS under both: cuBLASLt's column-major call on one side,
#   the row-major one on the other) and the same elementwise arithmetic; only the loss sum (in
#   double) and the bias gradients' sums over rows (in float, row blocks on CUDA) add in another
#   order. Measured: 1.5e-8 at most (2026-11-25). At lr 1e-3: at 1e-2, AdamW amplifies those
#   last-bit differences chaotically, to 1.7% by step 169 on either device.
# - bf16: every step within 1e-3 relative of the CPU's bf16 run (both store the activations in
#   bf16, rounded to nearest-even from the same fp32 results, and multiply them exactly in fp32;
#   a value that the fp32 differences above move across a rounding boundary would move by a bf16
#   ulp, 0.4%: measured 1.8e-15 at most, 2026-11-27), and within 2% of the CPU's fp32 run
#   (measured 0.1% at most).
# - a stop signal at step 100 (TRAINCTL_TEST_SIGNAL_AT_STEP), then --resume: the final
#   checkpoint is bitwise the uninterrupted CUDA run's.
# - a checkpoint written on CUDA resumes on the CPU, and one written on the CPU resumes on CUDA:
#   each run resumes at step 100 and ends within 1e-5 (per tensor, of its largest element) of
#   the run that stayed on the CPU.
# - 2 ranks on CUDA (NCCL over MPI, each rank its own GPU of CUDA_VISIBLE_DEVICES) against 2
#   ranks on the CPU (MPI): the same curve within 1e-6.
source "$(dirname "$0")/lib.sh"
make_data
export TRAINCTL_CUDA_BACKEND=cpu
compare_curves() { python3 "$TRAINCTL_SOURCE_DIR/scripts/compare_curves.py" "$@"; }

common=(train.steps=200 train.log_every=1 checkpoint.every_steps=50 job.ranks_per_node=1 model.hidden='[64, 64]'
  train.micro_batch=256 train.lr=1e-3)
cuda=(train.device='"cuda"' job.gpus_per_node=1)
write_config cpu.toml cpu "${common[@]}"
write_config cuda.toml cuda "${common[@]}" "${cuda[@]}"
write_config cpu_bf16.toml cpu-bf16 "${common[@]}" train.precision='"bf16"'
write_config cuda_bf16.toml cuda-bf16 "${common[@]}" "${cuda[@]}" train.precision='"bf16"'
for run in cpu cuda cpu_bf16 cuda_bf16; do "$TRAINCTL" run "$run.toml" >"$run.log" 2>&1 || fail "$run: $(cat "$run.log")"; done
grep -q "trainctl-runtime: rank 0 of 1 on .*: CUDA on CPU" cuda.log || fail "the CUDA run does not say which GPU it took"

echo "fp32, CUDA against the CPU:"
compare_curves runs/cpu runs/cuda --tolerance 1e-6 --steps 200 || fail "fp32 curves differ"
echo "bf16, CUDA against the CPU's bf16:"
compare_curves runs/cpu-bf16 runs/cuda-bf16 --tolerance 1e-3 --steps 200 || fail "bf16 curves differ"
echo "bf16 on CUDA against fp32 on the CPU:"
compare_curves runs/cpu runs/cuda-bf16 --tolerance 0.02 --steps 200 || fail "bf16 is not within 2% of fp32"

# stopped_at_100 CONFIG: runs CONFIG until the test hook's signal after step 100 stops it.
stopped_at_100() {
  if TRAINCTL_TEST_SIGNAL_AT_STEP=100 "$TRAINCTL" run "$1" >stop.log 2>&1; then fail "$1 did not stop at the signal"; fi
  grep -q "stopped by a signal after saving" stop.log || fail "$1 failed instead of stopping: $(cat stop.log)"
}
resumed_at_100() { grep -q '"step":100,"event":"resume"' "$1/metrics.jsonl" || fail "$1 did not resume at step 100"; }

write_config stopped.toml stopped "${common[@]}" "${cuda[@]}"
stopped_at_100 stopped.toml
"$TRAINCTL" run stopped.toml --resume >/dev/null
resumed_at_100 runs/stopped
"$TRAINCTL" ckpt diff "$(checkpoint_of runs/cuda 200)" "$(checkpoint_of runs/stopped 200)" ||
  fail "a CUDA run stopped and resumed does not end bitwise as the uninterrupted one"

write_config to_cpu.toml to-cpu "${common[@]}" "${cuda[@]}"
stopped_at_100 to_cpu.toml
write_config to_cpu.toml to-cpu "${common[@]}"
"$TRAINCTL" run to_cpu.toml --resume >/dev/null
resumed_at_100 runs/to-cpu
write_config to_cuda.toml to-cuda "${common[@]}"
stopped_at_100 to_cuda.toml
write_config to_cuda.toml to-cuda "${common[@]}" "${cuda[@]}"
"$TRAINCTL" run to_cuda.toml --resume >/dev/null
resumed_at_100 runs/to-cuda
for moved in to-cpu to-cuda; do
  "$TRAINCTL" ckpt diff "$(checkpoint_of runs/cpu 200)" "$(checkpoint_of "runs/$moved" 200)" --rtol 1e-5 ||
    fail "$moved does not end near the run that stayed on the CPU"
done

if [ "$TRAINCTL_HAVE_MPI" = 1 ]; then
  write_config cpu2.toml cpu-2 "${common[@]}" job.ranks_per_node=2 train.micro_batch=128
  write_config cuda2.toml cuda-2 "${common[@]}" job.ranks_per_node=2 train.micro_batch=128 \
    train.device='"cuda"' job.gpus_per_node=2
  "$TRAINCTL" run cpu2.toml --ranks 2 >/dev/null
  CUDA_VISIBLE_DEVICES=4,6 "$TRAINCTL" run cuda2.toml --ranks 2 >cuda2.log 2>&1 || fail "2 CUDA ranks: $(cat cuda2.log)"
  grep -q "rank 1 of 2 on .*(visible GPU 1 of CUDA_VISIBLE_DEVICES=\"4,6\"" cuda2.log ||
    fail "rank 1 did not take the second visible GPU: $(grep trainctl-runtime cuda2.log)"
  echo "2 ranks, CUDA (NCCL over MPI) against the CPU (MPI):"
  compare_curves runs/cpu-2 runs/cuda-2 --tolerance 1e-6 --steps 200 || fail "2-rank curves differ"
fi
echo "PASS"
