#!/usr/bin/env bash
# Data parallelism of the GPT-2: 2 ranks x grad_accum 1 trains the weights of 1 rank x
# grad_accum 2 (the same global batch of 8 sequences, split differently) to 1e-6 relative
# after 10 steps, AdamW state included. eps = 1e-5: the key bias's gradient is zero in exact
# arithmetic, and AdamW with eps = 1e-8 turns the rounding noise there, which differs with the
# order the two layouts sum in, into steps of ~lr/100 (see gpt2_pytorch.sh).
source "$(dirname "$0")/lib.sh"
require_mpi
make_token_data
settings=(model.kind='"gpt2"' train.steps=10 train.weight_decay=0.1 train.eps=1e-5)
write_config two_ranks.toml two-ranks "${settings[@]}" train.grad_accum=1
write_config one_rank.toml one-rank "${settings[@]}" train.grad_accum=2
"$TRAINCTL" run two_ranks.toml --ranks 2 >/dev/null
"$TRAINCTL" run one_rank.toml --ranks 1 >/dev/null
grep -q '"global_batch":8' runs/two-ranks/metrics.jsonl || fail "global batch 4 x 1 x 2 = 8 not logged"
"$TRAINCTL" ckpt diff "$(checkpoint_of runs/two-ranks 10)" "$(checkpoint_of runs/one-rank 10)" --rtol 1e-6
echo "PASS"
