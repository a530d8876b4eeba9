#!/usr/bin/env bash
# Sweep benchmark, reported in docs/benchmarks.md: trainctl's own work on a 1,000-task sweep,
# which must take under 1 s of wall time per command:
#  1. `trainctl render` of a 1,000-task sweep: expansion, per-value and per-task validation,
#     1,000 resolved task configs and the array script (stdout and stderr to /dev/null);
#  2. `trainctl submit` of it to a fresh directory each repetition: the same, plus 1,000 task
#     run directories, the manifest, the array script, one syncfs and the sbatch call;
#  3. `trainctl sweep status` (table and --json) over 1,000 completed tasks, each with a
#     metrics.jsonl of 1,000 steps as the runtime writes it (a train line every 10 steps, an
#     eval and a checkpoint every 100) and the files the batch script writes (job_id,
#     requeue.count, job.outcome).
#  4. for information, not held to the limit: submit into the directory of a sweep deleted
#     just before, REPS times in a row (the filesystem, not trainctl; see the end).
# Each for a 10 x 10 x 10 grid (train.lr x train.weight_decay x model.hidden) and, for render
# and submit, for random search (samples = 1000 with log_uniform and choice).
# SLURM is not needed: stub `sbatch`, `scontrol` and `squeue` come first on PATH and answer
# instantly (sbatch prints an increasing job id, scontrol show config says MaxArraySize = 1001,
# squeue prints the array's 1,000 tasks COMPLETED in the real padded -O format), so only
# trainctl's own work is timed, never SLURM's or training's.
# Side by side: a straightforward Python 3 peer (tomllib + itertools.product, writing the same
# files; json.loads over the same metrics files), run the same way; the ratio is trainctl/peer.
# Wall time per command, median and min of REPS runs (default 7) after one unrecorded warm-up;
# the page cache is warm. `sync` runs before every repetition, outside the timing, so that a
# submit's syncfs flushes only its own writes.
# Exits 1 when any trainctl median is 1.0 s or more.
# Usage: [REPS=7] [PYTHON=/usr/bin/python3] scripts/bench_sweep.sh [new or empty workdir]
#        (builds first; the peer needs Python >= 3.11, for tomllib. The default is the system's
#        python3 itself: a pyenv shim in front of it adds ~0.1 s to every start.)
set -euo pipefail
export LC_ALL=C  # a '.' in $EPOCHREALTIME and in printf's numbers
cd "$(dirname "$0")/.."
scripts/build.sh >/dev/null
trainctl=$PWD/build/cli/trainctl
reps=${REPS:-7}
python=${PYTHON:-/usr/bin/python3}
limit=1.0
work=${1:-$(mktemp -d /tmp/trainctl-sweep-bench.XXXXXX)}
mkdir -p "$work"
work=$(cd "$work" && pwd)
# An empty one: deleting a previous run's thousands of files here would slow the next creations
# (see the last measurement below).
[[ -z $(ls -A "$work") ]] || { echo "$work is not empty; give a new or empty workdir" >&2; exit 2; }
cd "$work"

# ---- SLURM stubs -------------------------------------------------------------------------
mkdir -p bin
echo 1000 >bin/next_job_id
cat >bin/sbatch <<SH
#!/bin/sh
# sbatch stub: \`sbatch --parsable ...\` prints the job id; this one counts up from 1000.
read -r id <"$work/bin/next_job_id"
echo \$((id + 1)) >"$work/bin/next_job_id"
echo "\$id"
SH
cat >bin/scontrol <<'SH'
#!/bin/sh
# scontrol stub: answers `scontrol show config` with the line trainctl reads, as the real one prints it.
if [ "$1" = show ] && [ "$2" = config ]; then
  printf 'Configuration data as of 2026-11-22T00:00:00\nClusterName             = bench\nMaxArraySize            = 1001\nMaxJobCount             = 10000\n'
  exit 0
fi
echo "scontrol stub: only 'show config' is answered" >&2
exit 1
SH
# squeue stub: prints the lines prepared in bin/squeue.<job id> for each id of -j ID,ID,...
cat >bin/squeue <<SH
#!/bin/sh
ids=
while [ \$# -gt 0 ]; do
  [ "\$1" = -j ] && ids=\$2
  shift
done
IFS=,
for id in \$ids; do
  [ -f "$work/bin/squeue.\$id" ] && cat "$work/bin/squeue.\$id"
done
exit 0
SH
chmod +x bin/sbatch bin/scontrol bin/squeue
export PATH="$work/bin:$PATH"

# ---- the sweeps --------------------------------------------------------------------------
# base NAME: the demo job (configs/mlp_demo.toml) at 1,000 steps, logging every 10. The data
# files are read by the runtime only, so they need not exist here.
base() {
  cat <<TOML
[job]
name = "$1"
nodes = 1
ranks_per_node = 2
cpus_per_rank = 1
time = "00:10:00"
signal = "TERM"
signal_grace = 60
max_requeues = 5

[model]
kind = "mlp"
inputs = 32
hidden = [128, 128]
classes = 4
activation = "gelu"

[data]
train = "data/train.h5"
val = "data/val.h5"
shuffle = true

[train]
steps = 1000
micro_batch = 64
grad_accum = 2
optimizer = "adamw"
lr = 3e-3
weight_decay = 0.01
betas = [0.9, 0.999]
warmup_steps = 50
schedule = "cosine"
grad_clip = 1.0
seed = 1234
eval_every = 100
log_every = 10
device = "cpu"

[checkpoint]
every_steps = 100
every_minutes = 5
keep_last = 3

TOML
}
hidden_values='[[64], [128], [256], [64, 64], [128, 128], [256, 256], [64, 64, 64], [128, 128, 128], [256, 128], [512, 256]]'
{
  base sweep-grid
  cat <<TOML
[sweep]
"train.lr" = [1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 3e-3, 5e-3, 1e-2, 2e-2, 5e-2]
"train.weight_decay" = [0.0, 1e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 0.1, 0.3]
"model.hidden" = $hidden_values
max_parallel = 50
TOML
} >grid.toml
{
  base sweep-random
  cat <<TOML
[sweep]
"train.lr" = { log_uniform = [1e-5, 1e-1] }
"train.weight_decay" = { log_uniform = [1e-6, 0.3] }
"model.hidden" = { choice = $hidden_values }
samples = 1000
seed = 7
max_parallel = 50
TOML
} >random.toml

# ---- the Python peer ---------------------------------------------------------------------
cat >peer.py <<'PY'
"""The straightforward Python way of trainctl's sweep work, for scale (no per-task validation).
peer.py render CONFIG | submit CONFIG DIR | status DIR [--json]"""
import copy, itertools, json, math, os, random, subprocess, sys, tomllib

def toml_value(v):
    if isinstance(v, bool): return "true" if v else "false"
    if isinstance(v, str): return json.dumps(v)
    if isinstance(v, list): return "[" + ", ".join(map(toml_value, v)) + "]"
    return repr(v)

def dump(config):
    return "".join(f"[{name}]\n" + "".join(f"{k} = {toml_value(v)}\n" for k, v in table.items()) + "\n"
                   for name, table in config.items())

def expand(path):
    with open(path, "rb") as f: base = tomllib.load(f)
    for key in ("train", "val"):
        base["data"][key] = os.path.abspath(os.path.join(os.path.dirname(path), base["data"][key]))
    sweep = base.pop("sweep")
    settings = {k: sweep.pop(k) for k in ("samples", "seed", "max_parallel") if k in sweep}
    grid = {k: v for k, v in sweep.items() if isinstance(v, list)}
    rng = random.Random(settings.get("seed", 0))
    def draw(spec):
        (kind, arg), = spec.items()
        if kind == "choice": return rng.choice(arg)
        if kind == "log_uniform": return math.exp(rng.uniform(math.log(arg[0]), math.log(arg[1])))
        return rng.uniform(*arg)
    draws = [{k: draw(v) for k, v in sweep.items() if k not in grid} for _ in range(settings.get("samples", 1))]
    tasks = [{**dict(zip(grid, point)), **d} for point in itertools.product(*grid.values()) for d in draws]
    configs = []
    for i, params in enumerate(tasks):
        config = copy.deepcopy(base)
        for key, value in params.items():
            table, name = key.split(".")
            config[table][name] = value
        configs.append(f"# task {i}: {params}\n" + dump(config))
    return base, settings, tasks, configs

def script(job, directory, count, max_parallel):
    array = f"0-{count - 1}" + (f"%{max_parallel}" if max_parallel else "")
    return (f"#!/bin/bash\n#SBATCH --job-name={job['name']}\n#SBATCH --nodes={job['nodes']}\n"
            f"#SBATCH --ntasks-per-node={job['ranks_per_node']}\n#SBATCH --time={job['time']}\n"
            f"#SBATCH --array={array}\n#SBATCH --output={directory}/logs/array-%A_%a.out\n"
            f"export RUN_DIR={directory}/tasks/$SLURM_ARRAY_TASK_ID\nsrun trainctl-runtime --run-dir $RUN_DIR\n")

def max_array_size():
    out = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True, check=True).stdout
    return int(next(line.split("=")[1] for line in out.splitlines() if line.startswith("MaxArraySize")))

def render(path):
    base, settings, tasks, configs = expand(path)
    assert len(tasks) <= max_array_size()
    for i, params in enumerate(tasks): print(f"task {i}: {params}", file=sys.stderr)
    print(script(base["job"], os.path.abspath("runs/" + base["job"]["name"]), len(tasks), settings.get("max_parallel")))

def submit(path, directory):
    base, settings, tasks, configs = expand(path)
    assert len(tasks) <= max_array_size()
    directory = os.path.abspath(directory)
    for i, text in enumerate(configs):
        task = f"{directory}/tasks/{i}"
        os.makedirs(task + "/logs"); os.makedirs(task + "/checkpoints")
        with open(task + "/config.toml", "w") as f: f.write(text)
        open(task + "/metrics.jsonl", "a").close()
    os.makedirs(directory + "/logs")
    with open(directory + "/array.sbatch", "w") as f:
        f.write(script(base["job"], directory, len(tasks), settings.get("max_parallel")))
    os.sync()
    job = subprocess.run(["sbatch", "--parsable", directory + "/array.sbatch"], capture_output=True, text=True,
                         check=True).stdout.split(";")[0].strip()
    manifest = {"name": base["job"]["name"], "arrays": [{"job_id": job, "tasks": list(range(len(tasks)))}],
                "tasks": [{"index": i, "params": params} for i, params in enumerate(tasks)]}
    with open(directory + "/manifest.json", "w") as f:
        json.dump(manifest, f); f.flush(); os.fsync(f.fileno())
    print(f"submitted sweep of {len(tasks)} tasks as job {job}")

def first_line(path):
    try:
        with open(path) as f: return f.readline().strip()
    except FileNotFoundError: return ""

def status(directory, as_json):
    with open(directory + "/manifest.toml", "rb") as f: manifest = tomllib.load(f)
    jobs = {a["job_id"]: a["tasks"] for a in manifest["arrays"]}
    out = subprocess.run(["squeue", "-h", "-r", "-t", "all", "-j", ",".join(jobs), "-O",
                          "JobArrayID:40|,State:24|,RestartCnt:8|,Reason:80"], capture_output=True, text=True).stdout
    slurm = {}
    for line in out.splitlines():
        array_id, state, restarts, reason = (field.strip() for field in line.split("|"))
        job, index = array_id.split("_")
        slurm[jobs[job][int(index)]] = (state, int(restarts), reason)
    rows = []
    for task in manifest["tasks"]:
        i = task["index"]; run = f"{directory}/tasks/{i}"
        row = {"task": i, "params": task["params"], "outcome": first_line(run + "/job.outcome"),
               "job_id": first_line(run + "/job_id"), "step": None, "loss": None, "best_val_loss": None}
        with open(run + "/metrics.jsonl") as f:
            for line in f:
                record = json.loads(line)
                if "loss" in record: row["step"], row["loss"] = record["step"], record["loss"]
                if "val_loss" in record and (row["best_val_loss"] is None or record["val_loss"] < row["best_val_loss"]):
                    row["best_val_loss"] = record["val_loss"]
        state, restarts, reason = slurm.get(i, ("", 0, ""))
        row["state"] = "COMPLETED" if row["outcome"] == "completed" else state
        row["restarts"] = restarts
        rows.append(row)
    rows.sort(key=lambda r: (r["best_val_loss"] is None, r["best_val_loss"] or 0.0, r["task"]))
    if as_json:
        print(json.dumps(rows))
        return
    for r in rows:
        print(r["task"], *(r["params"][p] for p in manifest["parameters"]), r["state"], r["restarts"], r["step"], f"{r['loss']:.4f}",
              f"{r['best_val_loss']:.4f}", r["outcome"], sep="  ")

if __name__ == "__main__":
    command, args = sys.argv[1], sys.argv[2:]
    if command == "render": render(args[0])
    elif command == "submit": submit(args[0], args[1])
    else: status(args[0], "--json" in args)
PY

# ---- timing ------------------------------------------------------------------------------
# run_reps NAME COMMAND...: one warm-up run, then $reps timed ones, each after `eval "$before"`
# when set and `sync`, both untimed; "{rep}" in an argument becomes the repetition's number.
# stdout and stderr go to NAME.out and NAME.err (overwritten each run); the times to
# NAME.times, one per line, in seconds.
run_reps() {
  local name=$1 rep start end
  shift
  : >"$name.times"
  for ((rep = 0; rep <= reps; rep++)); do
    local argv=("${@//\{rep\}/$rep}")
    [[ -z ${before:-} ]] || eval "$before"
    sync
    start=$EPOCHREALTIME
    "${argv[@]}" >"$name.out" 2>"$name.err"
    end=$EPOCHREALTIME
    ((rep == 0)) || awk -v a="$start" -v b="$end" 'BEGIN { printf "%.6f\n", b - a }' >>"$name.times"
  done
}
median() { sort -g "$1.times" | awk '{ t[NR] = $1 } END { print (NR % 2) ? t[(NR + 1) / 2] : (t[NR / 2] + t[NR / 2 + 1]) / 2 }'; }
minimum() { sort -g "$1.times" | sed -n 1p; }

for sweep in grid random; do
  run_reps "render-$sweep" "$trainctl" render "$sweep.toml"
  run_reps "render-$sweep-peer" "$python" peer.py render "$sweep.toml"
  run_reps "submit-$sweep" "$trainctl" submit --no-preflight "$sweep.toml" --run-dir "scratch/trainctl-$sweep-{rep}"
  run_reps "submit-$sweep-peer" "$python" peer.py submit "$sweep.toml" "scratch/peer-$sweep-{rep}"
done
grep -q "^submitted sweep of 1000 tasks" submit-grid.out || { cat submit-grid.out submit-grid.err; exit 1; }
[[ $(wc -l <render-random.err) -eq 1000 ]] || { echo "render did not list 1000 tasks" >&2; exit 1; }

# The sweep whose status is read: submitted once, then given what 1,000 completed tasks leave.
"$trainctl" submit --no-preflight grid.toml --run-dir status >/dev/null
job=$(sed -n "s/^job_id = '\(.*\)'$/\1/p" status/manifest.toml)
awk -v job="$job" 'BEGIN { for (i = 999; i >= 0; i--) printf "%-40s|%-24s|%-8s|%-80s\n", job "_" i, "COMPLETED", 0, "None" }' \
  >"bin/squeue.$job"
"$python" - "$work/status" "$job" <<'PY'
# Each task's metrics.jsonl as the runtime writes it (common/metrics_file.cpp) for steps = 1000, log_every = 10,
# eval_every = 100 and checkpoint every_steps = 100 (2 ranks x micro_batch 64 x grad_accum 2),
# and the files the batch script leaves after a completed run.
import math, random, sys
directory, job = sys.argv[1], sys.argv[2]
for task in range(1000):
    rng = random.Random(task)
    run = f"{directory}/tasks/{task}"
    floor, rate, elapsed = 0.2 + 0.8 * rng.random(), 0.002 + 0.01 * rng.random(), 0.0
    lines = ['{"step":0,"event":"start","detail":"2 ranks, global batch 256"}']
    for step in range(10, 1001, 10):
        loss = floor + (1.3863 - floor) * math.exp(-rate * step) + 0.02 * rng.gauss(0, 1)
        rate_s = 400000.0 * (1 + 0.05 * rng.gauss(0, 1))
        elapsed += 2560 / rate_s
        lr = 3e-3 * min(1.0, step / 50) * 0.5 * (1 + math.cos(math.pi * step / 1000))
        lines.append(f'{{"step":{step},"loss":{loss!r},"lr":{lr!r},"grad_norm":{0.5 + rng.random()!r},'
                     f'"samples_per_s":{rate_s!r},"global_batch":256,"elapsed_s":{elapsed!r}}}')
        if step % 100 == 0:
            lines.append(f'{{"step":{step},"val_loss":{loss + 0.05 * rng.random()!r},'
                         f'"val_accuracy":{0.25 + 0.7 * rng.random()!r}}}')
            path = f"{run}/checkpoints/step-{step:08d}.h5"
            lines.append(f'{{"step":{step},"event":"checkpoint","detail":"{path} (0.4 MB in 0.002 s, 212 MB/s)",'
                         f'"path":"{path}","size_mb":0.424,"write_s":0.002}}')
    lines.append(f'{{"step":1000,"event":"done","detail":"final loss {loss:.6f}"}}')
    with open(f"{run}/metrics.jsonl", "w") as f: f.write("\n".join(lines) + "\n")
    for name, text in (("job_id", f"{job}_{task}"), ("requeue.count", "0"), ("job.outcome", "completed"),
                       ("progress.step", "1000"), ("completed.step", "1000")):
        with open(f"{run}/{name}", "w") as f: f.write(text + "\n")
PY
metrics_mb=$(cat status/tasks/*/metrics.jsonl | wc -c | awk '{ printf "%.1f", $1 / 1e6 }')
run_reps status-table "$trainctl" sweep status status
run_reps status-table-peer "$python" peer.py status status
run_reps status-json "$trainctl" sweep status status --json
run_reps status-json-peer "$python" peer.py status status --json
grep -q "1000 tasks (1000 COMPLETED)" status-table.out || { head -n 3 status-table.out status-table.err; exit 1; }
# Both rank the same task first.
best=$(sed -n '3s/^[ *]*\([0-9]*\).*/\1/p' status-table.out)
[[ $(awk 'NR == 1 { print $1 }' status-table-peer.out) == "$best" ]] || { echo "the peer ranks another task first" >&2; exit 1; }

# Each stub alone, for scale: trainctl calls scontrol (render, submit), sbatch (submit) and squeue (status) once each.
run_reps stub-scontrol scontrol show config
run_reps stub-squeue squeue -h -r -t all -j "$job" -O "JobArrayID:40|,State:24|,RestartCnt:8|,Reason:80"

# Last, as it leaves deleted inodes behind: a submit right after deleting the previous
# repetition's sweep (3,000 directories and 2,000 files), as a user re-running a sweep into
# the same --run-dir would. Reported in order, not held to the limit: on an ext4 without a
# journal, the kernel's inode allocator steps over every inode deleted in the last 60 s (300 s
# while its inode table block is dirty) one by one, so each repetition pays for all the
# deletions before it.
before='rm -rf scratch/again' run_reps submit-after-rm "$trainctl" submit grid.toml --run-dir scratch/again
rm -rf scratch

# ---- report ------------------------------------------------------------------------------
echo "== trainctl sweep commands, 1,000 tasks; wall time over $reps runs (after 1 warm-up), stub SLURM"
printf "%-34s %10s %10s %12s %10s\n" "command" "median s" "min s" "peer median" "ratio"
slow=0
row() {  # row LABEL NAME
  local t p
  t=$(median "$2")
  p=$(median "$2-peer")
  printf "%-34s %10.3f %10.3f %12.3f %9.2fx\n" "$1" "$t" "$(minimum "$2")" "$p" "$(awk -v a="$t" -v b="$p" 'BEGIN { print a / b }')"
  if awk -v t="$t" -v limit="$limit" 'BEGIN { exit !(t >= limit) }'; then slow=1; fi
}
row "render, 10x10x10 grid" render-grid
row "render, random (samples = 1000)" render-random
row "submit, 10x10x10 grid" submit-grid
row "submit, random (samples = 1000)" submit-random
row "sweep status (table)" status-table
row "sweep status --json" status-json
echo "submit, grid, each right after rm -rf of the previous one (not held to the limit), in order:" \
  "$(awk '{ printf "%.3f ", $1 }' submit-after-rm.times)s"
printf "stub alone: scontrol show config %.4f s, squeue (1,000 lines) %.4f s (median)\n" \
  "$(median stub-scontrol)" "$(median stub-squeue)"
echo "metrics read by status: ${metrics_mb} MB in 1,000 files of $(wc -l <status/tasks/0/metrics.jsonl) lines"
echo "peer: Python $("$python" -c 'import platform; print(platform.python_version())'), scripts in $work/peer.py"
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; $work on $(df -T . | tail -n 1 | awk '{print $1 " (" $2 ")"}')"
if ((slow)); then
  echo "FAIL: a trainctl median is at or above ${limit} s" >&2
  exit 1
fi
echo "ok: every trainctl median is under ${limit} s"
