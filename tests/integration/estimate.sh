#!/usr/bin/env bash
# trainctl estimate: its memory total within 15% of the peak RSS the kernel measured for a run of
# an MLP and of a GPT-2 on the CPU, each sized so that its own memory (~200 MiB) weighs at least
# as much as the process's base (~30 MiB; ~180 MiB in a build with CUDA); the job.mem warning
# below the estimate only; with train.zero = 1, a rank's share of the optimizer state; the table
# of train.zero 0 to 3 side by side for GPT-2 124M on 8 GPUs, and job.gpu_memory's refusals; with
# --measure, the signal_grace warning when a measured step plus checkpoint write outlasts the
# grace and not otherwise, the temporary run directory removed; Llama 3.2 1B's parameter count
# and memory table; exit 2 for a bad config, a [program] and missing data.
source "$(dirname "$0")/lib.sh"
mkdir -p data tmp
export TMPDIR=$work/tmp  # where --measure makes its temporary run directory
"$TRAINCTL" data synth -o data/wide.h5 --samples 8192 --features 512 --classes 10 --seed 3 >/dev/null
make_token_data

# An MLP whose weights, gradients, AdamW moments and checkpoint staging (7 x 21 MB) and data (17 MB)
# dominate, and a GPT-2 whose activations do (4 blocks of 16 x 256 tokens, 128 wide: ~150 MiB).
mlp_values=(job.ranks_per_node=1 model.inputs=512 'model.hidden=[2048, 2048]' model.classes=10
  data.train='"data/wide.h5"' train.micro_batch=512)
write_config mlp.toml mlp-wide "${mlp_values[@]}" job.signal_grace=120
write_config gpt2.toml gpt2-long job.ranks_per_node=1 model.kind='"gpt2"' model.n_layer=4 model.n_head=4 \
  model.n_embd=128 model.block_size=256 model.vocab_size=256 train.micro_batch=16 train.grad_accum=8 \
  job.signal_grace=1

# estimate_with_rss NAME ARGS...: runs trainctl estimate ARGS; stdout in NAME.out, stderr in
# NAME.err, and the peak RSS of the processes it started, as the kernel measured it, in NAME.rss.
estimate_with_rss() {
  /usr/bin/python3 - "$@" <<'PY'
import os, resource, subprocess, sys
name = sys.argv[1]
with open(f"{name}.out", "w") as out, open(f"{name}.err", "w") as err:
    subprocess.run([os.environ["TRAINCTL"], "estimate", *sys.argv[2:]], stdout=out, stderr=err, check=True)
with open(f"{name}.rss", "w") as rss:
    print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024, file=rss)
PY
}

# within_15_percent NAME: the estimate's total (as configured) against the measured peak RSS.
within_15_percent() {
  local estimated
  estimated=$(sed -n 's/^  total  *\([0-9.]*\).*/\1/p' "$1.out")
  [ -n "$estimated" ] || fail "$1: no total in the estimate: $(cat "$1.out")"
  awk -v name="$1" -v estimated="$estimated" -v measured="$(cat "$1.rss")" 'BEGIN {
    measured /= 1048576; ratio = estimated / measured
    printf "%s: estimated %.1f MiB, measured peak RSS %.1f MiB (%+.1f%%)\n", name, estimated, measured,
      100 * (ratio - 1)
    exit !(ratio > 0.85 && ratio < 1.15) }' || fail "$1: the estimate is not within 15% of the measured peak RSS"
}

# The MLP: 2 steps, a step (~0.3 s) plus a write (~1 s) far inside signal_grace = 120 s: no warning.
estimate_with_rss mlp mlp.toml --measure 2
cat mlp.out
within_15_percent mlp
grep -q "^parameters: 5267466$" mlp.out || fail "MLP: wrong parameter count"
grep -q "^training FLOPs per step: .* per sample x 512 samples per step" mlp.out || fail "MLP: no FLOPs per step"
grep -q "^  suggested job.time: \"[0-9]*:[0-9][0-9]:[0-9][0-9]\"" mlp.out || fail "MLP: no suggested job.time"
grep -q "^  suggested checkpoint.every_steps: " mlp.out || fail "MLP: no suggested checkpoint interval"
! grep -q "warning" mlp.err || fail "MLP: a warning with a comfortable signal_grace: $(cat mlp.err)"

# GPT-2: one step of grad_accum 8 (~6 s here, warm-up included) outlasts the smallest legal
# signal_grace, 1 s, several times over, on any machine this runs on: the warning.
estimate_with_rss gpt2 gpt2.toml --measure 1
cat gpt2.out
within_15_percent gpt2
grep -q "^memory per rank (MiB) *recompute off \* *recompute on$" gpt2.out || fail "GPT-2: no recompute column"
grep -q "^warning: job.signal_grace = 1 s is shorter than one step plus one checkpoint write" gpt2.err ||
  fail "GPT-2: no signal_grace warning: $(cat gpt2.err)"
! compgen -G "tmp/trainctl-estimate.*" >/dev/null || fail "--measure left its run directory behind: $(ls tmp)"

# job.mem, per node, against the estimate times the ranks per node (no --measure needed).
write_config small_mem.toml small-mem "${mlp_values[@]}" job.mem='"100M"'
"$TRAINCTL" estimate small_mem.toml >/dev/null 2>mem.err
line=$(grep -n '^mem = ' small_mem.toml | cut -d: -f1)
warning="^warning: small_mem.toml:$line:7: job.mem: 100M (100.0 MiB) per node cannot hold this run, estimated at"
grep -q "$warning .* of host memory for the 1 rank(s) of a node" mem.err || fail "no job.mem warning: $(cat mem.err)"
write_config enough_mem.toml enough-mem "${mlp_values[@]}" job.mem='"1G"'
"$TRAINCTL" estimate enough_mem.toml >/dev/null 2>mem.err
[ ! -s mem.err ] || fail "a warning with job.mem = 1G: $(cat mem.err)"

# train.zero = 1 on 4 ranks: each holds a quarter of the optimizer state, which its row says,
# within the display's rounding (0.05 MiB a row: 0.2 once multiplied by 4; 0.3 for the totals, four
# rows and the whole state's times 1.875). The total is rank 0's, which holds 3/4 of the state
# less; its checkpoints are sharded, so it stages a quarter of the weights and of the state instead
# of all of both (the weights are 1/2 of the whole state). The totals are compared without their
# process base row, which each estimate measures afresh (a started runtime's resident set differs
# from one start to the next by a few hundred KiB).
for zero in 0 1; do
  write_config zero$zero.toml zero$zero "${mlp_values[@]}" job.ranks_per_node=4 train.zero=$zero
  "$TRAINCTL" estimate zero$zero.toml >zero$zero.out
done
row() { sed -n "s/^  $2  *\([0-9.]*\)$/\1/p" "$1"; }
total_less_base() { awk -v total="$(row "$1" total)" -v base="$(row "$1" "process base")" 'BEGIN { print total - base }'; }
whole=$(row zero0.out "optimizer state (adamw: 2 moments)")
sharded=$(row zero1.out "optimizer state (adamw: 2 moments; ZeRO-1: 1\/4 of 40.2 MiB)")
[ -n "$whole" ] && [ -n "$sharded" ] || fail "no optimizer state row: $(cat zero0.out zero1.out)"
awk -v whole="$whole" -v sharded="$sharded" -v total0="$(total_less_base zero0.out)" -v total1="$(total_less_base zero1.out)" '
  function off(x) { return x < 0 ? -x : x }
  BEGIN {
    printf "optimizer state: %s MiB with zero = 0, %s MiB with zero = 1 on 4 ranks\n", whole, sharded
    exit !(off(whole - 4 * sharded) <= 0.25 && off(total0 - total1 - (0.75 * whole + 0.75 * 1.5 * whole)) <= 0.3) }' ||
  fail "zero = 1: a rank does not hold a quarter of the optimizer state: $(cat zero0.out zero1.out)"

# GPT-2 124M at micro-batch 8 on CUDA (configs/gpt2_124m.toml's model): bf16 stores the
# activations in bf16, and the classifier's gradient over its logits, so their memory is at most
# 0.6 of fp32's (which has the in-place classifier too); bf16 adds the weights' compute copy.
for precision in fp32 bf16; do
  sed -e "s/^micro_batch = .*/micro_batch = 8/" -e "s/^precision = .*//" \
    -e "s/^\[train\]/[train]\nprecision = \"$precision\"/" "$TRAINCTL_SOURCE_DIR/configs/gpt2_124m.toml" \
    >"gpt2_124m_$precision.toml"
  "$TRAINCTL" estimate "gpt2_124m_$precision.toml" --no-preflight >"gpt2_124m_$precision.out"
done
python3 - gpt2_124m_fp32.out gpt2_124m_bf16.out <<'PY' || fail "bf16's activations are not at most 0.6 of fp32's"
import re, sys
def row(file, name):
    for line in open(file):
        match = re.match(rf"  {re.escape(name)} +([0-9.]+)", line)
        if match:
            return float(match.group(1))
    sys.exit(f"{file}: no row {name!r}")
fp32, bf16 = row(sys.argv[1], "activations (f32)"), row(sys.argv[2], "activations (bf16)")
copy = row(sys.argv[2], "weights' bf16 compute copy")
print(f"GPT-2 124M, micro-batch 8: activations {fp32:.1f} MiB in fp32, {bf16:.1f} MiB in bf16 ({bf16 / fp32:.2f}x); "
      f"the bf16 compute copy {copy:.1f} MiB")
sys.exit(0 if bf16 <= 0.6 * fp32 else 1)
PY

# train.zero side by side for the config's 8 ranks: 1 shards the optimizer state, 2 the gradients
# too, 3 the weights too, each an eighth (within the display's rounding, 0.05 MiB), and keeps no
# compute copy; 2 and 3 add the layers' buffers. job.gpu_memory refuses a config at train.zero,
# naming the first stage that fits, or at job.gpu_memory when none does.
python3 - gpt2_124m_bf16.out <<'PY' || fail "the train.zero table is not as sharding has it (above)"
import re, sys
table = {}
for line in open(sys.argv[1]):
    match = re.match(r"  (\S.*?)  +([0-9.]+) +([0-9.]+) +([0-9.]+) +([0-9.]+)$", line)
    if match:
        table[match.group(1)] = [float(x) for x in match.groups()[1:]]
print("by train.zero:", table)
weights, gradients, state = table["weights"], table["gradients"], table["optimizer state"]
eighth = lambda whole, part: abs(whole / 8 - part) <= 0.05
sharded = (weights[:3] == [weights[0]] * 3 and eighth(weights[0], weights[3]) and gradients[:2] == [gradients[0]] * 2
           and all(eighth(gradients[0], g) for g in gradients[2:]) and all(eighth(state[0], s) for s in state[1:])
           and table["weights' bf16 compute copy"][3] == 0 and table["gathered layers"][:3] == [0, 0, 0]
           and table["gathered layers"][3] > 0 and table["layers' gradients"][:2] == [0, 0])
sums = [sum(table[row][zero] for row in table if row != "sum") for zero in range(4)]
sys.exit(0 if sharded and all(abs(a - b) <= 0.5 for a, b in zip(sums, table["sum"])) else 1)
PY
gpu_memory_config() { sed "s/^\[job\]/[job]\ngpu_memory = \"$1\"/" gpt2_124m_bf16.toml >"gpu_$1.toml"; }
gpu_memory_config 4500M
line=$(grep -n '^zero\|^\[train\]' gpu_4500M.toml | cut -d: -f1)
expect_exit 2 "$TRAINCTL" validate gpu_4500M.toml --no-preflight
grep -qE "^trainctl: gpu_4500M.toml:$line:[0-9]+: train.zero: a rank needs [0-9.]+ GiB of device memory with train.zero = 0 on 8 ranks, more than job.gpu_memory = 4500M \(4.4 GiB\) holds; with train.zero = 3 it needs [0-9.]+ GiB" err.txt ||
  fail "job.gpu_memory = 4500M: $(cat err.txt)"
gpu_memory_config 4G
line=$(grep -n '^gpu_memory' gpu_4G.toml | cut -d: -f1)
expect_exit 2 "$TRAINCTL" validate gpu_4G.toml --no-preflight
grep -qE "^trainctl: gpu_4G.toml:$line:[0-9]+: job.gpu_memory: .*, and no train.zero fits \([0-9.]+ GiB with zero = 3\)" err.txt ||
  fail "job.gpu_memory = 4G: $(cat err.txt)"
gpu_memory_config 6G
"$TRAINCTL" validate gpu_6G.toml --no-preflight >/dev/null || fail "job.gpu_memory = 6G refused: $(cat err.txt)"
# configs/llama3_2_1b.toml, Llama 3.2 1B's exact shape (its data absent here: --no-preflight):
# 1,235,814,400 parameters with tied embeddings, and a memory table per rank. What a built Llama
# allocates is held to the footprint at a small shape by tests/test_estimate.cpp.
"$TRAINCTL" estimate --no-preflight "$TRAINCTL_SOURCE_DIR/configs/llama3_2_1b.toml" >llama.out
grep -qx "parameters: 1235814400" llama.out || fail "Llama 3.2 1B: $(grep parameters llama.out)"
grep -q "^memory per rank (MiB) *recompute on \* *recompute off$" llama.out &&
  grep -q "^  total  *[0-9.]*  *[0-9.]*$" llama.out || fail "Llama 3.2 1B: no memory table: $(cat llama.out)"

# Bad input: exit 2 with the config's own message, a [program] and missing data named.
sed 's/^log_every = /log_everyy = /' mlp.toml >typo.toml
line=$(grep -n '^log_everyy' typo.toml | cut -d: -f1)
expect_exit 2 "$TRAINCTL" estimate typo.toml --measure 1
grep -qxF "trainctl: typo.toml:$line:14: train.log_everyy: unknown key (did you mean \"log_every\"?)" err.txt ||
  fail "typo: $(cat err.txt)"
printf '[job]\nname = "own"\n[program]\ncommand = ["python3", "train.py"]\n' >own.toml
expect_exit 2 "$TRAINCTL" estimate own.toml
grep -q "^trainctl: error: own.toml runs your own program (\[program\]): trainctl cannot see its" err.txt ||
  fail "[program]: $(cat err.txt)"
write_config nodata.toml nodata data.train='"data/missing.h5"'
expect_exit 2 "$TRAINCTL" estimate nodata.toml
grep -qxF "trainctl: error: data.train: $PWD/data/missing.h5: No such file or directory" err.txt ||
  fail "missing data: $(cat err.txt)"
echo "PASS"
