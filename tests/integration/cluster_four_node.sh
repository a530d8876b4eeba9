#!/usr/bin/env bash
# Four nodes on the real local cluster (scripts/cluster.sh up --nodes 4): a GPT-2 job of 4 nodes x
# 2 ranks with ZeRO-1, signalled mid-run, saves its shards, requeues, resumes and ends bitwise
# equal to an uninterrupted 8-rank run. The finished run is then resubmitted with --resume and
# more steps as 2 nodes x 1 rank x grad_accum 4 (the same global batch of 8 sequences): its
# 8-rank sharded checkpoint is resharded onto 2 ranks, and it ends within 1e-6 relative of the
# uninterrupted 8-rank run taken as far: the weights to 1e-6, AdamW's moments to 1e-5 (they average
# the gradients, whose sums over 8 ranks and over 2 ranks x 4 micro-batches differ by fp32 rounding,
# up to 2e-6 of a small tensor's scale). eps = 1e-3: the key bias's gradient is zero in exact
# arithmetic, and a smaller eps turns that rounding noise into steps of the weights (see
# gpt2_pytorch.sh).
source "$(dirname "$0")/lib.sh"
require_cluster 4
make_token_data
settings=(model.kind='"gpt2"' job.nodes=4 job.ranks_per_node=2 job.env='{ OMPI_MCA_btl = "self,tcp" }' train.micro_batch=1 train.zero=1 train.eps=1e-3
  train.log_every=10 checkpoint.every_steps=50)
write_config four.toml gpt2-four "${settings[@]}" train.steps=200
write_config reference.toml gpt2-reference "${settings[@]}" train.steps=200
write_config two.toml gpt2-four "${settings[@]}" train.steps=260 job.nodes=2 job.ranks_per_node=1 train.grad_accum=4
write_config reference_longer.toml gpt2-reference-longer "${settings[@]}" train.steps=260

# The uninterrupted 8-rank runs, while the cluster works.
{ "$TRAINCTL" run reference.toml --ranks 8 && "$TRAINCTL" run reference_longer.toml --ranks 8; } >reference.log 2>&1 &
reference=$!

stop_step=$(preempt_mid_run four.toml runs/gpt2-four 200)
[ "$(find "$(checkpoint_of runs/gpt2-four 200)" -name 'shard-*-of-00008.h5' | wc -l)" = 8 ] ||
  fail "the last checkpoint is not 8 shards"
hosts=$("$TRAINCTL" ckpt inspect "$(checkpoint_of runs/gpt2-four 200)" | sed -n 's/.*hosts //p')
[ "$(tr ',' '\n' <<<"$hosts" | sort -u | tr '\n' ' ')" = "n1 n2 n3 n4 " ] || fail "ranks ran on: $hosts"
echo "4 nodes x 2 ranks: signalled, saved and resumed at step $stop_step"
wait "$reference" || fail "the uninterrupted runs failed: $(cat reference.log)"
"$TRAINCTL" ckpt diff "$(checkpoint_of runs/gpt2-reference 200)" "$(checkpoint_of runs/gpt2-four 200)"

job=$(submit two.toml --resume)
wait_for_job "$job" 240 COMPLETED FAILED CANCELLED
[ "$(job_field "$job" JobState)" = COMPLETED ] || { cat runs/gpt2-four/logs/slurm-"$job".out; fail "the 2-node resume failed"; }
grep -q '"step":200,"event":"resume"' runs/gpt2-four/metrics.jsonl || fail "the 2-node job did not resume at step 200"
"$TRAINCTL" ckpt inspect "$(checkpoint_of runs/gpt2-four 260)" >inspect.txt && grep -q "world_size 2, global_batch 8" inspect.txt ||
  fail "the final checkpoint is not a 2-rank one with the same global batch"
"$TRAINCTL" ckpt diff "$(checkpoint_of runs/gpt2-reference-longer 260)" "$(checkpoint_of runs/gpt2-four 260)" --rtol 1e-6 \
  --optimizer-rtol 1e-5
echo "PASS"
