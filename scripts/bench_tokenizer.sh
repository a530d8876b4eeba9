#!/usr/bin/env bash
# Benchmark of issue 21, reported in docs/benchmarks.md: GPT-2 tokenizing speed in MB/s of text,
# trainctl (`data tokenize --tokenizer`, with 1 thread and with every core) side by side with
# js-tiktoken's "gpt2" encoding on Node.js (tests/integration/tiktoken_oracle.mjs), on the same
# corpora, each one file and one document:
#  - licences: Debian's licence texts concatenated COPIES times (default 128, about 30 MB), the
#    corpus of the goal; its words recur, as a large corpus's do;
#  - random: 300,000 random strings of the test's generator (about 13 MB), where few pieces recur,
#    so that trainctl's cache of merged words helps little.
# trainctl is timed whole (start-up, loading vocab.json and merges.txt, reading, writing the token
# file); js-tiktoken's encode() call alone. REPS rounds (default 3) each run the three in turn; the
# table gives medians, and checks that the three token files are identical.
# Usage: [REPS=3] [COPIES=128] [TRAINCTL=path] scripts/bench_tokenizer.sh [workdir]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench_lib.sh
source tests/integration/tiktoken_npm.sh
install_tiktoken_npm
reps=${REPS:-3}
copies=${COPIES:-128}
oracle=$PWD/tests/integration/tiktoken_oracle.mjs
work=${1:-$(mktemp -d /tmp/trainctl-tokenizer-bench.XXXXXX)}
mkdir -p "$work"
cd "$work"
cores=$(nproc)
mapfile -t licences < <(find /usr/share/common-licenses -maxdepth 1 -type f | sort)
for _ in $(seq "$copies"); do cat "${licences[@]}"; done >licences.txt
node "$oracle" random-text random.txt 300000 21

# seconds COMMAND...: the wall time of COMMAND, its output dropped.
seconds() {
  local start end
  start=$(date +%s%N)
  "$@" >/dev/null
  end=$(date +%s%N)
  awk -v ns=$((end - start)) 'BEGIN { printf "%.3f", ns / 1e9 }'
}

machine_line
: >empty.txt
echo "trainctl's start-up, loading vocab.json and merges.txt (in each of its times):" \
  "$(seconds "$trainctl" data tokenize empty.txt -o empty.bin --tokenizer "$GPT2_TOKENIZER_DIR") s"
echo "js-tiktoken $(node -p 'require(process.argv[1]).version' "$TIKTOKEN_NPM_DIR/node_modules/js-tiktoken/package.json")," \
  "Node $(node --version)"

# compare NAME: the three on NAME.txt, REPS rounds, and their rows.
compare() {
  local name=$1 megabytes tiktoken=() one=() all=()
  megabytes=$(awk -v bytes="$(stat -c %s "$name.txt")" 'BEGIN { printf "%.2f", bytes / 1e6 }')
  for _ in $(seq "$reps"); do
    tiktoken+=("$(node "$oracle" bench "$name.txt" "$name.tiktoken.bin")")
    one+=("$(seconds "$trainctl" data tokenize "$name.txt" -o "$name.one.bin" --tokenizer "$GPT2_TOKENIZER_DIR" --threads 1)")
    all+=("$(seconds "$trainctl" data tokenize "$name.txt" -o "$name.all.bin" --tokenizer "$GPT2_TOKENIZER_DIR" \
      --threads "$cores")")
  done
  cmp -s "$name.tiktoken.bin" "$name.one.bin" && cmp -s "$name.one.bin" "$name.all.bin" ||
    { echo "$name: the token files differ" >&2; exit 1; }
  megabytes_per_second() { awk -v mb="$megabytes" -v s="$(printf '%s\n' "$@" | median)" 'BEGIN { printf "%.1f", mb / s }'; }
  local tiktoken_rate one_rate all_rate
  tiktoken_rate=$(megabytes_per_second "${tiktoken[@]}")
  one_rate=$(megabytes_per_second "${one[@]}")
  all_rate=$(megabytes_per_second "${all[@]}")
  echo "== $name: $megabytes MB, $(( ($(stat -c %s "$name.one.bin") - 1024) / 2 )) tokens, the same from all three"
  printf "%-22s %6s MB/s  (seconds: %s)\n" "js-tiktoken" "$tiktoken_rate" "${tiktoken[*]}"
  printf "%-22s %6s MB/s  (seconds: %s)  %sx js-tiktoken\n" "trainctl, 1 thread" "$one_rate" "${one[*]}" \
    "$(ratio "$one_rate" "$tiktoken_rate")"
  printf "%-22s %6s MB/s  (seconds: %s)  %sx js-tiktoken, %sx 1 thread\n" "trainctl, $cores threads" "$all_rate" \
    "${all[*]}" "$(ratio "$all_rate" "$tiktoken_rate")" "$(ratio "$all_rate" "$one_rate")"
}
compare licences
compare random
