#!/usr/bin/env bash
# The ranks' side of the node check and of hang reports (docs/runtime.md, "The node check", "Hang
# reports"), without SLURM: 2 runtime ranks under mpirun (trainctl run), each told a node of its
# own by a wrapper as SLURM tells a rank (SLURMD_NODENAME n1 and n2), and trainctl-launch started
# with the task variables srun would give it.
# - TRAINCTL_NODE_CHECK_TIMEOUT=30: the check passes and rank 0 logs it with its time, well under
#   5 s, before training; rank.nodes/R names each rank's node.
# - TRAINCTL_TEST_FAIL_NODE_CHECK=n2: every rank exits 76 and bad.nodes blames n2 alone, naming the
#   rank, the device and the check.
# - TRAINCTL_TEST_HANG=1:node-check with a 2 s timeout: rank 0, waiting in the check's first
#   collective, exits 76 after blaming n2, whose rank never reached it.
# - TRAINCTL_TEST_HANG=1:forward@3: on SIGQUIT, rank 0 reports waiting in step 3's first
#   collective (the gradients' reduce-scatter) and rank 1 in step 3's forward pass, each with its
#   stack, and both go on waiting until killed.
# - trainctl-launch: its device check passes and the program runs; on SIGQUIT it reports the
#   program's pid and state and leaves it running; with the test hook naming its node it exits 76,
#   blaming the node, and the program never starts.
source "$(dirname "$0")/lib.sh"
require_mpi
make_data

# A rank as SLURM starts one, on node n<rank + 1>, leaving its pid for the signals below and its
# exit code.
cat >rank.sh <<'SH'
#!/usr/bin/env bash
rank=$OMPI_COMM_WORLD_RANK
SLURMD_NODENAME=n$((rank + 1)) "$TRAINCTL_BUILD_DIR/runtime/trainctl-runtime" "$@" &
echo $! >"pid.$rank"
code=0
wait $! || code=$?
echo "$code" >"exit.$rank"
exit "$code"
SH
chmod +x rank.sh
export TRAINCTL_RUNTIME=$work/rank.sh
# Ranks left waiting by a failed test do not outlive it.
trap 'code=$?; for pid in pid.*; do [ -f "$pid" ] && kill -9 "$(cat "$pid")" 2>/dev/null || true; done; (exit $code); cleanup' EXIT

# wait_for_file FILE...: until each exists.
wait_for_file() {
  local deadline=$((SECONDS + 60)) file
  for file in "$@"; do
    while [ ! -e "$file" ]; do
      [ $SECONDS -lt $deadline ] || fail "$file did not appear in 60 s"
      sleep 0.05
    done
  done
}

# report_until PID REPORT REGEX: sends PID SIGQUIT until REPORT's first line matches REGEX (the
# process may not have reached the state the test waits for at the first signal).
report_until() {
  local pid=$1 report=$2 regex=$3 deadline=$((SECONDS + 60)) first=""
  while [ $SECONDS -lt $deadline ]; do
    kill -QUIT "$pid"
    sleep 0.1
    [ -s "$report" ] && first=$(sed -n 1p "$report")
    [[ $first =~ $regex ]] && return 0
  done
  fail "$report never matched '$regex' (last: '$first')"
}

# has_stack REPORT: "stack:" and a frame after it.
has_stack() {
  [ "$(sed -n 2p "$1")" = "stack:" ] && [ -n "$(sed -n 3p "$1")" ] || fail "$1 has no stack: $(cat "$1")"
}

write_config check.toml check train.steps=4 train.log_every=2 checkpoint.every_steps=100

echo "--- the check passes"
TRAINCTL_NODE_CHECK_TIMEOUT=30 "$TRAINCTL" run check.toml --ranks 2 --run-dir runs/passed >passed.log 2>&1 ||
  fail "the run failed: $(cat passed.log)"
passed=$(sed -n 's/^trainctl-runtime: node check passed in \([0-9.]*\) s (2 ranks on n1,n2; device cpu)$/\1/p' passed.log)
[ -n "$passed" ] || fail "no line saying the check passed: $(cat passed.log)"
awk -v seconds="$passed" 'BEGIN { exit !(seconds < 5) }' || fail "the check took $passed s"
[ "$(cat runs/passed/rank.nodes/0)" = n1 ] && [ "$(cat runs/passed/rank.nodes/1)" = n2 ] ||
  fail "rank.nodes/ does not name each rank's node"
[ ! -e runs/passed/bad.nodes ] || fail "a passed check blamed a node: $(cat runs/passed/bad.nodes)"
echo "passed in $passed s"

echo "--- a failing node"
rm -f exit.* pid.*
TRAINCTL_NODE_CHECK_TIMEOUT=30 TRAINCTL_TEST_FAIL_NODE_CHECK=n2 expect_exit 1 "$TRAINCTL" run check.toml --ranks 2 \
  --run-dir runs/failed
[ "$(cat exit.0)" = 76 ] && [ "$(cat exit.1)" = 76 ] || fail "the ranks exited $(cat exit.0) and $(cat exit.1), not 76"
blamed=$(cat runs/failed/bad.nodes)
[[ $blamed =~ ^n2$'\t'"node check: rank 1 (cpu): GEMM differs from the CPU's (worst element 17: "[-0-9.]+" vs "[-0-9.]+")"$ ]] ||
  fail "bad.nodes does not blame n2 alone for its GEMM: '$blamed'"
grep -qF "trainctl-runtime: node check failed on n2: rank 1 (cpu): GEMM differs" err.txt out.txt ||
  fail "the failing rank did not say why: $(cat err.txt)"
[ ! -s runs/failed/metrics.jsonl ] || fail "the ranks trained after a failed check: $(cat runs/failed/metrics.jsonl)"

echo "--- a rank that never reaches the check's collectives"
rm -f exit.* pid.*
TRAINCTL_NODE_CHECK_TIMEOUT=2 TRAINCTL_TEST_HANG=1:node-check expect_exit 1 "$TRAINCTL" run check.toml --ranks 2 \
  --run-dir runs/late
[ "$(cat exit.0)" = 76 ] || fail "rank 0 exited $(cat exit.0), not 76"
[ "$(cat runs/late/bad.nodes)" = "n2	node check: rank 1 did not reach the agreement on the device checks within 2 s" ] ||
  fail "bad.nodes does not blame n2 for never arriving: $(cat runs/late/bad.nodes)"

echo "--- hang reports"
rm -f exit.* pid.*
write_config hang.toml hang train.steps=20
TRAINCTL_TEST_HANG=1:forward@3 "$TRAINCTL" run hang.toml --ranks 2 --run-dir runs/hang >hang.log 2>&1 &
runner=$!
wait_for_file runs/hang/rank.nodes/0 runs/hang/rank.nodes/1 pid.0 pid.1
report_until "$(cat pid.0)" runs/hang/hang/0 \
  '^rank=0 node=n1 step=3 phase=collective collective=reduce-scatter waited_s=[0-9]+\.[0-9]$'
report_until "$(cat pid.1)" runs/hang/hang/1 '^rank=1 node=n2 step=3 phase=forward collective=- waited_s=-$'
has_stack runs/hang/hang/0
has_stack runs/hang/hang/1
kill -0 "$(cat pid.0)" && kill -0 "$(cat pid.1)" || fail "a rank did not survive its report"
kill -9 "$(cat pid.0)" "$(cat pid.1)"
wait "$runner" || true
sed -s -n 1p runs/hang/hang/0 runs/hang/hang/1

echo "--- trainctl-launch"
mkdir -p runs/program
cat >runs/program/config.toml <<'TOML'
[job]
name = "program"

[program]
command = ["/bin/sh", "-c", 'touch "$TRAINCTL_RUN_DIR/started"; exec sleep 300']
TOML
# As srun starts it: the task variables it reads, and the batch script's.
task=(SLURM_PROCID=0 SLURM_NTASKS=1 SLURM_LOCALID=0 SLURM_NODEID=0 SLURM_TASKS_PER_NODE=1 SLURM_JOB_ID=7
  TRAINCTL_MASTER_ADDR=127.0.0.1 SLURMD_NODENAME=n1 TRAINCTL_NODE_CHECK_TIMEOUT=30)
# env execs it: $! is its pid.
env "${task[@]}" "$TRAINCTL_LAUNCH" --run-dir runs/program >launch.log 2>&1 &
launcher=$!
echo "$launcher" >pid.launch
wait_for_file runs/program/rank.nodes/0 runs/program/started
report_until "$launcher" runs/program/hang/0 '^rank=0 node=n1 phase=program pid=[0-9]+ state=S wchan=[^ ]+$'
has_stack runs/program/hang/0
program=$(sed -n 's/^.* pid=\([0-9]*\) .*$/\1/p' runs/program/hang/0)
kill -0 "$program" || fail "SIGQUIT ended the program"
kill "$program"
code=0
wait "$launcher" || code=$?
[ "$code" = 143 ] || fail "trainctl-launch exited $code after its program was terminated: $(cat launch.log)"
sed -n 1p runs/program/hang/0

rm runs/program/started
expect_exit 76 env "${task[@]}" TRAINCTL_TEST_FAIL_NODE_CHECK=n1 "$TRAINCTL_LAUNCH" --run-dir runs/program
[[ $(cat runs/program/bad.nodes) =~ ^n1$'\t'"node check: rank 0 (cpu): GEMM differs from the CPU's (worst element 17: " ]] ||
  fail "bad.nodes does not blame n1: $(cat runs/program/bad.nodes)"
[[ $(cat runs/program/rank.exits/0) == "exit 76 "* ]] || fail "rank.exits/0 does not record exit 76"
[ ! -e runs/program/started ] || fail "the program ran after a failed node check"
rm pid.*
echo "PASS"
