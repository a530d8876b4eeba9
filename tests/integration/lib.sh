# Shared helpers of the integration tests (sourced, not run). Meson passes TRAINCTL (the CLI)
# and TRAINCTL_SOURCE_DIR; each test works in its own directory under /tmp, visible to the
# local cluster's jobs, which run on this machine.
set -euo pipefail

: "${TRAINCTL:?meson passes the trainctl executable}"
: "${TRAINCTL_SOURCE_DIR:?meson passes the source directory}"
work=$(mktemp -d /tmp/trainctl-test.XXXXXX)
cd "$work"
# A failed test keeps its files, and cancels the jobs it submitted (those whose working directory
# is its own): one left waiting or running would hold the local cluster from the tests after it.
cleanup() {
  local rc=$?
  if [ "$rc" -eq 0 ]; then
    rm -rf "$work"
    return
  fi
  echo "test files kept in $work" >&2
  command -v squeue >/dev/null || return 0
  squeue -h -o '%i %Z' 2>/dev/null | awk -v dir="$work" '$2 == dir { print $1 }' | xargs -r scancel 2>/dev/null || true
}
trap cleanup EXIT

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# The demo-sized synthetic dataset, shared by the configs below: data/train.h5, data/val.h5.
make_data() {
  mkdir -p data
  "$TRAINCTL" data synth -o data/train.h5 --val-out data/val.h5 --samples 8192 --features 32 --classes 4 \
    --seed 11 >/dev/null
}

# Byte tokens of the licence texts every Debian system ships: data/text_train.bin, data/text_val.bin.
make_token_data() {
  mkdir -p data
  local texts
  mapfile -t texts < <(find /usr/share/common-licenses -maxdepth 1 -type f | sort)
  "$TRAINCTL" data tokenize "${texts[@]}" -o data/text_train.bin --val-out data/text_val.bin >/dev/null
}

# write_config FILE NAME KEY=VALUE...: a config with [job] name NAME; each KEY=VALUE (TOML
# syntax, KEY as table.key) overrides the defaults below: an MLP on make_data's files, or, given
# model.kind='"gpt2"' or model.kind='"llama"', a small GPT-2 or Llama (4 query heads sharing 2
# key/value heads) on make_token_data's.
write_config() {
  local file=$1 name=$2
  shift 2
  declare -A values=(
    [job.nodes]=1 [job.ranks_per_node]=2 [job.cpus_per_rank]=1 [job.signal]='"TERM"' [job.signal_grace]=60
    [job.max_requeues]=5
    [train.steps]=40 [train.grad_accum]=1 [train.optimizer]='"adamw"' [train.lr]=1e-2
    [train.seed]=7 [train.log_every]=10
    [checkpoint.every_steps]=10 [checkpoint.keep_last]=3
  )
  if [[ " $* " == *' model.kind="gpt2" '* ]]; then
    values+=([model.n_layer]=2 [model.n_head]=2 [model.n_embd]=32 [model.block_size]=32 [model.vocab_size]=256
      [data.train]='"data/text_train.bin"' [data.shuffle]=true [train.micro_batch]=4 [train.lr]=3e-3)
  elif [[ " $* " == *' model.kind="llama" '* ]]; then
    values+=([model.n_layer]=2 [model.n_head]=4 [model.n_kv_head]=2 [model.n_embd]=32 [model.intermediate_size]=64
      [model.block_size]=32 [model.vocab_size]=256
      [data.train]='"data/text_train.bin"' [data.shuffle]=true [train.micro_batch]=4 [train.lr]=3e-3)
  else
    values+=([model.inputs]=32 [model.hidden]='[64]' [model.classes]=4 [model.activation]='"relu"'
      [data.train]='"data/train.h5"' [data.shuffle]=true [train.micro_batch]=32)
  fi
  local pair
  for pair in "$@"; do values[${pair%%=*}]=${pair#*=}; done
  {
    local table key
    for table in job model data train checkpoint; do
      echo "[$table]"
      [ "$table" = job ] && echo "name = \"$name\""
      for key in "${!values[@]}"; do
        [ "${key%%.*}" = "$table" ] && echo "${key#*.} = ${values[$key]}"
      done
      echo
    done
  } >"$file"
}

# expect_exit CODE COMMAND...: runs COMMAND, which must exit CODE; its stdout is in out.txt and
# its stderr in err.txt.
expect_exit() {
  local code=$1 actual=0
  shift
  "$@" >out.txt 2>err.txt || actual=$?
  [ "$actual" -eq "$code" ] || fail "$* exited $actual, expected $code; stderr: $(cat err.txt)"
}

# checkpoint_of RUN STEP: the checkpoint of that step, a step-N.h5 or a sharded step-N directory.
checkpoint_of() {
  local file
  file="$1/checkpoints/$(printf 'step-%08d' "$2")"
  if [ -d "$file" ]; then echo "$file"; else echo "$file.h5"; fi
}

# stop_and_resume RUN STEP LAST REFERENCE CONFIG [OPTION...]: `trainctl run CONFIG` (with the
# options), whose run directory is RUN, stopped by the test hook's signal after step STEP, then
# resumed: RUN resumes at STEP, and its step-LAST checkpoint is the run REFERENCE's, bitwise.
stop_and_resume() {
  local run=$1 step=$2 last=$3 reference=$4 config=$5 log
  shift 5
  log=$(basename "$run")
  if TRAINCTL_TEST_SIGNAL_AT_STEP=$step "$TRAINCTL" run "$config" "$@" >"$log-stopped.log" 2>&1; then
    fail "$config: no stop at step $step"
  fi
  "$TRAINCTL" run "$config" "$@" --resume >"$log-resumed.log" 2>&1 || fail "$config: the resume failed: $(cat "$log-resumed.log")"
  grep -q "\"step\":$step,\"event\":\"resume\"" "$run/metrics.jsonl" || fail "$run did not resume at step $step"
  "$TRAINCTL" ckpt diff "$(checkpoint_of "$reference" "$last")" "$(checkpoint_of "$run" "$last")" ||
    fail "$run, stopped at step $step and resumed, does not end bitwise as $reference"
}

# png_size FILE: WIDTHxHEIGHT from the PNG's header (its IHDR chunk), or a failure if it is no PNG.
png_size() {
  /usr/bin/python3 - "$1" <<'PY'
import struct, sys
header = open(sys.argv[1], "rb").read(24)
assert header[:8] == b"\x89PNG\r\n\x1a\n" and header[12:16] == b"IHDR", f"{sys.argv[1]} is not a PNG"
print("%dx%d" % struct.unpack(">II", header[16:24]))
PY
}

# The numeric value of a top-level field in the last metrics line that has it (the runtime writes
# "key":value, Python's json.dumps "key": value).
last_metric() { grep "\"$2\": \?[-0-9]" "$1/metrics.jsonl" | tail -n 1 | sed -E "s/.*\"$2\": ?([-0-9.e+]+).*/\1/"; }

# Multi-rank tests need a runtime built with MPI (-Dmpi=disabled builds a single-process one).
require_mpi() {
  [ "${TRAINCTL_HAVE_MPI:-1}" = 1 ] || { echo "SKIP: this build has no MPI"; exit 77; }
}

# --- the local SLURM cluster -------------------------------------------------------------------

# require_cluster NODES [GPUS]: the local cluster in this shape, GPUS fake GPUs per node (default 0,
# none). scripts/cluster.sh restarts it when another test left another shape, GPUs included.
require_cluster() {
  require_mpi
  [ "$(id -u)" -eq 0 ] || { echo "SKIP: the local SLURM cluster needs root"; exit 77; }
  "$TRAINCTL_SOURCE_DIR/scripts/cluster.sh" up --nodes "$1" --gpus "${2:-0}" >/dev/null
}

# job_field JOB FIELD: the first FIELD=value of `scontrol show job`, read to the end (a reader that
# stops early would fail the pipeline under pipefail, depending on timing).
job_field() { scontrol show job -o "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p" | sed -n 1p; }

# wait_for_job JOB TIMEOUT STATE...: waits until the job is in one of STATE. A requeued job
# waits ~10 s (AuthInfo=cred_expire in scripts/cluster.sh) before it runs again; releasing it
# sooner makes its launch fail, so the tests let the hold run out.
wait_for_job() {
  local job=$1 timeout=$2
  shift 2
  local deadline=$((SECONDS + timeout)) state
  while [ $SECONDS -lt $deadline ]; do
    state=$(job_field "$job" JobState)
    for wanted in "$@"; do [ "$state" = "$wanted" ] && return 0; done
    sleep 0.5
  done
  scontrol show job "$job" >&2 || true
  fail "job $job not in state $* after ${timeout}s (last: $state)"
}

# Waits until the run has logged at least STEP.
wait_for_step() {
  local run=$1 step=$2 timeout=$3 last
  local deadline=$((SECONDS + timeout))
  while [ $SECONDS -lt $deadline ]; do
    last=$(last_metric "$run" step 2>/dev/null || true)
    [ -n "$last" ] && [ "${last%.*}" -ge "$step" ] && return 0
    sleep 0.2
  done
  fail "$run did not reach step $step in ${timeout}s"
}

# wait_for_event RUN EVENT COUNT TIMEOUT: waits until the run has logged EVENT COUNT times.
wait_for_event() {
  local deadline=$((SECONDS + $4))
  until [ "$(grep -c "\"event\":\"$2\"" "$1/metrics.jsonl" 2>/dev/null)" -ge "$3" ]; do
    [ $SECONDS -lt $deadline ] || fail "$1 did not log event $2 $3 times in $4 s"
    sleep 0.2
  done
}

# wait_for_file PATH TIMEOUT
wait_for_file() {
  local deadline=$((SECONDS + $2))
  until [ -e "$1" ]; do
    [ $SECONDS -lt $deadline ] || fail "$1 did not appear in $2 s"
    sleep 0.2
  done
}

# wait_for_test_jobs TIMEOUT: waits until no job submitted from this test's directory is queued or
# running: a scheduled sweep's running tasks submit arrays of their own.
wait_for_test_jobs() {
  local deadline=$((SECONDS + $1)) queued
  while :; do
    queued=$(squeue -h -o '%Z' 2>/dev/null) || queued=$work  # no answer: not yet known to be done
    grep -qxF "$work" <<<"$queued" || return 0
    [ $SECONDS -lt $deadline ] || { squeue >&2; fail "jobs of this test still queued after $1 s"; }
    sleep 1
  done
}

submit() {
  local output
  output=$("$TRAINCTL" submit "$@") || fail "submit $*: $output"
  echo "$output" | sed -n 's/^submitted job //p'
}

# wait_until_paused RUN ENTRY TIMEOUT: waits until rank 0 of RUN is held at ENTRY of
# TRAINCTL_TEST_PAUSE_IN (startup, step@N, eval@N, save@N; docs/runtime.md), where it stays until
# a stop signal: an outside event the test causes then lands there, however fast the machine.
wait_until_paused() { wait_for_file "$1/test-paused.$2" "$3"; }

# expect_one_signal_requeue JOB RUN: one requeue of the job came of the stop signal. On a loaded
# machine a rank may also die at start-up (Open MPI's TCP connect under load has crashed one, in
# the start after a requeue too): the batch script requeues that as an infrastructure fault,
# which job.outcome records; the test stands as long as every restart is accounted for there and
# only one is the signal's.
expect_one_signal_requeue() {
  local job=$1 run=$2 restarts saves
  restarts=$(job_field "$job" Restarts)
  saves=$(grep -c '^requeued: saved at step' "$run/job.outcome" || true)
  [ "$saves" = 1 ] || fail "expected one requeue after the stop signal, got $saves: $(cat "$run/job.outcome")"
  [ "$(grep -c '^requeued: ' "$run/job.outcome")" = "$restarts" ] ||
    fail "job $job restarted $restarts times, but job.outcome accounts for other requeues: $(cat "$run/job.outcome")"
  [ "$restarts" = 1 ] || echo "note: job $job was requeued $((restarts - 1)) more time(s), for: $(sed -n '/^requeued: saved/!s/^requeued: //p' "$run/job.outcome" | paste -sd ';')" >&2
}

# preempt_mid_run CONFIG RUN STEPS [PAUSE]: submits CONFIG, holds rank 0 at the start of step
# PAUSE (60; the test hook) and signals the job there (scancel -s TERM); waits for it to complete
# after exactly one requeue; prints the step it stopped and resumed at, which must be mid-run:
# past PAUSE, before STEPS.
preempt_mid_run() {
  local config=$1 run=$2 steps=$3 pause=${4:-60} job stop_step
  job=$(TRAINCTL_TEST_PAUSE_IN=step@$pause submit "$config")
  wait_until_paused "$run" "step@$pause" 120
  scancel -s TERM "$job"
  wait_for_job "$job" 240 COMPLETED FAILED CANCELLED
  [ "$(job_field "$job" JobState)" = COMPLETED ] || { cat "$run"/logs/* >&2; fail "job $job did not complete"; }
  expect_one_signal_requeue "$job" "$run"
  stop_step=$(sed -nE 's/.*"step":([0-9]+),"event":"stop".*/\1/p' "$run/metrics.jsonl")
  [ "$stop_step" -gt "$pause" ] && [ "$stop_step" -lt "$steps" ] || fail "stopped at step '$stop_step', not mid-run"
  grep -q "\"step\":$stop_step,\"event\":\"resume\"" "$run/metrics.jsonl" || fail "no resume at $stop_step"
  echo "$stop_step"
}

# track_most_running JOB FILE &: samples the job array JOB until it has left the queue's active
# states, keeping in FILE the most tasks seen running at once.
track_most_running() {
  trap - EXIT  # the test's cleanup belongs to the test, not to this sampler
  local most=0 running
  while [ -n "$(squeue -h -j "$1" -t PENDING,RUNNING,CONFIGURING,COMPLETING,REQUEUED -o %i 2>/dev/null)" ]; do
    running=$(squeue -h -r -j "$1" -t RUNNING -o %i | wc -l)
    if [ "$running" -gt "$most" ]; then
      most=$running
      echo "$most" >"$2"
    fi
    sleep 0.2
  done
}

# --- a user's own program (docs/programs.md) ----------------------------------------------------

require_torch() {
  /usr/bin/python3 -c 'import torch' 2>/dev/null || { echo "SKIP: python3-torch is missing"; exit 77; }
}

# write_program_config FILE NAME KEY=VALUE...: a [program] config that runs configs/program_demo.py
# (PyTorch DDP over gloo, on Debian's python3) with its values in [params]; each KEY=VALUE (TOML
# syntax, KEY as job.key or params.key) overrides the defaults below.
write_program_config() {
  local file=$1 name=$2
  shift 2
  declare -A values=(
    [job.nodes]=1 [job.ranks_per_node]=2 [job.cpus_per_rank]=1 [job.signal]='"TERM"' [job.signal_grace]=60
    [job.max_requeues]=3
    [params.steps]=60 [params.lr]=0.05 [params.seed]=0 [params.save_every]=20 [params.eval_every]=0
    [params.step_sleep]=0 [params.tag]='""'
  )
  local pair
  for pair in "$@"; do values[${pair%%=*}]=${pair#*=}; done
  {
    echo "[job]"
    echo "name = \"$name\""
    local key
    for key in "${!values[@]}"; do [ "${key%%.*}" = job ] && echo "${key#*.} = ${values[$key]}"; done
    cat <<TOML

[program]
workdir = "$TRAINCTL_SOURCE_DIR/configs"
command = ["/usr/bin/python3", "program_demo.py", "--steps", "{params.steps}", "--lr", "{params.lr}",
           "--seed", "{params.seed}", "--save-every", "{params.save_every}", "--eval-every", "{params.eval_every}",
           "--step-sleep", "{params.step_sleep}", "--tag", "{params.tag}"]

[params]
TOML
    for key in "${!values[@]}"; do [ "${key%%.*}" = params ] && echo "${key#*.} = ${values[$key]}"; done
  } >"$file"
}

# same_weights A B: the final.pt files of run directories A and B hold bitwise equal tensors.
same_weights() {
  /usr/bin/python3 - "$1/final.pt" "$2/final.pt" <<'PY'
import sys, torch
a, b = (torch.load(path) for path in sys.argv[1:])
assert a.keys() == b.keys(), (a.keys(), b.keys())
unequal = [name for name in a if not torch.equal(a[name], b[name])]
assert not unequal, f"tensors differ: {unequal}"
print(f"final weights bitwise equal ({len(a)} tensors)")
PY
}

# write_early_stop_config FILE NAME [table.key=value ...]: an MLP that overfits 256 training
# samples (data/small.h5, data/small_val.h5, made here), evaluated every 5 steps with early
# stopping (patience 3) and keep_best. Its validation loss falls until step 40 and rises from
# step 45, so it stops early at step 55.
write_early_stop_config() {
  local file=$1 name=$2
  shift 2
  mkdir -p data
  [ -e data/small.h5 ] || "$TRAINCTL" data synth -o data/small.h5 --val-out data/small_val.h5 --samples 256 \
    --val-samples 512 --features 32 --classes 4 --seed 5 >/dev/null
  write_config "$file" "$name" train.steps=400 train.lr=1e-3 model.hidden='[128, 128]' data.train='"data/small.h5"' \
    data.val='"data/small_val.h5"' train.eval_every=5 'train.early_stop={ patience = 3, min_delta = 0.001 }' \
    checkpoint.every_steps=50 checkpoint.keep_last=1 checkpoint.keep_best=true "$@"
}
