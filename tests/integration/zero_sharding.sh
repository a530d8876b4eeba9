#!/usr/bin/env bash
# ZeRO-1 against unsharded data parallelism: at 2 and 4 ranks, MLP and GPT-2, grad_accum 2 and
# gradient clipping (so the sharded global norm matters), 20 steps with train.zero = 1 end with
# the weights and AdamW state of train.zero = 0 bitwise. Both modes sum the gradients with one
# reduce-scatter over the same shards (runtime/grad_sync.h), so the equality is exact. The
# zero = 1 run's checkpoint is a sharded step directory, the zero = 0 run's one file.
# Then, on 2 ranks, the same with the rest of training's options: GPT-2 in bf16 with recompute,
# evaluation, early stopping (stopping both runs at step 10) and keep_best, whose best checkpoint
# is a linked step directory; and GPT-2 on device = "cuda" over the CPU implementation of CUDA,
# where the collectives are NCCL's calls (NCCL over MPI): there, too, bitwise on 2 ranks, since a
# sum of two addends is the same in any order.
source "$(dirname "$0")/lib.sh"
require_mpi
make_data
make_token_data

common=(train.steps=20 train.grad_accum=2 train.grad_clip=0.5 train.weight_decay=0.1 checkpoint.every_steps=0)
for ranks in 2 4; do
  for kind in mlp gpt2; do
    model=()
    [ "$kind" = gpt2 ] && model=(model.kind='"gpt2"' train.micro_batch=2)
    for zero in 0 1; do
      write_config "$kind-$ranks-$zero.toml" "$kind-$ranks-$zero" "${model[@]}" "${common[@]}" \
        job.ranks_per_node="$ranks" train.zero="$zero"
      "$TRAINCTL" run "$kind-$ranks-$zero.toml" --ranks "$ranks" >/dev/null
    done
    sharded=$(checkpoint_of "runs/$kind-$ranks-1" 20)
    [ -f "$sharded/manifest.json" ] || fail "$kind on $ranks ranks: zero = 1 wrote no sharded step directory"
    [ "$(find "$sharded" -name 'shard-*-of-*.h5' | wc -l)" = "$ranks" ] || fail "$kind: not one shard per rank"
    "$TRAINCTL" ckpt diff "$(checkpoint_of "runs/$kind-$ranks-0" 20)" "$sharded" --rtol 0 \
      || fail "$kind on $ranks ranks: zero = 1 differs from zero = 0"
    echo "$kind on $ranks ranks: zero = 1 equals zero = 0 bitwise after 20 steps"
  done
done
options=(model.kind='"gpt2"' train.micro_batch=2 train.precision='"bf16"' train.recompute=true
  data.val='"data/text_val.bin"' train.eval_every=5 train.early_stop='{ patience = 1, min_delta = 10.0 }'
  checkpoint.keep_best=true)
[ "${TRAINCTL_HAVE_CUDA_ON_CPU:-0}" = 1 ] && cuda=cuda || cuda=
for variant in options $cuda; do
  settings=(model.kind='"gpt2"' train.micro_batch=2)
  [ "$variant" = options ] && settings=("${options[@]}")
  [ "$variant" = cuda ] && settings+=(train.device='"cuda"' job.gpus_per_node=2)
  for zero in 0 1; do
    write_config "$variant-$zero.toml" "$variant-$zero" "${settings[@]}" "${common[@]}" train.zero="$zero"
    TRAINCTL_CUDA_BACKEND=cpu CUDA_VISIBLE_DEVICES=0,1 "$TRAINCTL" run "$variant-$zero.toml" --ranks 2 >/dev/null
  done
  last=20
  if [ "$variant" = options ]; then
    last=10
    grep -q '"step":10,"event":"early_stop"' runs/options-1/metrics.jsonl || fail "options: no early stop at step 10"
    best=runs/options-1/checkpoints/best/step-00000005
    [ -f "$best/manifest.json" ] || fail "options: no sharded best checkpoint at step 5"
    "$TRAINCTL" ckpt diff runs/options-0/checkpoints/best/step-00000005.h5 "$best" >/dev/null ||
      fail "options: the best checkpoints differ"
  fi
  "$TRAINCTL" ckpt diff "$(checkpoint_of "runs/$variant-0" $last)" "$(checkpoint_of "runs/$variant-1" $last)" --rtol 0 \
    >/dev/null || fail "$variant: zero = 1 differs from zero = 0"
  echo "gpt2 ($variant) on 2 ranks: zero = 1 equals zero = 0 bitwise at step $last"
done
echo "PASS"
