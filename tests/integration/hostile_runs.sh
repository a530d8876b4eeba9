#!/usr/bin/env bash
# The hostile corpus of a run's own surfaces (docs/reliability.md, "Hostile input: runs and
# submissions"): [[then]] steps, --after, the code snapshot, [notify]'s webhook and the run
# directory's files as `status` and `notify` read them back. Each class of failure that a hostile
# user found has several cases: crashes, hangs (every command runs under a 10 s timeout), configs
# accepted that fail once the job has run, values accepted and used wrongly, snapshots that take
# what they must not or fail half made, run files read back wrongly, secrets left readable. Every
# refusal exits 2 (a failure of SLURM or of the disk, 1) with its message asserted, and leaves no
# run directory behind.
# sbatch, scancel, scontrol and squeue are recording stand-ins on PATH: no cluster is asked, the
# cases are refusals before SLURM would be, and the points where a submission can fail part way.
# (cluster_frozen_code and cluster_followers submit to the real cluster.)
source "$(dirname "$0")/lib.sh"

fake_slurm=$work/fake-slurm
mkdir -p "$fake_slurm/bin"
# sbatch prints job 1001, 1002, ... and fails at the call whose number is in $fake_slurm/fail.
cat >"$fake_slurm/bin/sbatch" <<'SH'
#!/bin/bash
calls=$(( $(cat "$FAKE_SLURM/calls" 2>/dev/null || echo 0) + 1 ))
echo "$calls" >"$FAKE_SLURM/calls"
printf '%s\n' "$*" >>"$FAKE_SLURM/sbatch.log"
if [ "$calls" = "$(cat "$FAKE_SLURM/fail" 2>/dev/null)" ]; then
  echo "sbatch: error: Batch job submission failed: Invalid partition name specified" >&2
  exit 1
fi
echo $((1000 + calls))
SH
cat >"$fake_slurm/bin/scancel" <<'SH'
#!/bin/bash
printf '%s\n' "$*" >>"$FAKE_SLURM/scancel.log"
SH
cat >"$fake_slurm/bin/scontrol" <<'SH'
#!/bin/bash
[ "$*" = "show config" ] && { echo "MaxArraySize            = 1001"; exit 0; }
echo "slurm_load_jobs error: Invalid job id specified" >&2
exit 1
SH
cp "$fake_slurm/bin/scontrol" "$fake_slurm/bin/squeue"
chmod +x "$fake_slurm/bin/"*
export PATH="$fake_slurm/bin:$PATH" FAKE_SLURM=$fake_slurm

# A fresh count of sbatch's calls, failing at call $1 (0: none).
sbatch_fails_at() {
  rm -f "$fake_slurm/calls" "$fake_slurm/sbatch.log" "$fake_slurm/scancel.log"
  echo "$1" >"$fake_slurm/fail"
}
sbatch_calls() { cat "$fake_slurm/calls" 2>/dev/null || echo 0; }

cases=0
# answers NAME CODE TEXT COMMAND...: COMMAND exits CODE within 10 s, TEXT (if any) in its stderr;
# its stdout is in out.txt.
answers() {
  local name=$1 code=$2 text=$3 actual=0
  shift 3
  timeout 10 "$@" >out.txt 2>err.txt || actual=$?
  [ "$actual" -ne 124 ] || fail "$name: $* hung (killed after 10 s)"
  [ "$actual" -eq "$code" ] || fail "$name: $* exited $actual, expected $code; stderr: $(cat err.txt)"
  [ -z "$text" ] || grep -qF -- "$text" err.txt || fail "$name: expected '$text' in stderr: $(cat err.txt)"
  cases=$((cases + 1))
}
# refused NAME TEXT COMMAND...: exit 2, with TEXT.
refused() { local name=$1 text=$2; shift 2; answers "$name" 2 "$text" "$@"; }
# submit_refused NAME TEXT CONFIG [OPTIONS]: submit exits 2 with TEXT, asks no SLURM and leaves no
# run directory (each case its own --run-dir).
submit_refused() {
  local name=$1 text=$2
  shift 2
  sbatch_fails_at 0
  refused "$name" "$text" "$TRAINCTL" submit "$@" --no-preflight --run-dir "$work/refused/$name"
  [ "$(sbatch_calls)" = 0 ] || fail "$name: sbatch was called: $(cat "$fake_slurm/sbatch.log")"
  [ ! -e "$work/refused/$name" ] || fail "$name: left its run directory $work/refused/$name"
}
# no_control_bytes FILE: FILE holds no ESC or BEL (a terminal's control sequences).
no_control_bytes() { ! grep -q $'[\x1b\x07]' "$1" || fail "$1 holds control characters raw: $(cat -v "$1")"; }

# --- fixtures ------------------------------------------------------------------------------------
write_config mlp.toml mlp data.val='"data/val.h5"' train.eval_every=10
# A run directory as `status` and `notify` read it: config.toml, job_id, run.json, metrics.jsonl.
make_run() {
  local run=runs/$1
  rm -rf "$run" && mkdir -p "$run"
  cp mlp.toml "$run/config.toml"
  printf '[notify]\ncommand = ["cat"]\n' >>"$run/config.toml"
  echo 77 >"$run/job_id"
  echo '{"trainctl_version": "trainctl 0", "submitted_at": "2026-11-27T00:00:00Z"}' >"$run/run.json"
  echo '{"step": 10, "loss": 0.5}' >"$run/metrics.jsonl"
}
# set_after RUN PREDECESSOR: RUN's run.json names PREDECESSOR as the run it waits for.
set_after() {
  printf '{"trainctl_version": "trainctl 0", "submitted_at": "2026-11-27T00:00:00Z", "after": {"run": "%s", "job": "12", "condition": "ok"}}\n' \
    "$work/runs/$2" >"runs/$1/run.json"
}

# --- crashes: loops, counts too large, names that are not UTF-8 ----------------------------------
make_run self && set_after self self
answers self-loop 0 "" "$TRAINCTL" status runs/self
grep -qF "predecessor loop: $work/runs/self waits for itself" out.txt || fail "self-loop: $(cat out.txt)"
make_run a && make_run b && set_after a b && set_after b a
answers two-run-loop 0 "" "$TRAINCTL" status runs/a runs/b --json
/usr/bin/python3 - out.txt "$work" <<'PY' || fail "two-run-loop: $(cat out.txt)"
import json, sys
rows = json.load(open(sys.argv[1]))
w = sys.argv[2]
assert [row["predecessor_loop"] for row in rows] == [
    f"{w}/runs/a waits for {w}/runs/b, which waits for {w}/runs/a",
    f"{w}/runs/b waits for {w}/runs/a, which waits for {w}/runs/b"], rows
PY
make_run c && set_after c a
answers loop-further-on 0 "" "$TRAINCTL" status runs/c
grep -qF "predecessor loop: $work/runs/a waits for $work/runs/b, which waits for $work/runs/a" out.txt ||
  fail "loop-further-on: $(cat out.txt)"
make_run counts
for count in 99999999999999999999 2147483648 -1 12abc; do
  echo "$count" >runs/counts/requeue.count
  refused "requeue.count $count" "runs/counts/requeue.count: holds \"$count\", not a count from 0 to 2147483647" \
    "$TRAINCTL" status runs/counts
done
rm runs/counts/requeue.count
echo "12; touch pwned" >runs/counts/job_id
refused job-id-garbage "runs/counts/job_id: holds \"12; touch pwned\", not a SLURM job id" "$TRAINCTL" status runs/counts

notutf8=$'not\xffutf8'
mkdir -p "$notutf8" && cp mlp.toml "$notutf8/"
refused config-dir-not-utf8 "its path is not UTF-8 (byte " "$TRAINCTL" validate "$notutf8/mlp.toml" --no-preflight
submit_refused config-dir-not-utf8 "its path is not UTF-8" "$notutf8/mlp.toml"
sbatch_fails_at 0
refused run-dir-not-utf8 "is not UTF-8; run.json and the notifications name it" \
  "$TRAINCTL" submit mlp.toml --no-preflight --run-dir "$work/$notutf8/run"
[ ! -e "$work/$notutf8/run" ] || fail "run-dir-not-utf8 left its run directory"

# A [program] in a git work tree, and in a plain folder.
program_config() {  # program_config FILE WORKDIR [KEY = VALUE lines of [program]...]
  local file=$1 workdir=$2
  shift 2
  printf '[job]\nname = "own"\n\n[program]\nworkdir = "%s"\ncommand = ["bash", "train.sh"]\n' "$workdir" >"$file"
  printf '%s\n' "$@" >>"$file"
}
git_commit() { git -C "$1" add -A && git -C "$1" -c user.name=t -c user.email=t@t commit -qm "$2"; }
git init -q tree && echo 'echo trained' >tree/train.sh && git_commit tree code
touch "tree/$notutf8.py"
program_config untracked.toml tree 'snapshot_include = ["*"]'
refused untracked-not-utf8 "program snapshot: the name of $notutf8.py in $work/tree is not UTF-8 (byte 4 (0xff)" \
  "$TRAINCTL" validate untracked.toml
submit_refused untracked-not-utf8 "is not UTF-8" untracked.toml
rm "tree/$notutf8.py"
mkdir plain && echo 'echo trained' >plain/train.sh && touch "plain/$notutf8.txt"
program_config plain.toml plain
submit_refused files-not-utf8 "program snapshot: the name of $notutf8.txt in $work/plain is not UTF-8" plain.toml
rm "plain/$notutf8.txt"

# --- hangs: a FIFO, a device or a directory where a run file should be; a line without end -------
for file in run.json job.outcome metrics.jsonl requeue.count job_id bad.nodes; do
  make_run fifo && rm -f "runs/fifo/$file" && mkfifo "runs/fifo/$file"
  refused "$file as a FIFO" "runs/fifo/$file: is a FIFO, not a regular file" "$TRAINCTL" status runs/fifo
done
make_run fifo && rm runs/fifo/metrics.jsonl && mkfifo runs/fifo/metrics.jsonl
refused "notify --print, metrics.jsonl a FIFO" "runs/fifo/metrics.jsonl: is a FIFO, not a regular file" \
  "$TRAINCTL" notify runs/fifo --event failed --print
make_run fifo && rm runs/fifo/run.json && mkfifo runs/fifo/run.json
refused "notify --print, run.json a FIFO" "runs/fifo/run.json: is a FIFO, not a regular file" \
  "$TRAINCTL" notify runs/fifo --event failed --print
make_run then && echo '{"trainctl_version": "t", "submitted_at": "s", "then": [{"index": 0, "kind": "export", "job": "78"}]}' \
  >runs/then/run.json && mkdir runs/then/then && mkfifo runs/then/then/0.outcome
refused "then/0.outcome as a FIFO" "runs/then/then/0.outcome: is a FIFO, not a regular file" "$TRAINCTL" status runs/then
make_run fifo && mkdir runs/fifo/logs && mkfifo runs/fifo/logs/slurm-77.out
refused "logs, the log a FIFO" "runs/fifo/logs/slurm-77.out: is a FIFO, not a regular file" "$TRAINCTL" logs runs/fifo
refused "logs -f, the log a FIFO" "runs/fifo/logs/slurm-77.out: is a FIFO, not a regular file" \
  "$TRAINCTL" logs runs/fifo --follow
make_run device && rm runs/device/metrics.jsonl && ln -s /dev/zero runs/device/metrics.jsonl
refused "metrics.jsonl a device" "runs/device/metrics.jsonl: is a character device, not a regular file" \
  "$TRAINCTL" status runs/device
make_run directory && rm runs/directory/run.json && mkdir runs/directory/run.json
refused "run.json a directory" "runs/directory/run.json: is a directory, not a regular file" \
  "$TRAINCTL" status runs/directory
make_run long && head -c 2000000 /dev/zero | tr '\0' ' ' >runs/long/metrics.jsonl
refused "a 2 MB line" "runs/long/metrics.jsonl: line 1 is longer than 1048576 bytes" "$TRAINCTL" status runs/long

# --- accepted, then failing after the training: [[then]] checked against the run it follows ------
then_config() {  # then_config FILE KEY=VALUE... -- [[then]] lines...
  local file=$1 overrides=()
  shift
  while [ "$1" != -- ]; do overrides+=("$1"); shift; done
  shift
  write_config "$file" followed "${overrides[@]}"
  { echo '[[then]]'; printf '%s\n' "$@"; } >>"$file"
}
then_refused() {  # then_refused NAME TEXT KEY=VALUE... -- [[then]] lines...
  local name=$1 text=$2
  shift 2
  then_config then.toml "$@"
  refused "$name" "then.toml:" "$TRAINCTL" validate then.toml --no-preflight
  grep -qF -- "$text" err.txt || fail "$name: expected '$text' in: $(cat err.txt)"
  submit_refused "$name" "$text" then.toml
}
then_refused evaluate-without-val 'then[0].kind: "evaluate" scores a checkpoint on the validation set, and [data] names no val' \
  -- 'kind = "evaluate"'
then_refused evaluate-past-the-end 'then[0].checkpoint: the run ends at step 40 (train.steps), before step 50' \
  data.val='"data/val.h5"' -- 'kind = "evaluate"' 'checkpoint = 50'
then_refused evaluate-unsaved-step 'then[0].checkpoint: the run saves no checkpoint at step 15: it saves every 10 steps (checkpoint.every_steps) and at its end (step 40)' \
  data.val='"data/val.h5"' -- 'kind = "evaluate"' 'checkpoint = 15'
then_refused evaluate-step-zero 'then[0].checkpoint: the run saves no checkpoint at step 0' \
  data.val='"data/val.h5"' -- 'kind = "evaluate"' 'checkpoint = 0'
then_refused evaluate-pruned 'then[0].checkpoint: the run saves 3 checkpoints after step 10, and checkpoint.keep_last = 2 keeps only the newest 2' \
  data.val='"data/val.h5"' checkpoint.keep_last=2 -- 'kind = "evaluate"' 'checkpoint = 10'
then_refused sample-not-a-language-model 'then[0].kind: "sample" continues a prompt with a language model, and model.kind = "mlp" is none' \
  -- 'kind = "sample"' 'prompt = "Once"'
then_refused sample-empty-prompt 'then[0].prompt: is empty; sample continues a prompt of at least one byte' \
  -- 'kind = "sample"' 'prompt = ""'
then_refused command-empty-program 'then[0].command: element 0, the program, is empty' -- 'kind = "command"' 'command = ["", "x"]'
then_refused command-empty 'then[0].command: is empty; give the program and its arguments' -- 'kind = "command"' 'command = []'
then_config kept.toml data.val='"data/val.h5"' checkpoint.keep_last=3 -- 'kind = "evaluate"' 'checkpoint = 20'
answers evaluate-kept-step 0 "" "$TRAINCTL" validate kept.toml --no-preflight
write_config many.toml many
for _ in $(seq 1001); do printf '[[then]]\nkind = "export"\n'; done >>many.toml
refused thousand-and-one-steps "then: at most 1000 follow-up steps" "$TRAINCTL" validate many.toml --no-preflight

# --- accepted and wrong: --after, and the job ids it passes to sbatch ---------------------------
submit_refused after-empty "--after is empty; give a run directory, a sweep directory or a job id" mlp.toml --after ""
for after in _ 12_ _3 "12;13" "12:13" "12 13" "12_3_4" runs/missing; do
  submit_refused "after-$after" "--after $after: $after is neither a run directory, a sweep directory nor a job id" \
    mlp.toml --after "$after"
done
make_run done
echo "12; touch pwned" >runs/done/job_id
submit_refused predecessor-job-id-garbage "runs/done/job_id: holds \"12; touch pwned\", not a SLURM job id" \
  mlp.toml --after runs/done
echo 77 >runs/done/job_id
make_run resumed
sbatch_fails_at 0
refused after-itself "--after $work/runs/resumed: that is this run itself, which cannot wait for itself" \
  "$TRAINCTL" submit mlp.toml --no-preflight --resume --run-dir runs/resumed --after runs/resumed
make_run waits && set_after waits resumed
refused after-a-loop "--after $work/runs/waits: it waits for this run ($work/runs/waits waits for $work/runs/resumed)" \
  "$TRAINCTL" submit mlp.toml --no-preflight --resume --run-dir runs/resumed --after runs/waits
[ "$(sbatch_calls)" = 0 ] || fail "--after refusals called sbatch: $(cat "$fake_slurm/sbatch.log")"

# --- the code snapshot ---------------------------------------------------------------------------
mkfifo plain/pipe
refused fifo-in-the-tree "program snapshot: pipe in $work/plain is a FIFO, which a copy of the code cannot hold" \
  "$TRAINCTL" validate plain.toml
submit_refused fifo-in-the-tree "pipe in $work/plain is a FIFO" plain.toml
rm plain/pipe
if mknod plain/null c 1 3 2>/dev/null; then
  submit_refused device-in-the-tree "null in $work/plain is a character device" plain.toml
  rm plain/null
fi
/usr/bin/python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' plain/socket
submit_refused socket-in-the-tree "socket in $work/plain is a socket" plain.toml
rm plain/socket
for pattern in ../x "../*" /etc/passwd "lib/../../x"; do
  program_config outside.toml plain "snapshot_include = [\"*.sh\", \"$pattern\"]"
  refused "snapshot_include $pattern" \
    "program.snapshot_include: element 1 (\"$pattern\") leaves program.workdir; the patterns name files under it" \
    "$TRAINCTL" validate outside.toml --no-preflight
done
# A submodule not checked out; then checked out, with an ignored secret and an earlier run in the tree.
git init -q lib && echo 'echo helped' >lib/help.sh && git_commit lib lib
git -C tree -c protocol.file.allow=always submodule add -q "$work/lib" lib && git_commit tree submodule
git -c protocol.file.allow=always clone -q tree clone
program_config clone.toml clone
submit_refused submodule-not-checked-out "program snapshot: lib in $work/clone is a submodule that is not checked out" clone.toml
echo 'secrets.env' >tree/.gitignore && git_commit tree ignore && echo 'TOKEN=x' >tree/secrets.env
program_config tree.toml tree 'snapshot_include = ["*"]'
sbatch_fails_at 0
"$TRAINCTL" submit tree.toml --run-dir tree/runs/first >submit.txt || fail "submit from the tree: $(cat submit.txt)"
"$TRAINCTL" submit tree.toml --run-dir tree/runs/second >submit.txt || fail "a second submit: $(cat submit.txt)"
(cd tree/runs/second/code && find . -type f | LC_ALL=C sort) >taken.txt
[ "$(cat taken.txt)" = "$(printf '%s\n' ./.gitignore ./.gitmodules ./lib/help.sh ./train.sh)" ] ||
  fail "the second snapshot took: $(cat taken.txt)"
# Failure points of a submission: each leaves nothing behind, and cancels what it queued.
sbatch_fails_at 1
answers sbatch-refuses 1 "Invalid partition name specified" "$TRAINCTL" submit tree.toml --run-dir "$work/failed/sbatch"
[ ! -e failed/sbatch ] || fail "a run that SLURM refused left its directory"
mkdir -p failed/existing && echo mine >failed/existing/notes.txt
sbatch_fails_at 1
answers sbatch-refuses-in-a-folder 1 "Invalid partition name specified" \
  "$TRAINCTL" submit tree.toml --run-dir "$work/failed/existing"
[ -e failed/existing/notes.txt ] && [ ! -e failed/existing/config.toml ] ||
  fail "a run refused in a folder that was there took the folder, or left its config.toml: $(ls failed/existing)"
{ cat tree.toml; printf '[[then]]\nkind = "command"\ncommand = ["true"]\n'; } >followed.toml
sbatch_fails_at 2
answers follower-refused 1 "Invalid partition name specified" "$TRAINCTL" submit followed.toml --run-dir "$work/failed/then"
[ "$(cat "$fake_slurm/scancel.log")" = 1001 ] || fail "the training job queued before its follower failed was not cancelled"
[ ! -e failed/then ] || fail "a run whose follow-up SLURM refused left its directory"
mkdir -p deep && deep_path=deep
for _ in $(seq 16); do deep_path+=/$(printf 'd%.0s' $(seq 250)); done
mkdir -p "$deep_path" && echo x >"$deep_path/f" && echo 'echo trained' >deep/train.sh
program_config deep.toml deep 'snapshot = "files"'
long_run=$work/failed/$(printf 'r%.0s' $(seq 200))
sbatch_fails_at 0
answers copy-fails 1 "File name too long" "$TRAINCTL" submit deep.toml --run-dir "$long_run"
[ ! -e "$long_run" ] || fail "a snapshot that failed to copy left its run directory"
[ "$(sbatch_calls)" = 0 ] || fail "copy-fails reached sbatch"
printf '[job]\nname = "swept"\n[program]\nworkdir = "plain"\ncommand = ["bash", "train.sh", "{params.x}"]\n[params]\nx = 1\n[sweep]\n"params.x" = [1, 2]\n' >swept.toml
sbatch_fails_at 1
answers sweep-refused 1 "Invalid partition name specified" "$TRAINCTL" submit swept.toml --run-dir "$work/failed/sweep"
[ ! -e failed/sweep ] || fail "a sweep that SLURM refused left its directory"

# The follow-up scripts, run by bash as SLURM would: hostile words reach the command inert.
hostile='$(touch pwned) `touch pwned` '"'"' " ; touch pwned'
hostile_json=$(/usr/bin/python3 -c 'import json, sys; print(json.dumps(sys.argv[1]))' "$hostile")
{ cat tree.toml; printf '[[then]]\nkind = "command"\ncommand = ["sh", "-c", "printf %%s \\"$1\\" >said", "sh", %s]\n' \
  "$hostile_json"; } >words.toml
sbatch_fails_at 0
"$TRAINCTL" submit words.toml --run-dir "$work/runs/words" >submit.txt || fail "submit words.toml: $(cat submit.txt)"
bash runs/words/then/0.sbatch >then.out 2>&1 || fail "the follow-up script failed: $(cat then.out)"
[ "$(cat runs/words/then/0.outcome)" = completed ] || fail "outcome: $(cat runs/words/then/0.outcome)"
[ "$(cat runs/words/said)" = "$hostile" ] || fail "the command got: $(cat runs/words/said)"
[ ! -e pwned ] && [ ! -e runs/words/pwned ] || fail "a hostile word ran a command"

# --- run files read back wrongly: numbers out of range, control characters ----------------------
make_run numbers
for line in '{"step": 1e30, "loss": 1}' '{"step": -5, "loss": 1}' '{"step": 2.5, "loss": 1}' \
  '{"step": 1, "loss": 1, "peak_rss_mb": 1e300}' '{"step": 1, "loss": 1, "global_batch": -1}'; do
  printf '{"step": 1, "loss": 2}\n%s\n' "$line" >runs/numbers/metrics.jsonl
  refused "metrics: $line" "runs/numbers/metrics.jsonl: line 2: " "$TRAINCTL" status runs/numbers
  grep -qF "is not a" err.txt || fail "metrics $line: $(cat err.txt)"
done
echo '{"step": 1, "loss": 2}' >runs/numbers/metrics.jsonl
record_refused() {  # record_refused NAME TEXT JSON
  echo "$3" >runs/numbers/run.json
  refused "$1" "runs/numbers/run.json: $2" "$TRAINCTL" status runs/numbers
}
then_record() { echo "{\"trainctl_version\": \"t\", \"submitted_at\": \"s\", \"then\": [$1]}"; }
record_refused index-float 'not a run record: "index" is 15000000000.0, not a whole number from 0 to 999' \
  "$(then_record '{"index": 1.5e10, "kind": "export", "job": "78"}')"
record_refused index-negative 'not a run record: "index" is -1, not a whole number from 0 to 999' \
  "$(then_record '{"index": -1, "kind": "export", "job": "78"}')"
record_refused job-garbage 'not a run record: "job" is "78; touch pwned", not a job id' \
  "$(then_record '{"index": 0, "kind": "export", "job": "78; touch pwned"}')"
record_refused kind-unknown 'not a run record: "kind" is "\u001b[2J", not a follow-up step' \
  "$(then_record '{"index": 0, "kind": "\u001b[2J", "job": "78"}')"
record_refused bytes-huge 'not a run record: "bytes" is 1e+300, not a whole number' \
  '{"trainctl_version": "t", "submitted_at": "s", "code": {"snapshot": "files", "source": "/", "workdir": "/", "files": 1, "bytes": 1e300}}'
record_refused condition-unknown 'not a run record: "condition" is "maybe", not "ok" or "any"' \
  '{"trainctl_version": "t", "submitted_at": "s", "after": {"run": "", "job": "12", "condition": "maybe"}}'
record_refused not-json "not JSON: " '{"trainctl_version": '
record_refused missing-field "not a run record: " '{"trainctl_version": "t"}'
make_run escapes
printf 'failed: \033[2J\033]0;pwned\007 exit 1\n' >runs/escapes/job.outcome
echo '{"trainctl_version": "t", "submitted_at": "s", "code": {"snapshot": "git", "source": "/src\u001b[31m", "workdir": "/src", "commit": "abc\u0007", "dirty": false, "untracked": [], "files": 1, "bytes": 1}}' \
  >runs/escapes/run.json
answers escapes 0 "" "$TRAINCTL" status runs/escapes
no_control_bytes out.txt
grep -qF 'failed: \x1b[2J\x1b]0;pwned\x07 exit 1' out.txt && grep -qF 'code: /src\x1b[31m at abc\x07' out.txt ||
  fail "escapes: $(cat -v out.txt)"
printf 'failed: \xff\xfe\n' >runs/escapes/job.outcome
answers outcome-not-utf8 0 "" "$TRAINCTL" status runs/escapes --json
/usr/bin/python3 -c 'import json, sys; assert json.load(open(sys.argv[1]))[0]["outcome"] == "failed: \ufffd\ufffd"' out.txt ||
  fail "status --json of an outcome that is not UTF-8: $(cat -v out.txt)"

# --- secrets: the webhook's URL -----------------------------------------------------------------
secret_url=https://hooks.example.org/services/T000/B000/SECRETTOKEN
{ cat plain.toml; printf '[notify]\nwebhook = "%s"\n' "$secret_url"; } >literal.toml
sbatch_fails_at 0
"$TRAINCTL" submit literal.toml --run-dir "$work/runs/literal" >submit.txt || fail "submit literal.toml: $(cat submit.txt)"
[ "$(stat -c %a runs/literal/config.toml)" = 600 ] || fail "a config holding a webhook is mode $(stat -c %a runs/literal/config.toml)"
{ cat plain.toml; printf '[notify]\nwebhook_file = "hook.url"\n'; } >from_file.toml
echo "$secret_url" >hook.url && chmod 644 hook.url
refused webhook-file-readable "notify.webhook_file: $work/hook.url may be read by its group or by others (mode 0644)" \
  "$TRAINCTL" validate from_file.toml
submit_refused webhook-file-readable "may be read by its group or by others" from_file.toml
chmod 600 hook.url
sed 's/hook.url/nothing.url/' from_file.toml >missing.toml
refused webhook-file-missing "notify.webhook_file: $work/nothing.url does not exist" "$TRAINCTL" validate missing.toml
mkfifo hook.fifo && sed 's/hook.url/hook.fifo/' from_file.toml >fifo.toml
refused webhook-file-fifo "notify.webhook_file: $work/hook.fifo is a FIFO, not a regular file" "$TRAINCTL" validate fifo.toml
"$TRAINCTL" submit from_file.toml --run-dir "$work/runs/from_file" >submit.txt || fail "submit from_file.toml: $(cat submit.txt)"
grep -qxF "webhook_file = '$work/hook.url'" runs/from_file/config.toml || fail "webhook_file not made absolute"
[ "$(stat -c %a runs/from_file/config.toml)" != 600 ] || fail "a config naming where the secret is was made secret"
{ cat plain.toml; printf '[notify]\nwebhook_env = "TRAINCTL_TEST_HOOK"\n'; } >from_env.toml
refused webhook-env-unset 'notify.webhook_env: $TRAINCTL_TEST_HOOK is not set here' "$TRAINCTL" validate from_env.toml
TRAINCTL_TEST_HOOK="not a url" refused webhook-env-no-url \
  'notify.webhook_env: $TRAINCTL_TEST_HOOK: the webhook'"'"'s URL must be an http:// or https:// URL' \
  "$TRAINCTL" validate from_env.toml
grep -qF "not a url" err.txt && fail "the refusal echoed the variable's value"
TRAINCTL_TEST_HOOK=$secret_url "$TRAINCTL" submit from_env.toml --run-dir "$work/runs/from_env" >submit.txt ||
  fail "submit from_env.toml: $(cat submit.txt)"
TRAINCTL_TEST_HOOK=$secret_url answers print-elides-the-secret 0 \
  'trainctl: notify completed: would send to https://hooks.example.org/… (from $TRAINCTL_TEST_HOOK)' \
  "$TRAINCTL" notify runs/from_env --event completed --print
! grep -qF SECRETTOKEN out.txt err.txt runs/from_env/config.toml runs/from_env/run.json || fail "the secret shows"
answers print-names-the-file 0 "would send to https://hooks.example.org/… (from $work/hook.url)" \
  "$TRAINCTL" notify runs/from_file --event completed --print
# Checkpoints are copied and shared: they record the config without [notify].
make_data
write_config secret.toml secret train.steps=2 checkpoint.every_steps=2
printf '[notify]\nwebhook = "%s"\n' "$secret_url" >>secret.toml
"$TRAINCTL" run secret.toml >run.txt 2>&1 || fail "run secret.toml: $(cat run.txt)"
h5dump -a /config "$(checkpoint_of runs/secret 2)" >checkpoint_config.txt
grep -qF '[train]' checkpoint_config.txt || fail "the checkpoint records no config: $(cat checkpoint_config.txt)"
! grep -qF SECRETTOKEN checkpoint_config.txt || fail "the checkpoint records the webhook's URL"

[ ! -e pwned ] || fail "a hostile value ran a command"
echo "PASS: $cases cases"
