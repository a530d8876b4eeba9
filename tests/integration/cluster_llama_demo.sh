#!/usr/bin/env bash
# configs/llama_demo.toml as the README submits it, its length cut to 100 steps: on the real
# one-node cluster, 2 ranks, held at step 60 and signalled there (scancel -s TERM), it saves at
# the next step boundary, requeues itself, resumes from that checkpoint and completes with weights
# bitwise equal to an uninterrupted run's; its last logged loss is below 70% of its first.
source "$(dirname "$0")/lib.sh"
require_cluster 1
mkdir -p configs demo-data
cp "$TRAINCTL_SOURCE_DIR/configs/llama_demo.toml" configs/
sed -i 's/^steps = .*/steps = 100/' configs/llama_demo.toml
mapfile -t texts < <(find /usr/share/common-licenses -maxdepth 1 -type f | sort)
"$TRAINCTL" data tokenize "${texts[@]}" -o demo-data/licenses_train.bin --val-out demo-data/licenses_val.bin >/dev/null

stop_step=$(preempt_mid_run configs/llama_demo.toml runs/llama-demo 100)
echo "signalled, saved and resumed at step $stop_step"
"$TRAINCTL" run configs/llama_demo.toml --ranks 2 --run-dir runs/reference >reference.log
"$TRAINCTL" ckpt diff "$(checkpoint_of runs/reference 100)" "$(checkpoint_of runs/llama-demo 100)"

losses=$(sed -nE 's/.*"step":[0-9]+,"loss":([-0-9.e+]+).*/\1/p' runs/llama-demo/metrics.jsonl)
awk -v first="$(sed -n 1p <<<"$losses")" -v last="$(sed -n '$p' <<<"$losses")" 'BEGIN {
  printf "loss: first logged %.4f, last %.4f (%.0f%% of the first)\n", first, last, 100 * last / first
  exit !(last < 0.7 * first) }' || fail "the loss did not fall below 70% of its start"
echo "PASS"
