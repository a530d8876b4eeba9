#!/usr/bin/env bash
# The README's "Using it" block runs as written: the test takes its one fenced block from README.md
# and runs it line by line (a line ending in a backslash continues), from a copy of the
# repository's configs on the real one-node cluster, with the trainctl under test first on PATH,
# stopping at the first command that fails. Only the demos' lengths are cut (train.steps), so that
# the test command stays within its time: the commands are the README's, verbatim. Then it checks
# what they made: the GPT-2 demo's export, the Llama demo's end, the MLP demo's plot, the local run and the sweep.
source "$(dirname "$0")/lib.sh"
require_cluster 1
export PATH="$(dirname "$TRAINCTL"):$PATH"
cp -r "$TRAINCTL_SOURCE_DIR/configs" configs
sed -i 's/^steps = .*/steps = 60/' configs/gpt2_demo.toml configs/llama_demo.toml configs/mlp_demo.toml configs/sweep_demo.toml

awk '/^## Using it/ { section = 1 } section && /^```/ { if (inside) exit; inside = 1; next } inside' \
  "$TRAINCTL_SOURCE_DIR/README.md" >using_it.sh
[ "$(grep -c '^trainctl ' using_it.sh)" -ge 15 ] || fail "no Using it block found: $(cat using_it.sh)"
bash -euo pipefail -x using_it.sh >using_it.log 2>&1 || { tail -n 40 using_it.log; fail "the Using it block failed"; }
echo "the README's Using it block ran: $(grep -c '^trainctl ' using_it.sh) commands"

[ -f hf/model.safetensors ] && [ -f hf/config.json ] || fail "no export in hf/"
[ "$(head -n 1 runs/gpt2-demo/job.outcome)" = completed ] || fail "gpt2-demo: $(cat runs/gpt2-demo/job.outcome)"
[ "$(head -n 1 runs/llama-demo/job.outcome)" = completed ] || fail "llama-demo: $(cat runs/llama-demo/job.outcome)"
grep -q "trainctl: job [0-9]* ended: COMPLETED" using_it.log || fail "logs -f did not follow the job to its end"
[ "$(png_size runs/mlp-demo/loss.png)" != "" ] || fail "no plot of the MLP demo"
[ -f runs/local/completed.step ] || fail "the local run did not complete"
grep -q "nothing to resubmit" using_it.log || fail "sweep resubmit --failed: $(grep -A3 'sweep resubmit' using_it.log)"
# The sweep's tasks run on after the block; the next test needs the cluster to itself.
deadline=$((SECONDS + 240))
while [ -n "$(squeue -h -o %i)" ]; do
  [ $SECONDS -lt $deadline ] || fail "the sweep's tasks did not finish: $(squeue)"
  sleep 1
done
"$TRAINCTL" sweep status runs/mlp-sweep >status.txt && grep -q "12 tasks (12 COMPLETED)" status.txt || fail "not all 12 sweep tasks completed"
echo "PASS"
