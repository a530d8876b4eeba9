#!/usr/bin/env bash
# GPT-2 under preemption on the real one-node cluster: a 2-rank gpt2 job signalled mid-run
# (scancel -s TERM) saves at the next step boundary, requeues itself, resumes from that
# checkpoint, and finishes with weights bitwise equal to an uninterrupted run's.
source "$(dirname "$0")/lib.sh"
require_cluster 1
make_token_data
settings=(model.kind='"gpt2"' data.val='"data/text_val.bin"' train.steps=300 train.eval_every=100
  train.log_every=10 checkpoint.every_steps=100)
write_config preempted.toml gpt2-preempted "${settings[@]}"
write_config reference.toml gpt2-reference "${settings[@]}"

stop_step=$(preempt_mid_run preempted.toml runs/gpt2-preempted 300)
grep -q '"val_perplexity":' runs/gpt2-preempted/metrics.jsonl || fail "no validation perplexity logged"
echo "signalled, saved and resumed at step $stop_step"

"$TRAINCTL" run reference.toml --ranks 2 >reference.log
"$TRAINCTL" ckpt diff "$(checkpoint_of runs/gpt2-reference 300)" "$(checkpoint_of runs/gpt2-preempted 300)"
echo "PASS"
