# Shared by the CPU benchmarks (sourced from the repository root, not run): the tools they need
# beyond the tests, the trainctl they measure, and readings of its metrics.
# trainctl: $TRAINCTL when set (a build elsewhere), else build/cli/trainctl, built first.
scripts/install-deps.sh --bench
if [ -n "${TRAINCTL:-}" ]; then
  trainctl=$TRAINCTL
else
  scripts/build.sh >/dev/null
  trainctl=$PWD/build/cli/trainctl
fi

# mean_logged_rate RUN KEY: the mean of KEY (samples_per_s, tokens_per_s) over the windows that
# RUN logged in metrics.jsonl, after the first (which includes start-up).
mean_logged_rate() {
  grep "\"$2\"" "$1/metrics.jsonl" | tail -n +2 | sed -E "s/.*\"$2\":([0-9.e+]+).*/\1/" |
    awk '{ s += $1; n++ } END { printf "%.0f", s / n }'
}

# "machine: <CPU model>, <N> cores", for the report.
machine_line() { echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores"; }

# The GPT-2 benchmarks' readings, one file per variant and round in the working directory:
# rate.VARIANT.REP (tokens/s) and rss.VARIANT.REP (peak kB).
# measure THREADS VARIANT REP COMMAND...: runs COMMAND on THREADS threads, keeping its peak RSS.
# OPENBLAS_NUM_THREADS for PyTorch too: its GEMMs go to OpenBLAS, which torch.set_num_threads does not govern.
measure() {
  OPENBLAS_NUM_THREADS=$1 OMP_NUM_THREADS=$1 /usr/bin/time -f %M -o "rss.$2.$3" "${@:4}"
}
median() { sort -g | awk '{ v[NR] = $1 } END { print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
rate() { cat rate."$1".* | median; }
runs() { cat rate."$1".* | awk '{ printf "%s%.0f", (NR > 1 ? ", " : ""), $1 }'; }
peak_mb() { cat rss."$1".* | median | awk '{ printf "%.0f", $1 / 1024 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
