#!/usr/bin/env bash
# Fine-tuning under preemption on the real one-node cluster: a 2-rank job that starts from
# published weights (train.init_from; an `export` stands in for a download) is signalled mid-run,
# saves, requeues, and resumes from its own checkpoint, not from init_from again, finishing with
# weights bitwise equal to an uninterrupted fine-tuning run's.
source "$(dirname "$0")/lib.sh"
require_cluster 1
make_token_data
write_config pretrain.toml pretrain model.kind='"gpt2"' job.ranks_per_node=1 train.steps=30 checkpoint.every_steps=30
"$TRAINCTL" run pretrain.toml >/dev/null
"$TRAINCTL" export runs/pretrain -o published >/dev/null

settings=(model.kind='"gpt2"' data.train='"data/text_val.bin"' train.init_from='"published"' train.lr=3e-4
  train.steps=300 train.log_every=10 checkpoint.every_steps=100)
write_config preempted.toml finetune-preempted "${settings[@]}"
write_config reference.toml finetune-reference "${settings[@]}"

stop_step=$(preempt_mid_run preempted.toml runs/finetune-preempted 300)
metrics=runs/finetune-preempted/metrics.jsonl
[ "$(grep -c '"event":"init_from"' $metrics)" = 1 ] || fail "init_from was not loaded exactly once: $(grep event $metrics)"
echo "started from init_from, signalled, saved and resumed from its own checkpoint at step $stop_step"

"$TRAINCTL" run reference.toml --ranks 2 >reference.log
"$TRAINCTL" ckpt diff "$(checkpoint_of runs/finetune-reference 300)" "$(checkpoint_of runs/finetune-preempted 300)"
echo "PASS"
