#!/usr/bin/env bash
# The ZeRO stages against unsharded data parallelism (train.zero = 0), gradient clipping on (so
# the sharded global norm matters):
# 1. 30 steps, zero = 2 and 3 end with the weights and AdamW state of zero = 0 bitwise: the MLP
#    at 3 ranks, GPT-2 at 3 and 4; Llama at 3, tied and untied, with zero = 3 (whose gradients go
#    as zero 2's do); zero = 1 in 2. and 3. Every mode sums each gradient element over the ranks in
#    rank order (runtime/comm.h), zero 0 and 1 over the whole buffer once backward is done, zero 2
#    and 3 layer by layer as backward finishes each (models/parameter_store.h), and the optimizer
#    acts on each element alone. The zero > 0 runs' checkpoints are sharded step directories, one
#    shard a rank.
# 2. At 4 ranks with grad_accum 2: zero = 1 still bitwise; zero 2 and 3 reduce each micro-batch's
#    gradients (no buffer of the whole model's gradients lives across micro-batches), so they sum
#    (a0 + b0 + ...) + (a1 + b1 + ...) where zero 0 sums (a0 + a1) + (b0 + b1) + ...: their loss
#    curves stay within 1e-6 relative of zero 0's at every step; the MLP's weights too, GPT-2's
#    within 1e-4 with AdamW's eps at 1e-5 (its key bias's gradient is zero in exact arithmetic, and
#    AdamW turns the rounding noise there into steps: gpt2_data_parallel.sh).
# 3. On 2 ranks, the rest of training's options: GPT-2 in bf16 with recompute, evaluation, early
#    stopping (stopping every run at step 10) and keep_best, whose best checkpoint is a linked
#    step directory; zero = 3 also with reshard_after_forward = false; and GPT-2 on device = "cuda"
#    over the CPU implementation of CUDA, zero 0, 1 and 3, where the collectives are NCCL's calls
#    (NCCL over MPI).
#    Bitwise throughout, since a sum of two addends is the same in any order. `export`, `sample`,
#    `eval` and `init_from` from the zero = 3 run give what they give from the zero = 0 run.
source "$(dirname "$0")/lib.sh"
require_mpi
make_data
make_token_data

common=(train.steps=30 train.log_every=1 train.grad_clip=0.5 train.weight_decay=0.1 checkpoint.every_steps=0)
gpt2=(model.kind='"gpt2"' train.micro_batch=2)
# run_modes NAME RANKS "ZEROS" SETTINGS...: trains NAME-Z for each Z of ZEROS.
run_modes() {
  local name=$1 ranks=$2 zeros=$3 zero
  shift 3
  for zero in $zeros; do
    write_config "$name-$zero.toml" "$name-$zero" "${common[@]}" job.ranks_per_node="$ranks" train.zero="$zero" "$@"
    TRAINCTL_CUDA_BACKEND=cpu CUDA_VISIBLE_DEVICES=0,1 "$TRAINCTL" run "$name-$zero.toml" --ranks "$ranks" >"$name-$zero.log" 2>&1 ||
      { cat "$name-$zero.log"; fail "$name: the zero = $zero run failed"; }
  done
}
# same NAME ZERO STEP [DIFF OPTIONS]: NAME-ZERO's checkpoint of STEP against NAME-0's.
same() {
  local name=$1 zero=$2 step=$3
  shift 3
  "$TRAINCTL" ckpt diff "$(checkpoint_of "runs/$name-0" "$step")" "$(checkpoint_of "runs/$name-$zero" "$step")" \
    "${@:---rtol=0}" >"$name-$zero.diff" || { cat "$name-$zero.diff"; fail "$name: zero = $zero differs from zero = 0"; }
}

for ranks in 3 4; do
  kinds="mlp gpt2"
  [ "$ranks" = 4 ] && kinds=gpt2  # the MLP's 4 ranks are those of 2. below
  for kind in $kinds; do
    settings=()
    [ "$kind" = gpt2 ] && settings=("${gpt2[@]}")
    run_modes "$kind-$ranks" "$ranks" "0 2 3" "${settings[@]}"
    for zero in 2 3; do
      sharded=$(checkpoint_of "runs/$kind-$ranks-$zero" 30)
      [ "$(find "$sharded" -name 'shard-*-of-*.h5' | wc -l)" = "$ranks" ] && [ -f "$sharded/manifest.json" ] ||
        fail "$kind on $ranks ranks: zero = $zero wrote no sharded step directory of a shard a rank"
      same "$kind-$ranks" "$zero" 30
    done
    echo "$kind on $ranks ranks: zero = 2 and 3 equal zero = 0 bitwise after 30 steps"
  done
done

# Llama, tied (the embedding kept, being the head too) and untied (the embedding the first layer,
# the head in the last with the final norm).
for tie in true false; do
  run_modes "llama-$tie" 3 "0 3" model.kind='"llama"' model.tie_embeddings="$tie" train.micro_batch=2
  same "llama-$tie" 3 30
done
echo "llama, tied and untied, on 3 ranks: zero = 3 equals zero = 0 bitwise after 30 steps"

for kind in mlp gpt2; do
  settings=(train.grad_accum=2)
  [ "$kind" = gpt2 ] && settings+=("${gpt2[@]}" train.eps=1e-5)
  run_modes "$kind-accum" 4 "0 1 2 3" "${settings[@]}"
  same "$kind-accum" 1 30
  weights=1e-6
  [ "$kind" = gpt2 ] && weights=1e-4
  for zero in 2 3; do
    python3 "$TRAINCTL_SOURCE_DIR/scripts/compare_curves.py" "runs/$kind-accum-0" "runs/$kind-accum-$zero" \
      --tolerance 1e-6 --steps 30 >"$kind-$zero-curve.txt" ||
      { cat "$kind-$zero-curve.txt"; fail "$kind, grad_accum 2: zero = $zero's loss curve is not within 1e-6"; }
    same "$kind-accum" "$zero" 30 --rtol "$weights" --optimizer-rtol 1e-2
  done
  echo "$kind on 4 ranks, grad_accum 2: zero = 1 bitwise; zero = 2 and 3 losses within 1e-6 at each of 30 steps," \
    "weights within $weights"
done

options=("${gpt2[@]}" train.steps=20 train.precision='"bf16"' train.recompute=true data.val='"data/text_val.bin"'
  train.eval_every=5 train.early_stop='{ patience = 1, min_delta = 10.0 }' checkpoint.keep_best=true)
run_modes options 2 "0 1 2 3" "${options[@]}"
write_config options-4.toml options-4 "${common[@]}" "${options[@]}" train.zero=3 train.reshard_after_forward=false
"$TRAINCTL" run options-4.toml --ranks 2 >options-4.log 2>&1 || { cat options-4.log; fail "options: reshard_after_forward = false failed"; }
for zero in 1 2 3 4; do
  grep -q '"step":10,"event":"early_stop"' "runs/options-$zero/metrics.jsonl" || fail "options-$zero: no early stop at 10"
  best=runs/options-$zero/checkpoints/best/step-00000005
  [ -f "$best/manifest.json" ] || fail "options-$zero: no sharded best checkpoint at step 5"
  "$TRAINCTL" ckpt diff runs/options-0/checkpoints/best/step-00000005.h5 "$best" >/dev/null ||
    fail "options-$zero: the best checkpoints differ"
  same options "$zero" 10
done
echo "gpt2 (bf16, recompute, evaluation, early stopping) on 2 ranks: zero = 1, 2, 3 and 3 without resharding equal zero = 0 bitwise"
# What reads a run's checkpoints reads a zero = 3 run's as any other: export, sample and eval give
# what they give for the zero = 0 run, and init_from starts zero = 3 as it starts zero = 0.
for zero in 0 3; do
  "$TRAINCTL" export "runs/options-$zero" -o "exported-$zero" >/dev/null
  "$TRAINCTL" sample "runs/options-$zero" --prompt "This License" --tokens 16 --temperature 0 >"sample-$zero.txt"
  "$TRAINCTL" eval "runs/options-$zero" | sed "s|runs/options-$zero|RUN|g" >"eval-$zero.txt"
  write_config "init-$zero.toml" "init-$zero" "${gpt2[@]}" train.steps=2 train.zero="$zero" train.init_from='"exported-0"'
  "$TRAINCTL" run "init-$zero.toml" --ranks 2 >"init-$zero.log" 2>&1 || { cat "init-$zero.log"; fail "init_from, zero = $zero"; }
done
for output in exported-{0,3}/model.safetensors sample-{0,3}.txt eval-{0,3}.txt; do [ -s "$output" ] || fail "$output is empty"; done
cmp exported-{0,3}/model.safetensors && cmp sample-{0,3}.txt && cmp eval-{0,3}.txt ||
  fail "export, sample or eval of the zero = 3 run differs from the zero = 0 run's"
same init 3 2
echo "export, sample and eval read the zero = 3 run as the zero = 0 run; init_from starts zero = 3 bitwise as zero = 0"
if [ "${TRAINCTL_HAVE_CUDA_ON_CPU:-0}" = 1 ]; then
  run_modes cuda 2 "0 1 3" "${gpt2[@]}" train.steps=20 train.device='"cuda"' job.gpus_per_node=2
  for zero in 1 3; do same cuda "$zero" 20; done
  echo "gpt2 on device = \"cuda\" (NCCL) on 2 ranks: zero = 1 and 3 equal zero = 0 bitwise"
fi
echo "PASS"
