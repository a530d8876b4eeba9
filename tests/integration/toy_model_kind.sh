#!/usr/bin/env bash
# A model kind is one folder plus a line of the list of kinds: a test build of trainctl and its
# runtime (tests/toy_model_kind/) links a list with a third kind, "toy", whose schema, model,
# data, footprint and export config live in the test tree only. With it, validate reads the toy's
# own [model] keys (and refuses another kind's, naming file, line and key), estimate counts its
# memory, run trains it on the CPU (the loss falls), and export writes the toy's config; trainctl
# itself does not know the kind.
source "$(dirname "$0")/lib.sh"
require_mpi
[ -x "${TRAINCTL_WITH_TOY:-}" ] && [ -x "${TRAINCTL_RUNTIME_WITH_TOY:-}" ] ||
  fail "the test build with the toy kind is missing (TRAINCTL_WITH_TOY, TRAINCTL_RUNTIME_WITH_TOY)"
export TRAINCTL_RUNTIME=$TRAINCTL_RUNTIME_WITH_TOY
make_data
write_config mlp.toml toy train.steps=60
# The MLP's config with the toy's [model] table instead.
/usr/bin/python3 - <<'PY'
import re
text = open("mlp.toml").read()
model = '[model]\nkind = "toy"\nfeatures = 32\nclasses = 4\n\n'
open("toy.toml", "w").write(re.sub(r"\[model\]\n(?:[^\[\n].*\n|\n)*", model, text, count=1))
PY

"$TRAINCTL_WITH_TOY" validate toy.toml >validate.txt || fail "validate refused the toy config: $(cat validate.txt)"
grep -F "toy linear 32 -> 4" validate.txt >/dev/null || fail "validate does not describe the toy model: $(cat validate.txt)"

# The toy's schema is its own: an MLP key is refused where it stands.
sed 's/^classes = 4$/classes = 4\nhidden = [8]/' toy.toml >toy_hidden.toml
expect_exit 2 "$TRAINCTL_WITH_TOY" validate toy_hidden.toml
line=$(grep -n '^hidden' toy_hidden.toml | cut -d: -f1)
grep -F "toy_hidden.toml:$line" err.txt >/dev/null && grep -F "model.hidden" err.txt >/dev/null ||
  fail "the MLP key in a toy [model] is not refused at toy_hidden.toml:$line, model.hidden: $(cat err.txt)"

# The kind is the test build's alone; trainctl lists its own kinds.
expect_exit 2 "$TRAINCTL" validate toy.toml
grep -F "model.kind" err.txt >/dev/null && grep -F '"gpt2"' err.txt >/dev/null ||
  fail "trainctl does not refuse kind = \"toy\" with its list of kinds: $(cat err.txt)"

"$TRAINCTL_WITH_TOY" estimate toy.toml >estimate.txt || fail "estimate failed: $(cat estimate.txt)"
# One Linear 32 -> 4: 4 x 32 weights and 4 biases.
grep -E "132 parameters|parameters[^0-9]*132\b" estimate.txt >/dev/null ||
  fail "estimate does not count the toy's 132 parameters: $(cat estimate.txt)"

"$TRAINCTL_WITH_TOY" run toy.toml --ranks 2 >run.txt || fail "the toy run failed: $(cat run.txt)"
first_loss=$(grep -m 1 '"loss":' runs/toy/metrics.jsonl | sed -E 's/.*"loss":([-0-9.e+]+).*/\1/')
final_loss=$(last_metric runs/toy loss)
echo "toy loss: first logged $first_loss, final $final_loss"
awk -v first="$first_loss" -v final="$final_loss" 'BEGIN { exit !(final < 0.85 * first) }' ||
  fail "the toy's loss did not fall: $first_loss -> $final_loss"

"$TRAINCTL_WITH_TOY" export runs/toy -o exported >export.txt || fail "export failed: $(cat export.txt)"
/usr/bin/python3 - <<'PY' || fail "exported/config.json is not the toy's (above)"
import json
config = json.load(open("exported/config.json"))
assert config == {"model_type": "trainctl-toy", "features": 32, "classes": 4, "torch_dtype": "float32"}, config
PY
echo "PASS: validate, estimate, run and export of a model kind from the test tree"
