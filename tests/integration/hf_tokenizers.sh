#!/usr/bin/env bash
# Hugging Face's tokenizer.json, both BPE families, against independent implementations from npm
# (tokenizer_npm.sh, hf_tokenizers_oracle.mjs), on a corpus of 2 MB or more built here (the
# licence texts and generated documents heavy in what tokenizers get wrong), a document a file:
#  - Llama 3's byte-level BPE, its tokenizer.json written from llama3-tokenizer-js's data,
#    against llama3-tokenizer-js and @huggingface/tokenizers; and with --special, Llama 3's
#    special tokens among text;
#  - Llama 2's SentencePiece-style BPE (Prepend and Replace, byte fallback), its tokenizer.json
#    written from llama-tokenizer-js's data, against llama-tokenizer-js and
#    @huggingface/tokenizers;
# every document's ids equal both oracles' where they agree (where they disagree, reported);
# decoding gives every document back; Llama 3's file is llm.c's uint32 format, Llama 2's uint16.
# Then data tokenize itself: 1, 2 and all threads write the same bytes; --shard-tokens cuts only
# at document starts and the shards hold the whole; the progress line is on a terminal and not
# in a log. And the refusals, exit 2 naming the field or key: text that is not UTF-8 (with its
# offset), a WordPiece model, an unknown pre-tokenizer, a file cut short, a vocabulary larger
# than model.vocab_size, shards in another format than the tokenizer's. Last, a tiny Llama trained
# on Llama 2's tokens records the tokenizer's hash and samples through it. SKIP (77) only when npm
# cannot reach its registry.
source "$(dirname "$0")/lib.sh"
source "$TRAINCTL_SOURCE_DIR/tests/integration/tokenizer_npm.sh"
require_tokenizer_npm
oracle() { node "$TRAINCTL_SOURCE_DIR/tests/integration/hf_tokenizers_oracle.mjs" "$@"; }

oracle tokenizers .
echo "corpus: $(oracle corpus corpus 41)"
echo "corpus: $(oracle special-corpus special 41)"
"$TRAINCTL" data tokenize special/*.txt -o special.bin --tokenizer llama3.json --special >/dev/null
for family in llama3 llama2; do
  "$TRAINCTL" data tokenize corpus/*.txt -o "$family.bin" --tokenizer "$family.json" >/dev/null
  # Llama 3's --special documents in the same node process: loading llama3-tokenizer-js takes seconds.
  special=()
  [ "$family" = llama3 ] && special=(special.json special.bin)
  oracle compare "$family" "$family.json" corpus.json "$family.bin" "${special[@]}" ||
    fail "$family: trainctl's ids are not the oracles' (above)"
  "$TRAINCTL" data decode "$family.bin" --tokenizer "$family.json" >"$family.decoded.txt"
  oracle expected-text "$family" corpus.json "$family.expected.txt"
  cmp -s "$family.decoded.txt" "$family.expected.txt" || fail "$family: decoding the tokens does not give the documents back"
done

# header FILE: magic and version of a token file.
header() { od -An -t d4 -N 8 "$1" | xargs; }
[ "$(header llama3.bin)" = "20240801 7" ] || fail "llama3.bin's header is $(header llama3.bin), not Llama 3's format"
[ "$(header llama2.bin)" = "20240520 1" ] || fail "llama2.bin's header is $(header llama2.bin), not GPT-2's format"

# Threads change nothing, nor do cuts inside a document: on 1, 2 and all threads, the corpus
# against llama3.bin (all threads, each file a chunk), and the corpus as one document in chunks of
# 64 KiB, where the run on all threads is the progress line's on a terminal and the others' go to
# a log.
thread_counts() { printf '%s\n' 1 2 "$(nproc)" | sort -un; }
for threads in $(thread_counts); do
  [ "$threads" = "$(nproc)" ] && continue
  "$TRAINCTL" data tokenize corpus/*.txt -o threads.bin --tokenizer llama3.json --threads "$threads" --chunk-bytes 65536 >/dev/null
  cmp -s threads.bin llama3.bin || fail "the corpus on $threads threads is not what $(nproc) threads wrote"
done
cat corpus/*.txt >whole.txt
# The progress line, with MB/s and the time left, on a terminal (script's); not in a log.
script -qec "'$TRAINCTL' data tokenize whole.txt -o whole.bin --tokenizer llama3.json --chunk-bytes 65536" /dev/null >tty.txt
grep -qE 'tokenized [0-9.]+ / [0-9.]+ MB, [0-9.]+ MB/s, [0-9]+:[0-9]{2}:[0-9]{2} left' tty.txt ||
  fail "no progress line on a terminal: $(cat -v tty.txt)"
for threads in $(thread_counts); do
  [ "$threads" = "$(nproc)" ] && continue
  "$TRAINCTL" data tokenize whole.txt -o threads.bin --tokenizer llama3.json --threads "$threads" --chunk-bytes 65536 >log.txt 2>&1
  ! grep -q "tokenized" log.txt || fail "a progress line in a log: $(cat log.txt)"
  cmp -s threads.bin whole.bin || fail "whole.txt on $threads threads is not what $(nproc) threads wrote"
done

# Shards: each starts with a document's <|begin_of_text|>, each but the last holds at least
# 100000 tokens, and together they are the file written whole.
mkdir shards
"$TRAINCTL" data tokenize corpus/*.txt -o shards/train.bin --tokenizer llama3.json --shard-tokens 100000 >shards.log
[ ! -e shards/train.bin ] || fail "--shard-tokens wrote shards/train.bin itself"
mapfile -t shards < <(find shards -name 'train_*.bin' | sort)
[ "${#shards[@]}" -ge 5 ] || fail "${#shards[@]} shards of about 1 M tokens at 100000 a shard"
grep -qx "wrote shards/train_000000.bin ([0-9]* tokens)" shards.log || fail "the shards printed: $(cat shards.log)"
for shard in "${shards[@]}"; do
  first=$(od -An -t u4 -j 1024 -N 4 "$shard" | xargs)
  [ "$first" = 128000 ] || fail "$shard starts with token $first, not a document's <|begin_of_text|>"
  count=$(od -An -t d4 -j 8 -N 4 "$shard" | xargs)
  [ "$shard" = "${shards[-1]}" ] || [ "$count" -ge 100000 ] || fail "$shard holds $count tokens, fewer than 100000"
done
cmp -s <(for shard in "${shards[@]}"; do tail -c +1025 "$shard"; done) <(tail -c +1025 llama3.bin) ||
  fail "the shards together are not the tokens of the file written whole"
expect_exit 2 "$TRAINCTL" data tokenize corpus/00000.txt -o shards/train.bin --tokenizer llama2.json --shard-tokens 10
grep -qF "shards/train_000000.bin is there, a shard of an earlier run" err.txt || fail "rewriting shards: $(cat err.txt)"

# expect_error EXPECTED_STDERR_LINE COMMAND...: exit 2 with that line.
expect_error() {
  local message=$1
  shift
  expect_exit 2 "$@"
  grep -qxF -- "$message" err.txt || fail "$*: expected stderr line '$message', got: $(cat err.txt)"
}
printf 'fine\n\xffnot UTF-8\n' >latin1.txt
expect_error "trainctl: error: latin1.txt: not UTF-8 at byte offset 5 (byte 0xff)" \
  "$TRAINCTL" data tokenize corpus/00000.txt latin1.txt -o out.bin --tokenizer llama2.json
[ ! -e out.bin ] || fail "a failed tokenize left out.bin"

/usr/bin/python3 - <<'PY'
import json
tokenizer = json.load(open("llama2.json"))
wordpiece = dict(tokenizer, model=dict(tokenizer["model"], type="WordPiece"))
json.dump(wordpiece, open("wordpiece.json", "w"))
whitespace = dict(tokenizer, pre_tokenizer={"type": "Whitespace"})
json.dump(whitespace, open("whitespace.json", "w"))
# For sample below: Llama 2's tokenizer without its last merge.
other = dict(tokenizer, model=dict(tokenizer["model"], merges=tokenizer["model"]["merges"][:-1]))
json.dump(other, open("other.json", "w"))
PY
head -c 100000 llama2.json >truncated.json
expect_error "trainctl: error: wordpiece.json: model.type is \"WordPiece\", not \"BPE\"" \
  "$TRAINCTL" data tokenize corpus/00000.txt -o out.bin --tokenizer wordpiece.json
expect_error "trainctl: error: whitespace.json: pre_tokenizer.type \"Whitespace\" is not supported (trainctl reads ByteLevel, Split, Digits, Metaspace and Sequence)" \
  "$TRAINCTL" data tokenize corpus/00000.txt -o out.bin --tokenizer whitespace.json
expect_exit 2 "$TRAINCTL" data tokenize corpus/00000.txt -o out.bin --tokenizer truncated.json
grep -qF "truncated.json: not JSON: [json.exception.parse_error.101] parse error at line 1, column 100001" err.txt ||
  fail "a truncated tokenizer.json: $(cat err.txt)"

# validate: Llama 3's 128256 tokens do not fit a model of 50257; Llama 2's 32000 do, but are
# written in GPT-2's format, which llama3.bin is not.
mkdir -p data
cp llama3.bin data/text_train.bin
write_config big.toml big model.kind='"gpt2"' model.vocab_size=50257 data.tokenizer='"llama3.json"'
expect_error "trainctl: error: data.tokenizer: $work/llama3.json has 128256 tokens, more than model.vocab_size = 50257" \
  "$TRAINCTL" validate big.toml
write_config format.toml format model.kind='"gpt2"' model.vocab_size=50257 data.tokenizer='"llama2.json"'
expect_error "trainctl: error: data.train: $work/data/text_train.bin is in Llama 3's uint32 format, but the 32000 tokens of data.tokenizer $work/llama2.json are written in GPT-2's uint16 format" \
  "$TRAINCTL" validate format.toml
cp llama2.bin data/text_train.bin
"$TRAINCTL" validate format.toml >/dev/null || fail "validate refuses Llama 2's tokens with Llama 2's tokenizer: $(cat err.txt)"

# A tiny Llama trained on Llama 2's tokens (data/text_train.bin, above) with data.tokenizer
# records the file's content hash, and sample decodes with it: the same file under another name is
# taken, one with a merge less (other.json, above) refused.
write_config llama.toml llama model.kind='"llama"' model.vocab_size=32000 data.tokenizer='"llama2.json"' \
  job.ranks_per_node=1 train.steps=2 checkpoint.every_steps=2 train.log_every=1
"$TRAINCTL" run llama.toml >/dev/null
recorded=$(cut -d' ' -f1 runs/llama/tokenizer.txt)
{ [ "$(cat runs/llama/tokenizer.txt)" = "$recorded $work/llama2.json" ] && [[ $recorded =~ ^crc32:[0-9a-f]{8}$ ]]; } ||
  fail "tokenizer.txt: $(cat runs/llama/tokenizer.txt)"
"$TRAINCTL" sample runs/llama --prompt "This License" --tokens 8 --temperature 0 >sample.txt
[[ "$(cat sample.txt)" == "This License"?* ]] || fail "sample printed $(cat sample.txt)"
cp llama2.json copy.json
"$TRAINCTL" sample runs/llama --prompt "This License" --tokens 8 --temperature 0 --tokenizer copy.json >copy.txt
cmp -s sample.txt copy.txt || fail "--tokenizer with the same content sampled $(cat copy.txt), not $(cat sample.txt)"
expect_exit 2 "$TRAINCTL" sample runs/llama --prompt "This License" --tokenizer other.json
grep -qE "^trainctl: error: --tokenizer other.json: its content hash crc32:[0-9a-f]{8} is not $recorded, " err.txt ||
  fail "sample with another tokenizer: $(cat err.txt)"
echo "PASS"
