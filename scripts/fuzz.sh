#!/usr/bin/env bash
# Runs the libFuzzer targets (tests/fuzz/) under ASan and UBSan: configures a clang++ build of its own
# once, builds only the targets, runs each for N seconds on a scratch copy of its seed corpus
# (tests/fuzz/corpus/<target>, never grown here), and prints one line per target:
#   fuzz_config: 600 s, 1234567 execs (2057/s), corpus 412 inputs, cov 2345 ft 9876
# Exits 1 on any finding (crash, sanitizer report, leak, timeout, out of memory), naming the
# reproducer it saved; 77 (a skip for meson test) when clang++ or libFuzzer is missing.
# Usage: scripts/fuzz.sh [--seconds N] [--build-dir DIR]      (defaults: 600, build-fuzz)
# Reproduce a finding: DIR/tests/fuzz/fuzz_<target> REPRODUCER
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=600
build_dir=build-fuzz
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --build-dir) build_dir="$2"; shift 2 ;;
    *) echo "usage: $0 [--seconds N] [--build-dir DIR]" >&2; exit 2 ;;
  esac
done
targets=(config checkpoint run_record metrics)

skip() {
  echo "fuzz.sh: SKIP: $1 (Debian: apt-get install clang libclang-rt-14-dev)"
  exit 77
}
command -v clang++ >/dev/null || skip "clang++ is not installed"
probe_dir=$(mktemp -d)
trap 'rm -rf "$probe_dir"' EXIT
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' >"$probe_dir/probe.cpp"
clang++ -fsanitize=fuzzer "$probe_dir/probe.cpp" -o "$probe_dir/probe" 2>/dev/null ||
  skip "clang++ cannot link with libFuzzer (-fsanitize=fuzzer)"

if [ ! -f "$build_dir/build.ninja" ]; then
  # fuzzer-no-link instruments every library for coverage; only the targets link libFuzzer's main.
  # Line tables are all the debug information a report's stack needs (functions, files, lines),
  # and compile in 14% less CPU time than -g (OSS-Fuzz builds the same way); asserts stay on.
  CXX=clang++ meson setup "$build_dir" -Dfuzzing=enabled -Db_sanitize=address,undefined -Db_lundef=false \
    -Dcuda=disabled -Dmpi=disabled -Doptimization=2 -Ddebug=false \
    "-Dcpp_args=-fsanitize=fuzzer-no-link -gline-tables-only" >/dev/null
fi
# ninja reports compile errors on stdout: shown only when the build fails.
build_log=$(ninja -C "$build_dir" -j 2 "${targets[@]/#/tests/fuzz/fuzz_}") || {
  echo "$build_log" >&2
  echo "fuzz.sh: the fuzz targets did not build (above)" >&2
  exit 1
}

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
status=0
for target in "${targets[@]}"; do
  corpus="$build_dir/fuzz-corpus/$target"
  findings="$build_dir/fuzz-findings/$target"
  log="$build_dir/fuzz-logs/$target.log"
  rm -rf "$corpus" "$findings"
  mkdir -p "$corpus" "$findings" "$(dirname "$log")"
  cp tests/fuzz/corpus/"$target"/* "$corpus"/
  # 64 KB inputs reach the config reader's length limits (a 30 KB [job] string once overflowed the stack).
  run_status=0
  "$build_dir/tests/fuzz/fuzz_$target" "$corpus" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 \
    -max_len=65536 -print_final_stats=1 -artifact_prefix="$findings/" >"$log" 2>&1 || run_status=$?
  stats=$(grep -E '^#[0-9]+' "$log" | grep -E 'cov: ' | tail -1 || true)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$stats")
  features=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$stats")
  corpus_size=$(sed -n 's/.* corp: \([0-9]*\)\/.*/\1/p' <<<"$stats")
  echo "fuzz_$target: $seconds s, ${execs:-?} execs (${rate:-?}/s), corpus ${corpus_size:-?} inputs," \
    "cov ${cov:-?} ft ${features:-?}"
  reproducer=$(find "$findings" -type f -print -quit)
  if [ "$run_status" -ne 0 ] || [ -n "$reproducer" ]; then
    status=1
    echo "fuzz_$target: FINDING (exit $run_status); reproducer: ${reproducer:-none saved}; log: $log" >&2
    grep -m 30 -E 'ERROR|SUMMARY|runtime error|escaped|#[0-9]+ 0x' "$log" >&2 || true
  fi
done
exit $status
