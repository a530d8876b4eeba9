#!/usr/bin/env bash
# PyTorch as the oracle of the GPT-2 (gpt2_peer.py, a GPT-2 written there with Hugging Face's
# names): it loads trainctl's step-0 checkpoint and gives trainctl's loss of the first batch to
# 1e-5; trained 20 AdamW steps (two groups, weight decay 0.1) on the same unshuffled batches it
# reaches trainctl's step-20 checkpoint, weights and AdamW state, to 1e-4; and `trainctl
# sample --temperature 0` from that checkpoint (and the step-0 one) is PyTorch's greedy decoding.
# eps = 1e-6: GPT-2's key bias has a gradient that is zero in exact arithmetic (softmax ignores
# a constant added to every score of a row), so both programs feed Adam rounding noise there,
# which eps = 1e-8 would amplify to steps of ~lr/100 that no two implementations share.
source "$(dirname "$0")/lib.sh"
/usr/bin/python3 -c 'import torch, h5py' 2>/dev/null || { echo "SKIP: python3-torch or python3-h5py missing"; exit 77; }
peer() { /usr/bin/python3 "$(dirname "$0")/gpt2_peer.py" "$@"; }
make_token_data
write_config gpt2.toml gpt2 model.kind='"gpt2"' job.ranks_per_node=1 data.shuffle=false train.steps=20 \
  train.log_every=1 train.lr=1e-3 train.weight_decay=0.1 train.eps=1e-6 checkpoint.every_steps=20
TRAINCTL_TEST_SAVE_INITIAL=1 "$TRAINCTL" run gpt2.toml >/dev/null
[ -f "$(checkpoint_of runs/gpt2 0)" ] || fail "TRAINCTL_TEST_SAVE_INITIAL=1 saved no step-0 checkpoint"

# metrics.jsonl's step 1 holds the loss of step 0's batch, taken before its update.
first_loss=$(grep '"step":1,' runs/gpt2/metrics.jsonl | grep '"loss":' | sed -E 's/.*"loss":([-0-9.e+]+).*/\1/')
peer loss "$(checkpoint_of runs/gpt2 0)" --expect "$first_loss"
peer train "$(checkpoint_of runs/gpt2 0)" "$(checkpoint_of runs/gpt2 20)"

# The trained model's and the initial one's (whose argmax wanders over all 256 bytes), past block_size.
for step in 20 0; do
  "$TRAINCTL" sample "$(checkpoint_of runs/gpt2 $step)" --prompt "This License" --tokens 48 --temperature 0 >sample.txt
  peer sample "$(checkpoint_of runs/gpt2 $step)" --prompt "This License" --tokens 48 --trainctl-output sample.txt
done
echo "PASS"
