#!/usr/bin/env bash
# PyTorch as the oracle of the Llama (llama_peer.py: LlamaForCausalLM written there as
# transformers computes it), on the CPU device in fp32, for two models:
#  - gqa: 6 query heads sharing 2 key/value heads of head_dim 32 (n_embd 96, so n_head * head_dim
#    is not n_embd), a SwiGLU MLP of 160, rope_theta 500000 with llama3 rope scaling whose
#    original context of 64 puts the wavelengths of 16 to 64 in its blend (so that all three of
#    its rules turn the heads within block_size 32), untied;
#  - tied: the same with tied embeddings and n_kv_head = n_head.
# Each from a Hugging Face directory that PyTorch wrote (config.json, a model.safetensors of weights
# of normal(0, 0.1), norm weights around 1: attention far from uniform), by train.init_from, which
# checks the config.json against [model] (the llama3 rope scaling among its fields), then 20 AdamW steps
# (weight decay 0.1) on the same unshuffled batches: each step's loss within 1e-5 relative of
# PyTorch's, the step-20 weights and AdamW state within 1e-4 (max |a - b| / max |b| per tensor);
# and `trainctl sample --temperature 0` from steps 20 and 0, 40 tokens past block_size, is
# PyTorch's greedy decoding. `trainctl export` of the gqa run loads into a Llama of its config.json with the
# checkpoint's logits (1e-5), and decodes as trainctl did. A Hugging Face directory whose
# config.json disagrees with [model] is refused naming the field, and one with a tensor of another
# shape naming it and both shapes (hf_directories.sh loads a Llama's 3 bf16 shards and the index). A
# vocabulary of 70000 trains on token ids past 65535 in llm.c's uint32 format.
source "$(dirname "$0")/lib.sh"
/usr/bin/python3 -c 'import torch, h5py' 2>/dev/null || { echo "SKIP: python3-torch or python3-h5py missing"; exit 77; }
peer() { /usr/bin/python3 "$(dirname "$0")/llama_peer.py" "$@"; }
make_token_data
llama=(model.kind='"llama"' model.n_layer=2 model.n_head=6 model.head_dim=32 model.n_embd=96
  model.intermediate_size=160 model.rope_theta=500000.0
  'model.rope_scaling={ rope_type = "llama3", factor = 8.0, low_freq_factor = 1.0, high_freq_factor = 4.0, original_max_position_embeddings = 64 }'
  job.ranks_per_node=1 data.shuffle=false train.steps=20 train.log_every=1 train.lr=1e-3 train.weight_decay=0.1
  checkpoint.every_steps=20)
declare -A variant=([gqa]='model.n_kv_head=2' [tied]='model.n_kv_head=6 model.tie_embeddings=true')
prompt="This License"

for name in gqa tied; do
  read -ra settings <<<"${variant[$name]}"
  write_config "$name-shape.toml" "$name" "${llama[@]}" "${settings[@]}"
done
write_config narrow-shape.toml narrow "${llama[@]}" model.n_kv_head=2 model.intermediate_size=150
peer init --seed 5 gqa-shape.toml hf-gqa tied-shape.toml hf-tied narrow-shape.toml hf-narrow >/dev/null
checks=()
for name in gqa tied; do
  read -ra settings <<<"${variant[$name]}"
  write_config "$name.toml" "$name" "${llama[@]}" "${settings[@]}" train.init_from="\"hf-$name\""
  TRAINCTL_TEST_SAVE_INITIAL=1 "$TRAINCTL" run "$name.toml" >"$name.log" || fail "$name: $(cat "$name.log")"
  # From the trained model, and from the initial one, whose argmax wanders over the bytes.
  for step in 20 0; do
    "$TRAINCTL" sample "$(checkpoint_of "runs/$name" $step)" --prompt "$prompt" --tokens 40 --temperature 0 \
      >"$name-sample-$step.txt"
  done
  # 20 AdamW steps against PyTorch's, and greedy decoding: checked with the rest at the end.
  checks+=(run "runs/$name" --steps 20 --prompt "$prompt" --tokens 40 --sample "20=$name-sample-20.txt"
    "0=$name-sample-0.txt" ::)
done

"$TRAINCTL" export runs/gqa -o exported >/dev/null
checks+=(export exported "$(checkpoint_of runs/gqa 20)" --prompt "$prompt" --tokens 40
  --trainctl-output gqa-sample-20.txt ::)

# Refused with exit 2: config.json against [model], then a tensor's shape (a directory of a
# narrower MLP, its config.json taken away so that the weights are what is checked).
write_config eps.toml eps "${llama[@]}" model.n_kv_head=2 train.steps=1 train.init_from='"hf-gqa"' model.rms_norm_eps=1e-6
expect_exit 2 "$TRAINCTL" run eps.toml
grep -qF "train.init_from: $work/hf-gqa/config.json: rms_norm_eps is 1e-05 but the config's model.rms_norm_eps is 1e-06" err.txt ||
  fail "a disagreeing config.json: $(cat err.txt)"
rm hf-narrow/config.json
write_config narrow.toml narrow "${llama[@]}" model.n_kv_head=2 train.steps=1 train.init_from='"hf-narrow"'
expect_exit 2 "$TRAINCTL" run narrow.toml
grep -qF "model.layers.0.mlp.gate_proj.weight [150, 96] but the config's model needs [160, 96]" err.txt ||
  fail "a tensor of another shape: $(cat err.txt)"

# Token ids past 65535, in llm.c's uint32 Llama 3 format: a vocabulary of 70000 trains on them,
# its first step's loss PyTorch's (which reads the shard with peer_lib.py's reader) to 1e-5.
/usr/bin/python3 - <<'PY'
import numpy as np
header = np.zeros(256, dtype="<i4")
header[:3] = 20240801, 7, 4096
tokens = np.random.default_rng(3).integers(0, 70000, 4096).astype("<u4")
tokens[::7] = 69999
with open("data/wide.bin", "wb") as f:
    f.write(header.tobytes() + tokens.tobytes())
PY
write_config wide.toml wide model.kind='"llama"' job.ranks_per_node=1 model.vocab_size=70000 data.train='"data/wide.bin"' \
  data.shuffle=false train.steps=1 train.log_every=1 checkpoint.every_steps=1
TRAINCTL_TEST_SAVE_INITIAL=1 "$TRAINCTL" run wide.toml >wide.log || fail "uint32 tokens: $(cat wide.log)"
checks+=(loss "$(checkpoint_of runs/wide 0)" --expect
  "$(grep '"step":1,' runs/wide/metrics.jsonl | sed -nE 's/.*"loss":([-0-9.e+]+).*/\1/p')")

# PyTorch's side of every check above, in one process (PyTorch starts in seconds).
peer "${checks[@]}"
echo "PASS"
