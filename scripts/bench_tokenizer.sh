#!/usr/bin/env bash
# Benchmarks of issues 21 and 41, reported in docs/benchmarks.md: tokenizing speed in MB/s of
# text, trainctl (`data tokenize --tokenizer`, with 1 thread and with every core) side by side
# with JavaScript implementations on Node.js, on the same corpora, each one file and one document:
#  - GPT-2's tokenizer beside js-tiktoken's "gpt2" encoding (tests/integration/tiktoken_oracle.mjs):
#    - licences: Debian's licence texts concatenated COPIES times (default 128, about 30 MB), the
#      corpus of the goal; its words recur, as a large corpus's do;
#    - random: 300,000 random strings of the test's generator (about 13 MB), where few pieces
#      recur, so that trainctl's cache of merged words helps little;
#  - Llama 3's tokenizer.json beside llama3-tokenizer-js and @huggingface/tokenizers
#    (tests/integration/hf_tokenizers_oracle.mjs), on hf-corpus: the documents of
#    tests/integration/hf_tokenizers.sh's generator, MEGABYTES of them (default 30), concatenated.
# trainctl is timed whole (start-up, loading the tokenizer, reading, writing the token file); the
# JavaScript encode() calls alone. REPS rounds (default 3) each run them all in turn; the table
# gives medians, and checks that the GPT-2 token files are identical. The load average before and
# after each part says how much else ran on the machine. PARTS (default "gpt2 llama3") chooses.
# Usage: [REPS=3] [COPIES=128] [MEGABYTES=30] [PARTS="gpt2 llama3"] [TRAINCTL=path] scripts/bench_tokenizer.sh [workdir]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench_lib.sh
source tests/integration/tokenizer_npm.sh
install_tokenizer_npm
reps=${REPS:-3}
copies=${COPIES:-128}
megabytes=${MEGABYTES:-30}
parts=" ${PARTS:-gpt2 llama3} "
oracle=$PWD/tests/integration/tiktoken_oracle.mjs
hf_oracle=$PWD/tests/integration/hf_tokenizers_oracle.mjs
work=${1:-$(mktemp -d /tmp/trainctl-tokenizer-bench.XXXXXX)}
mkdir -p "$work"
cd "$work"
cores=$(nproc)
mapfile -t licences < <(find /usr/share/common-licenses -maxdepth 1 -type f | sort)
for _ in $(seq "$copies"); do cat "${licences[@]}"; done >licences.txt
node "$oracle" random-text random.txt 300000 21
node "$hf_oracle" tokenizers .
node "$hf_oracle" corpus hf-corpus 41 "$megabytes" >/dev/null
find hf-corpus -name '*.txt' | sort | xargs cat >hf-corpus.txt

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
echo "trainctl's start-up, loading Llama 3's tokenizer.json (in each of its times):" \
  "$(seconds "$trainctl" data tokenize empty.txt -o empty.bin --tokenizer llama3.json) s"
version() { node -p 'require(process.argv[1]).version' "$TOKENIZER_NPM_DIR/node_modules/$1/package.json"; }
echo "js-tiktoken $(version js-tiktoken), llama3-tokenizer-js $(version llama3-tokenizer-js)," \
  "@huggingface/tokenizers $(version @huggingface/tokenizers), Node $(node --version)"

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
  megabytes_per_second() { awk -v mb="$megabytes" -v s="$(printf '%s\n' "$@" | median)" 'BEGIN { printf "%.3f", mb / s }'; }
  local tiktoken_rate one_rate all_rate
  tiktoken_rate=$(megabytes_per_second "${tiktoken[@]}")
  one_rate=$(megabytes_per_second "${one[@]}")
  all_rate=$(megabytes_per_second "${all[@]}")
  echo "== $name: $megabytes MB, $(( ($(stat -c %s "$name.one.bin") - 1024) / 2 )) tokens, the same from all three"
  printf "%-22s %8.2f MB/s  (seconds: %s)\n" "js-tiktoken" "$tiktoken_rate" "${tiktoken[*]}"
  printf "%-22s %8.2f MB/s  (seconds: %s)  %sx js-tiktoken\n" "trainctl, 1 thread" "$one_rate" "${one[*]}" \
    "$(ratio "$one_rate" "$tiktoken_rate")"
  printf "%-22s %8.2f MB/s  (seconds: %s)  %sx js-tiktoken, %sx 1 thread\n" "trainctl, $cores threads" "$all_rate" \
    "${all[*]}" "$(ratio "$all_rate" "$tiktoken_rate")" "$(ratio "$all_rate" "$one_rate")"
}
load_average() { echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"; }
if [[ $parts == *" gpt2 "* ]]; then
  load_average
  compare licences
  compare random
  load_average
fi
[[ $parts == *" llama3 "* ]] || exit 0
load_average

# Llama 3's tokenizer on hf-corpus: trainctl with 1 thread and with all, and in the same round
# each JavaScript implementation's encode() of the same text. Beside the wall time, the CPU time
# of the one-thread runs: on a machine that others share it is the steadier figure.
megabytes_of() { awk -v bytes="$(stat -c %s "$1")" 'BEGIN { printf "%.2f", bytes / 1e6 }'; }
hf_megabytes=$(megabytes_of hf-corpus.txt)
llama3_js=() hugging_face=() one=() all=() llama3_js_cpu=() hugging_face_cpu=() one_cpu=()
for _ in $(seq "$reps"); do
  while read -r name time cpu; do
    case $name in
      llama3-tokenizer-js) llama3_js+=("$time") llama3_js_cpu+=("$cpu") ;;
      @huggingface/tokenizers) hugging_face+=("$time") hugging_face_cpu+=("$cpu") ;;
    esac
  done < <(node "$hf_oracle" bench llama3 llama3.json hf-corpus.txt)
  /usr/bin/time -f '%e %U %S' -o one.time "$trainctl" data tokenize hf-corpus.txt -o hf.one.bin --tokenizer llama3.json \
    --threads 1 >/dev/null
  read -r time user system <one.time
  one+=("$time")
  one_cpu+=("$(awk -v u="$user" -v s="$system" 'BEGIN { printf "%.2f", u + s }')")
  all+=("$(seconds "$trainctl" data tokenize hf-corpus.txt -o hf.all.bin --tokenizer llama3.json --threads "$cores")")
done
cmp -s hf.one.bin hf.all.bin || { echo "hf-corpus: 1 and $cores threads wrote different files" >&2; exit 1; }
hf_rate() { awk -v mb="$hf_megabytes" -v s="$(printf '%s\n' "$@" | median)" 'BEGIN { printf "%.3f", mb / s }'; }
llama3_js_rate=$(hf_rate "${llama3_js[@]}")
hugging_face_rate=$(hf_rate "${hugging_face[@]}")
one_rate=$(hf_rate "${one[@]}")
all_rate=$(hf_rate "${all[@]}")
faster_js=$(awk -v a="$llama3_js_rate" -v b="$hugging_face_rate" 'BEGIN { print (a > b ? a : b) }')
llama3_js_cpu_rate=$(hf_rate "${llama3_js_cpu[@]}")
hugging_face_cpu_rate=$(hf_rate "${hugging_face_cpu[@]}")
one_cpu_rate=$(hf_rate "${one_cpu[@]}")
faster_js_cpu=$(awk -v a="$llama3_js_cpu_rate" -v b="$hugging_face_cpu_rate" 'BEGIN { print (a > b ? a : b) }')
echo "== hf-corpus, Llama 3's tokenizer.json: $hf_megabytes MB, $(( ($(stat -c %s hf.one.bin) - 1024) / 4 )) tokens"
printf "%-26s %8.2f MB/s  (seconds: %s)  %8.2f MB/CPU-s  (CPU seconds: %s)\n" "llama3-tokenizer-js" "$llama3_js_rate" \
  "${llama3_js[*]}" "$llama3_js_cpu_rate" "${llama3_js_cpu[*]}"
printf "%-26s %8.2f MB/s  (seconds: %s)  %8.2f MB/CPU-s  (CPU seconds: %s)\n" "@huggingface/tokenizers" \
  "$hugging_face_rate" "${hugging_face[*]}" "$hugging_face_cpu_rate" "${hugging_face_cpu[*]}"
printf "%-26s %8.2f MB/s  (seconds: %s)  %sx the faster JavaScript; %8.2f MB/CPU-s  (CPU seconds: %s)  %sx\n" \
  "trainctl, 1 thread" "$one_rate" "${one[*]}" "$(ratio "$one_rate" "$faster_js")" "$one_cpu_rate" "${one_cpu[*]}" \
  "$(ratio "$one_cpu_rate" "$faster_js_cpu")"
printf "%-26s %8.2f MB/s  (seconds: %s)  %sx the faster JavaScript, %sx 1 thread\n" "trainctl, $cores threads" \
  "$all_rate" "${all[*]}" "$(ratio "$all_rate" "$faster_js")" "$(ratio "$all_rate" "$one_rate")"
load_average
