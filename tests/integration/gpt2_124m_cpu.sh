#!/usr/bin/env bash
# configs/gpt2_124m.toml's model, the full GPT-2 124M shape (vocabulary 50257, padded to 50304
# for the GEMMs), trains 2 steps on this CPU at micro_batch 1: the loss of the first batch is
# that of a uniform guess over GPT-2's vocabulary, ln(50257) = 10.825, to 0.1 (GPT-2's init
# gives logits of std ~0.5, no more), the second batch's is lower after one AdamW step, and the
# checkpoint holds wte unpadded as [50257, 768] under Hugging Face's name. Only the GPU-cluster
# settings are changed (scripts/gpt2_124m_on_cpu.sh); the data are byte tokens of the licence
# texts.
source "$(dirname "$0")/lib.sh"
make_token_data
"$TRAINCTL_SOURCE_DIR/scripts/gpt2_124m_on_cpu.sh" gpt2_124m.toml data/text_train.bin 2
"$TRAINCTL" run gpt2_124m.toml --run-dir run >run.log
loss_at() { grep "\"step\":$1," run/metrics.jsonl | grep '"loss":' | sed -E 's/.*"loss":([-0-9.e+]+).*/\1/'; }
/usr/bin/python3 - "$(loss_at 1)" "$(loss_at 2)" <<'PY'
import math, sys
first, last = map(float, sys.argv[1:])
uniform = math.log(50257)
print(f"step-0 loss {first:.4f}, ln(50257) = {uniform:.4f} (difference {first - uniform:+.4f}, tolerance 0.1); step-1 loss {last:.4f}")
if abs(first - uniform) > 0.1:
    sys.exit("FAIL: the first loss is not ln(50257) to 0.1")
if not last < first:
    sys.exit("FAIL: the loss did not fall")
PY
wte=$(h5ls "$(checkpoint_of run 2)/model/transformer.wte.weight")
grep -qF '{50257, 768}' <<<"$wte" || fail "the checkpoint's wte is not [50257, 768]: $wte"
echo "PASS"
