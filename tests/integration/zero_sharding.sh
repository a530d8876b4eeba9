#!/usr/bin/env bash
# ZeRO-1 against unsharded data parallelism: at 2 and 4 ranks, MLP and GPT-2, grad_accum 2 and
# gradient clipping (so the sharded global norm matters), 20 steps with train.zero = 1 end with
# the weights and AdamW state of train.zero = 0 bitwise. Both modes sum the gradients with one
# reduce-scatter over the same shards (runtime/grad_sync.h), so the equality is exact. The
# zero = 1 run's checkpoint is a sharded step directory, the zero = 0 run's one file.
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
echo "PASS"
