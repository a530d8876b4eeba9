#!/usr/bin/env bash
# Hugging Face model directories, both ways, at a tiny GPT-2 (hf_weights.py writes, reads and
# compares them with json, struct and torch):
#  - train.init_from of a download-shaped directory: the Hub's gpt2 config.json for [model], and
#    PyTorch's init in 3 bf16 shards with model.safetensors.index.json, as save_pretrained splits
#    them: step 0 holds the fp32 file's weights rounded to bf16 by torch, bitwise; and the same of
#    a Llama's directory (llama_peer.py's: rope scaling, untied head, 3 bf16 shards);
#  - refused, exit 2, each naming it: a config.json that disagrees with [model] (by validate's
#    preflight, and by the runtime itself), a tensor of the wrong shape (both shapes), a shard
#    that is missing, an index naming a tensor no file has, a tensor the index does not name;
#  - trainctl export with a small --max-shard-size: the shards, their index and config.json as
#    save_pretrained writes them (read back by hf_weights.py), in fp32 bitwise and in bf16 as torch
#    rounds; init_from of the sharded export gives the checkpoint's weights bitwise; without
#    --max-shard-size one model.safetensors;
#  - export is atomic: one killed before it publishes leaves the earlier export there whole, and a
#    directory holding other files is not replaced.
source "$(dirname "$0")/lib.sh"
/usr/bin/python3 -c 'import torch, h5py' 2>/dev/null || { echo "SKIP: python3-torch or python3-h5py missing"; exit 77; }
peer() { /usr/bin/python3 "$TRAINCTL_SOURCE_DIR/tests/integration/gpt2_peer.py" "$@"; }
llama_peer() { /usr/bin/python3 "$TRAINCTL_SOURCE_DIR/tests/integration/llama_peer.py" "$@"; }
hf() { /usr/bin/python3 "$TRAINCTL_SOURCE_DIR/tests/integration/hf_weights.py" "$@"; }
make_token_data
gpt2=(model.kind='"gpt2"' model.block_size=16 job.ranks_per_node=1 data.shuffle=false train.log_every=1
  checkpoint.every_steps=2)

# A download: PyTorch's init in 3 bf16 shards beside the Hub's gpt2 config.json (and a copy with
# one tensor a column short).
write_config shape.toml shape "${gpt2[@]}"
peer init shape.toml hub.safetensors --seed 5 >/dev/null
hf shard hub.safetensors hub narrow:h.1.ln_2.weight --files 3 --dtype bf16 --config shape.toml >/dev/null
[ "$(ls hub | grep -c '^model-0000[123]-of-00003.safetensors$')" = 3 ] || fail "not 3 shards: $(ls hub)"
write_config tune.toml tune "${gpt2[@]}" train.steps=2 train.init_from='"hub"'
"$TRAINCTL" validate tune.toml >/dev/null
TRAINCTL_TEST_SAVE_INITIAL=1 "$TRAINCTL" run tune.toml >tune.log
grep -qF "trainctl: init_from at step 0: $work/hub" tune.log || fail "no init_from event: $(cat tune.log)"
write_config llama.toml llama model.kind='"llama"' model.block_size=16 job.ranks_per_node=1 data.shuffle=false \
  'model.rope_scaling={ rope_type = "llama3", factor = 8.0, low_freq_factor = 1.0, high_freq_factor = 4.0, original_max_position_embeddings = 64 }' \
  train.steps=1 train.init_from='"llama-hub"'
llama_peer init --seed 3 --dtype BF16 --shards 3 llama.toml llama-hub >/dev/null
[ "$(ls llama-hub | grep -c '^model-0000[123]-of-00003.safetensors$')" = 3 ] && [ -f llama-hub/model.safetensors.index.json ] ||
  fail "not 3 shards and the index: $(ls llama-hub)"
TRAINCTL_TEST_SAVE_INITIAL=1 "$TRAINCTL" run llama.toml >/dev/null

# Directories that do not fit: exit 2, naming the key, the tensor, the file.
expect_refused() {
  local name=$1 message=$2
  write_config "$name.toml" "$name" "${gpt2[@]}" train.steps=1 train.init_from="\"$name\""
  expect_exit 2 "$TRAINCTL" run "$name.toml" --no-preflight
  grep -qF "$message" err.txt || fail "$name: expected \"$message\" in: $(cat err.txt)"
}
cp -r hub deeper
sed -i 's/"n_layer": 2/"n_layer": 3/' deeper/config.json
mismatch="train.init_from: $work/deeper/config.json: n_layer is 3 but the config's model.n_layer is 2"
expect_refused deeper "$mismatch"
expect_exit 2 "$TRAINCTL" validate deeper.toml
grep -qF "$mismatch" err.txt || fail "validate did not refuse deeper/config.json: $(cat err.txt)"
expect_refused narrow "train.init_from: $work/narrow holds h.1.ln_2.weight [31] but the config's model needs [32]"
cp -r hub missing
rm missing/model-00002-of-00003.safetensors
expect_refused missing "train.init_from: $work/missing/model.safetensors.index.json places h.0.mlp.c_fc.bias in \
model-00002-of-00003.safetensors, which is missing"
cp -r hub ghost
sed -i 's/"weight_map": {/&\n    "h.0.attn.ghost": "model-00001-of-00003.safetensors",/' ghost/model.safetensors.index.json
expect_refused ghost "train.init_from: $work/ghost/model.safetensors.index.json places h.0.attn.ghost in \
model-00001-of-00003.safetensors, which has no tensor h.0.attn.ghost"
cp -r hub unindexed
sed -i '/"ln_f.bias"/d' unindexed/model.safetensors.index.json
expect_refused unindexed "train.init_from: $work/unindexed/model-00003-of-00003.safetensors holds ln_f.bias, which \
$work/unindexed/model.safetensors.index.json does not name"

# Export in shards of at most 20 kB (wte alone is 32 kB in fp32), fp32 and bf16, and whole.
checkpoint=$(checkpoint_of runs/tune 2)
"$TRAINCTL" export runs/tune -o exported --max-shard-size 20kB >export.log
grep -q "^exported $checkpoint (step 2, model gpt2): 28 tensors, fp32, to exported: model-00001-of-0000[0-9].safetensors, " \
  export.log || fail "export printed: $(cat export.log)"
"$TRAINCTL" export runs/tune -o exported-bf16 --dtype bf16 --max-shard-size 0.02MB >/dev/null
"$TRAINCTL" export runs/tune -o exported-whole >/dev/null
write_config again.toml again "${gpt2[@]}" train.steps=1 train.init_from='"exported"'
TRAINCTL_TEST_SAVE_INITIAL=1 "$TRAINCTL" run again.toml >/dev/null
expect_exit 2 "$TRAINCTL" export runs/tune -o none --max-shard-size 5GiB
grep -qF -- '--max-shard-size: "5GiB" is not a size' err.txt || fail "a bad --max-shard-size: $(cat err.txt)"

# Atomic: an export killed after writing its shards, before it publishes, leaves the earlier
# export whole; a later one replaces an earlier whole; one into a directory of other files is
# refused.
cp -r exported exported-before
expect_exit 137 env TRAINCTL_TEST_KILL_DURING_EXPORT=1 "$TRAINCTL" export runs/again -o exported
diff -r exported exported-before >/dev/null || fail "a killed export changed exported/: $(ls -a exported)"
cp -r exported-bf16 replaced
"$TRAINCTL" export runs/tune -o replaced >/dev/null
mkdir -p mine && echo notes >mine/notes.txt
expect_exit 2 "$TRAINCTL" export runs/tune -o mine
grep -qF "mine holds notes.txt, which export does not write" err.txt || fail "export into mine/: $(cat err.txt)"
[ "$(ls mine)" = notes.txt ] || fail "a refused export changed mine/: $(ls mine)"

hf same-weights "$(checkpoint_of runs/tune 0)=hub.safetensors:bfloat16" "$(checkpoint_of runs/llama 0)=llama-hub" \
  "$(checkpoint_of runs/again 0)=exported"
hf check-export "$checkpoint" exported:fp32:20000 exported-bf16:bf16:20000 exported-whole:fp32:5000000000 \
  replaced:fp32:5000000000
echo "PASS"
