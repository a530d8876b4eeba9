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
