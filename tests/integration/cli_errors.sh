#!/usr/bin/env bash
# The CLI's exit codes and messages for bad input: 2 with file:line:col: key: message for a bad
# config (job.mem below the estimated memory included), 2 for usage errors and inputs that do not
# fit, 1 for a bad checkpoint; hostile config strings never reach a generated script.
source "$(dirname "$0")/lib.sh"
make_data

# expect_error CODE EXPECTED_STDERR_LINE COMMAND...
expect_error() {
  local code=$1 message=$2
  shift 2
  expect_exit "$code" "$@"
  grep -qxF -- "$message" err.txt || fail "$*: expected stderr line '$message', got: $(cat err.txt)"
}

# validates CONFIG [OPTIONS]: trainctl validate succeeds and says CONFIG is valid.
validates() { local said; said=$("$TRAINCTL" validate "$@") && grep -q "$1: valid" <<<"$said"; }

write_config good.toml good
validates good.toml || fail "a good config did not validate"

sed 's/^lr = 1e-2$/lrr = 1e-2/' good.toml >typo.toml
line=$(grep -n '^lrr' typo.toml | cut -d: -f1)
expect_error 2 "trainctl: typo.toml:$line:7: train.lrr: unknown key (did you mean \"lr\"?)" "$TRAINCTL" validate typo.toml
expect_error 2 "trainctl: typo.toml:$line:7: train.lrr: unknown key (did you mean \"lr\"?)" "$TRAINCTL" submit typo.toml
[ ! -e runs/good ] || fail "a rejected submit created a run directory"

# ZeRO's optimizer state is on no rank whole, so its checkpoints must be sharded; zero is 0 to 3;
# reshard_after_forward is ZeRO-3's alone.
write_config unsharded.toml unsharded train.zero=2 checkpoint.sharded=false
line=$(grep -n '^sharded' unsharded.toml | cut -d: -f1)
expect_error 2 "trainctl: unsharded.toml:$line:11: checkpoint.sharded: must be true with train.zero = 2: no rank holds the whole optimizer state" \
  "$TRAINCTL" validate unsharded.toml
write_config zero4.toml zero4 train.zero=4
line=$(grep -n '^zero' zero4.toml | cut -d: -f1)
expect_exit 2 "$TRAINCTL" validate zero4.toml
grep -qF "zero4.toml:$line:8: train.zero: " err.txt || fail "train.zero = 4: $(cat err.txt)"
write_config reshard.toml reshard train.zero=2 train.reshard_after_forward=false
line=$(grep -n '^reshard_after_forward' reshard.toml | cut -d: -f1)
expect_error 2 "trainctl: reshard.toml:$line:25: train.reshard_after_forward: applies to train.zero = 3 only (this config has 2), which gathers each layer's weights before use" \
  "$TRAINCTL" validate reshard.toml

write_config hostile.toml 'x$(touch pwned)'
expect_error 2 "trainctl: hostile.toml:2:8: job.name: may contain only letters, digits, '.', '_' and '-' (got \"x\$(touch pwned)\")" \
  "$TRAINCTL" render hostile.toml
write_config quoted.toml quoted job.env='{ GREETING = "$(touch pwned); `touch pwned`" }'
"$TRAINCTL" render quoted.toml -o quoted.sbatch
grep -qxF "export GREETING='\$(touch pwned); \`touch pwned\`'" quoted.sbatch || fail "the env value is not single-quoted"
bash -n quoted.sbatch
[ ! -e pwned ] || fail "a config string ran a command"

# A [program]'s command: an unknown placeholder is a config error; the command never reaches the
# script (trainctl-launch reads it from the run directory), and a missing workdir fails preflight.
printf '[job]\nname = "own"\n[program]\ncommand = ["python3", "--lr={params.lrr}"]\n[params]\nlr = 1\n' >own.toml
expect_error 2 "trainctl: own.toml:4:23: program.command: element 1 (\"--lr={params.lrr}\"): unknown placeholder {params.lrr} (did you mean {params.lr}?); the placeholders are {run_dir}, {checkpoint_dir}, {params.NAME} for a key NAME of [params] and, in a sweep with [sweep.schedule], {budget.steps}; write {{ and }} for literal braces" \
  "$TRAINCTL" submit own.toml
sed -i 's/params.lrr/params.lr/; s/^command = \["python3",/command = ["python3", "$(touch pwned)",/' own.toml
"$TRAINCTL" render own.toml -o own.sbatch
grep -q "^rank_executable='.*/trainctl-launch'$" own.sbatch || fail "a [program] job does not srun trainctl-launch"
! grep -q "touch pwned" own.sbatch || fail "a [program]'s command reached the batch script"
sed -i 's/^\[program\]$/&\nworkdir = "no-such-dir"/' own.toml
expect_error 2 "trainctl: error: program.workdir: $PWD/no-such-dir is not a directory" "$TRAINCTL" validate own.toml

expect_error 2 "trainctl: error: config missing.toml does not exist" "$TRAINCTL" validate missing.toml
expect_error 2 "trainctl: error: --resume: $PWD/runs/good holds no run to resume" "$TRAINCTL" run good.toml --resume
if "$TRAINCTL" frobnicate 2>/dev/null; then fail "an unknown subcommand succeeded"; fi
"$TRAINCTL" frobnicate 2>/dev/null || [ $? -eq 2 ] || fail "an unknown subcommand did not exit 2"

# Preflight: the data files a config names are checked, headers only, before anything is queued.
write_config nodata.toml nodata data.train='"data/missing.h5"'
for command in validate submit run; do
  expect_error 2 "trainctl: error: data.train: $PWD/data/missing.h5: No such file or directory" "$TRAINCTL" $command nodata.toml
done
[ ! -e runs/nodata ] || fail "a preflight failure created a run directory"
validates nodata.toml --no-preflight || fail "--no-preflight still checked the data"
write_config noval.toml noval data.val='"data"'
expect_error 2 "trainctl: error: data.val: $PWD/data: is a directory, not a data file" "$TRAINCTL" validate noval.toml
write_config wide.toml wide model.inputs=16
expect_error 2 "trainctl: error: data.train: $PWD/data/train.h5 has 32 features per sample but model.inputs = 16" \
  "$TRAINCTL" validate wide.toml
/usr/bin/python3 - <<'PY'
import h5py, numpy, struct
with h5py.File("data/float64.h5", "w") as f:
    f["x"] = numpy.zeros((8, 32), numpy.float64)
    f["y"] = numpy.zeros(8, numpy.int64)
header = [1, 1, 64] + [0] * 253
open("data/bad_magic.bin", "wb").write(struct.pack("<256i", *header) + bytes(128))
PY
write_config double.toml double data.train='"data/float64.h5"'
expect_error 2 "trainctl: error: data.train: cannot read dataset $PWD/data/float64.h5: dataset x is float64, expected float32" \
  "$TRAINCTL" validate double.toml
write_config magic.toml magic model.kind='"gpt2"' data.train='"data/bad_magic.bin"'
expect_error 2 "trainctl: error: data.train: $PWD/data/bad_magic.bin: not a token file: magic number 1, expected 20240520 (GPT-2's uint16 format) or 20240801 (Llama 3's uint32 format)" \
  "$TRAINCTL" validate magic.toml
write_config shards.toml shards model.kind='"gpt2"' data.train='"data/shard_*.bin"'
expect_error 2 "trainctl: error: data.train: no file matches $PWD/data/shard_*.bin" "$TRAINCTL" submit shards.toml
# A sweep's every distinct data file, not only the first task's.
{ cat good.toml; printf '[sweep]\n"data.train" = ["data/train.h5", "data/absent.h5"]\n'; } >sweep.toml
expect_error 2 "trainctl: error: data.train: $PWD/data/absent.h5: No such file or directory" "$TRAINCTL" validate sweep.toml

# Memory that job.mem (per node) cannot hold is refused before it queues, at job.mem, naming the
# model's size: an MLP of 1 Ti parameters (4 TiB in fp32), its data made to fit it.
"$TRAINCTL" data synth -o data/huge_inputs.h5 --samples 4 --features 1048576 --classes 4 --seed 1 >/dev/null
write_config huge.toml huge job.mem='"16G"' model.inputs=1048576 'model.hidden=[1048576]' data.train='"data/huge_inputs.h5"'
line=$(grep -n '^mem = ' huge.toml | cut -d: -f1)
refusal="trainctl: huge.toml:$line:7: job.mem: 16G (16.0 GiB) per node cannot hold this run, estimated at 44.0 TiB of host memory for the 2 rank(s) of a node (the model: 1099516870660 parameters, 4.0 TiB in fp32); raise job.mem (\`trainctl estimate huge.toml\` lists the memory by component)"
for command in validate submit render; do expect_error 2 "$refusal" "$TRAINCTL" $command huge.toml; done
expect_error 2 "$refusal" "$TRAINCTL" validate huge.toml --no-preflight
[ ! -e runs/huge ] || fail "a refused submit created a run directory"
# Without job.mem nothing is refused; a model that fits its job.mem is accepted.
write_config unlimited.toml unlimited model.inputs=1048576 'model.hidden=[1048576]' data.train='"data/huge_inputs.h5"'
validates unlimited.toml || fail "a config without job.mem was refused"
write_config fits.toml fits job.mem='"1G"'
validates fits.toml || fail "a config that fits job.mem was refused"
"$TRAINCTL" render fits.toml >/dev/null
# 4 ranks of a 257 MiB model: with ZeRO-1's sharded optimizer state a node needs about 3.0 GiB,
# with the whole state on every rank 4.9 GiB (0.6 GiB more a node in a build with CUDA), so 4G
# holds the one and not the other.
sharding=(job.ranks_per_node=4 job.mem='"4G"' 'model.hidden=[8192, 8192]')
write_config zero1.toml zero1 "${sharding[@]}" train.zero=1
validates zero1.toml || fail "ZeRO-1 sharding did not make the config fit"
write_config zero0.toml zero0 "${sharding[@]}" train.zero=0
expect_exit 2 "$TRAINCTL" validate zero0.toml
grep -q "^trainctl: zero0.toml:[0-9]*:7: job.mem: 4G (4.0 GiB) per node cannot hold this run, estimated at " err.txt ||
  fail "zero = 0: $(cat err.txt)"
# A sweep's every task: the one that does not fit is named at [sweep].
{ cat fits.toml; printf '[sweep]\n"model.hidden" = [[64], [1048576]]\n'; } >sweep_mem.toml
expect_exit 2 "$TRAINCTL" submit sweep_mem.toml
grep -qF "sweep: task 1 (model.hidden=[1048576]) is not a valid config: job.mem: 1G (1.0 GiB) per node cannot hold this run" \
  err.txt || fail "sweep: $(cat err.txt)"

# The runtime checks the data again, for files that only the compute nodes see.
expect_error 2 "trainctl: error: the runtime rejected its input (see above)" "$TRAINCTL" run wide.toml --no-preflight
grep -qF "data.train: $PWD/data/train.h5 has 32 features per sample but model.inputs = 16" err.txt ||
  fail "the runtime did not say why: $(cat err.txt)"

write_config small.toml small train.steps=2 checkpoint.every_steps=1
"$TRAINCTL" run small.toml >/dev/null
write_config small.toml small model.hidden='[65]' train.steps=3
expect_error 2 "trainctl: error: the runtime rejected its input (see above)" "$TRAINCTL" run small.toml --resume
grep -qF "does not fit the config's model: it has 0.weight [64, 32], the config needs 0.weight [65, 32]" err.txt ||
  fail "no shape-mismatch message: $(cat err.txt)"

printf 'garbage' >"$(checkpoint_of runs/small 2)"
expect_error 1 "trainctl: error: 1 bad checkpoint(s)" "$TRAINCTL" ckpt verify runs/small
echo "PASS"
