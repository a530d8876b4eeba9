#!/usr/bin/env bash
# What ZeRO-1 saves, measured: a 4-rank run of an MLP of 4.3 M parameters (AdamW: 33 MiB of
# optimizer state) logs its peak RSS (rank 0's, before the final checkpoint's staging) with
# zero = 0 and zero = 1. With zero = 1 it must be lower by at least 80% of what `trainctl estimate`
# says the sharding saves a rank (3/4 of the optimizer state), and so by more than 80% of the
# optimizer state over the world size.
source "$(dirname "$0")/lib.sh"
require_mpi
make_data
for zero in 0 1; do
  write_config "zero$zero.toml" "zero$zero" model.hidden='[2048, 2048]' job.ranks_per_node=4 train.micro_batch=8 \
    train.steps=5 train.log_every=1 checkpoint.every_steps=0 train.zero=$zero
  "$TRAINCTL" run "zero$zero.toml" --ranks 4 >/dev/null
  "$TRAINCTL" estimate "zero$zero.toml" >"estimate$zero.txt"
done
optimizer_row() { sed -n 's/^  optimizer state (adamw[^)]*)  *\([0-9.]*\)$/\1/p' "$1"; }
whole=$(optimizer_row estimate0.txt) sharded=$(optimizer_row estimate1.txt)
measured0=$(last_metric runs/zero0 peak_rss_mb) measured1=$(last_metric runs/zero1 peak_rss_mb)
[ -n "$whole" ] && [ -n "$sharded" ] && [ -n "$measured0" ] && [ -n "$measured1" ] || fail "missing figures"
awk -v whole="$whole" -v sharded="$sharded" -v m0="$measured0" -v m1="$measured1" 'BEGIN {
  estimated = whole - sharded
  printf "peak RSS per rank: %.1f MiB with zero = 0, %.1f MiB with zero = 1 (4 ranks): %.1f MiB less; " \
    "estimated %.1f MiB less (optimizer state %.1f -> %.1f MiB)\n", m0, m1, m0 - m1, estimated, whole, sharded
  exit !(m0 - m1 >= 0.8 * estimated && m0 - m1 >= 0.8 * whole / 4) }' ||
  fail "zero = 1 did not lower the peak RSS by 80% of the estimated saving"
echo "PASS"
