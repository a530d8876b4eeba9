#!/usr/bin/env bash
# scripts/shell_lint.py: no pipeline in tests/ or scripts/ ends in a reader that may stop before
# its writer has finished (grep -q or head at the end of a pipe), which under pipefail fails a test or not by
# timing. The planted samples are written here, at run time, so that no file of the tree holds
# the pattern; each must be found, and the lookalikes that are fine must not be.
source "$(dirname "$0")/lib.sh"
lint=$TRAINCTL_SOURCE_DIR/scripts/shell_lint.py
bar='|'
mkdir planted fine
printf '%s\n' "set -o pipefail" "trainctl ckpt inspect run $bar grep -q 'world_size 2' || fail" >planted/quiet.sh
printf '%s\n' "x=\$(scontrol show job 5 $bar grep -Fxq JobState=RUNNING)" >planted/bundled.sh
printf '%s\n' "first=\$(grep loss metrics.jsonl $bar  head -n 1)" >planted/head.sh
printf '%s\n' "squeue -h $bar grep --quiet ." >planted/long_option.sh
printf '%s\n' "pgrep -f runtime $bar grep -m1 ." >planted/max_count.sh
printf '%s\n' "grep -q valid out.txt || fail" "grep -q x <<<\"\$out\" ${bar}${bar} true" \
  "sed -n 1p file $bar grep -c step" "echo a $bar grep -v q" >fine/lookalikes.sh

status=0
python3 "$lint" planted >found.txt 2>/dev/null || status=$?
[ "$status" -eq 1 ] || fail "the lint exited $status on the planted samples, not 1"
for sample in quiet.sh:2 bundled.sh:1 head.sh:1 long_option.sh:1 max_count.sh:1; do
  grep -qF "planted/$sample: " found.txt || fail "the lint missed planted/$sample; it found: $(cat found.txt)"
done
[ "$(wc -l <found.txt)" -eq 5 ] || fail "the lint found more than the planted samples: $(cat found.txt)"
python3 "$lint" fine >found.txt || fail "the lint flagged lines that are fine: $(cat found.txt)"

python3 "$lint" "$TRAINCTL_SOURCE_DIR/tests" "$TRAINCTL_SOURCE_DIR/scripts" || fail "the tree has the pattern (above)"
echo "PASS"
