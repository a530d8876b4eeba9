#!/usr/bin/env bash
# Runs stopped by an earlier release (tests/fixtures/release_resume, its README says how they were
# made) resume under this build, on the CPU in fp32 with 2 ranks, to weights bitwise equal to that
# release's uninterrupted runs: an MLP (AdamW, weight decay, gradient clipping) and a small GPT-2.
source "$(dirname "$0")/lib.sh"
require_mpi
cp -r "$TRAINCTL_SOURCE_DIR/tests/fixtures/release_resume/." .
for model in mlp gpt2; do
  "$TRAINCTL" run $model.toml --ranks 2 --run-dir stopped/$model --resume >$model.log 2>&1 ||
    fail "$model: the resumed run failed: $(cat $model.log)"
  grep -q '"step":20,"event":"resume"' stopped/$model/metrics.jsonl || fail "$model: did not resume at step 20"
  "$TRAINCTL" ckpt diff full/$model/step-00000040.h5 "$(checkpoint_of stopped/$model 40)" ||
    fail "$model: step 40 differs from the release's"
done
echo "PASS"
