#!/usr/bin/env bash
# [notify] delivered by `trainctl notify`, without SLURM, to a local HTTP server (python3's
# http.server, which records every POST) and to commands:
# - a webhook gets one POST per call, Content-Type application/json, with the record's fields:
#   the run directory, the job (--job, else SLURM's job of the caller, else job_id), the event,
#   the last step and loss of metrics.jsonl, job.outcome's first line, this host and now (UTC);
#   format = "slack" sends {"text": ...}; --print shows the record and sends nothing; an event
#   that [notify] on leaves out sends nothing;
# - a server answering 500 gets 3 tries, no more; a closed port, a missing curl, a missing,
#   failing or hanging command (killed, with what it started, at [notify] timeout) each make it
#   say one line and exit 0, within the bound;
# - a command gets the record on its stdin;
# - validate names the target, and render's script calls `trainctl notify` with the run
#   directory alone: no [notify] value, however hostile, reaches it.
# Times are upper bounds only: the machine may be loaded.
source "$(dirname "$0")/lib.sh"
command -v curl >/dev/null || fail "curl is missing: scripts/install-deps.sh installs it (Debian package curl)"
# The record's job comes from these when they are set: the test sets them itself.
unset SLURM_JOB_ID SLURM_ARRAY_JOB_ID SLURM_ARRAY_TASK_ID

# A server on a free port (in the file port once it listens) that appends each POST to
# requests.jsonl as {"path", "content_type", "body"}, and answers 500 to paths under /fail.
cat >server.py <<'PY'
import http.server, json, os
class Recorder(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with open("requests.jsonl", "a") as log:
            log.write(json.dumps({"path": self.path, "content_type": self.headers.get("Content-Type"),
                                  "body": body.decode()}) + "\n")
        self.send_response(500 if self.path.startswith("/fail") else 200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")
    def log_message(self, *args):
        pass
server = http.server.HTTPServer(("127.0.0.1", 0), Recorder)
with open("port.new", "w") as port:
    port.write(str(server.server_address[1]))
os.rename("port.new", "port")
server.serve_forever()
PY
/usr/bin/python3 server.py &
server_pid=$!
trap 'rc=$?; kill "$server_pid" 2>/dev/null; (exit $rc); cleanup' EXIT
wait_for_file port 30
url="http://127.0.0.1:$(cat port)"
# A port nobody listens on: bound, then closed.
closed_port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

# A run directory as a job leaves it: its config, metrics, outcome and job id.
write_config config.toml notified
run=$work/runs/notified
mkdir -p "$run"
printf '{"step": 10, "loss": 1.5}\n{"step": 20, "val_loss": 0.9}\n{"step": 30, "loss": 0.123456789}\n' >"$run/metrics.jsonl"
printf 'failed: exit 3\nrequeued: saved at step 20\n' >"$run/job.outcome"
echo 4242 >"$run/job_id"

# with_notify TABLE_LINES...: the run's config.toml is config.toml with a [notify] of these lines.
with_notify() {
  { cat config.toml; echo '[notify]'; printf '%s\n' "$@"; } >"$run/config.toml"
}
requests() { if [ -f requests.jsonl ]; then wc -l <requests.jsonl; else echo 0; fi; }

# check_record JSON EVENT JOB: JSON is the run's record of EVENT for JOB, made just now here.
check_record() {
  /usr/bin/python3 - "$1" "$2" "$3" "$run" <<'PY' || fail "the record differs (above): $1"
import datetime, json, socket, sys
text, event, job, run = sys.argv[1:]
record = json.loads(text)
assert list(record) == ["run", "job", "event", "step", "loss", "outcome", "host", "time"], list(record)
expected = {"run": run, "job": job, "event": event, "step": 30, "loss": 0.123456789, "outcome": "failed: exit 3",
            "host": socket.gethostname()}
assert {key: record[key] for key in expected} == expected, record
sent = datetime.datetime.strptime(record["time"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc)
age = (datetime.datetime.now(datetime.timezone.utc) - sent).total_seconds()
assert -5 < age < 120, f"time {record['time']} is {age} s ago"
PY
}

# The last request's field FIELD.
last_request() { tail -n 1 requests.jsonl | /usr/bin/python3 -c "import json, sys; print(json.load(sys.stdin)['$1'])"; }

# --- a webhook ---------------------------------------------------------------------------------
with_notify "webhook = \"$url/hook/T0/secret\"" 'on = ["failed", "hung", "completed"]'
"$TRAINCTL" notify "$run" --event failed --print >printed.json 2>err.txt
[ "$(requests)" = 0 ] || fail "--print sent a request"
check_record "$(cat printed.json)" failed 4242

expect_exit 0 "$TRAINCTL" notify "$run" --event failed
[ "$(requests)" = 1 ] || fail "one notify sent $(requests) requests"
[ "$(cat err.txt)" = "trainctl: notified failed to 127.0.0.1:$(cat port)" ] || fail "notify said: $(cat err.txt)"
[ ! -s out.txt ] || fail "notify wrote to stdout: $(cat out.txt)"
[ "$(last_request path)" = /hook/T0/secret ] || fail "POSTed to $(last_request path)"
[ "$(last_request content_type)" = application/json ] || fail "Content-Type $(last_request content_type)"
check_record "$(last_request body)" failed 4242

# The job: --job first, then the one the caller runs in, as the batch script names it.
expect_exit 0 "$TRAINCTL" notify "$run" --event hung --job 77_3
check_record "$(last_request body)" hung 77_3
SLURM_JOB_ID=900 expect_exit 0 "$TRAINCTL" notify "$run" --event completed
check_record "$(last_request body)" completed 900
SLURM_JOB_ID=901 SLURM_ARRAY_JOB_ID=900 SLURM_ARRAY_TASK_ID=2 expect_exit 0 "$TRAINCTL" notify "$run" --event completed
check_record "$(last_request body)" completed 900_2
[ "$(requests)" = 4 ] || fail "4 notifications made $(requests) requests"

# An event that [notify] on leaves out is not sent.
expect_exit 0 "$TRAINCTL" notify "$run" --event requeued
[ "$(requests)" = 4 ] && [ ! -s err.txt ] || fail "requeued, not in on, was sent: $(cat err.txt)"

with_notify "webhook = \"$url/slack\"" 'format = "slack"'
expect_exit 0 "$TRAINCTL" notify "$run" --event requeued
expected_text="{\"text\":\"trainctl: run $run job 4242 requeued at step 30 (loss 0.1235): failed: exit 3\"}"
[ "$(last_request body)" = "$expected_text" ] || fail "slack message $(last_request body), expected $expected_text"

# --- what goes wrong: one line, exit 0, within the bound -----------------------------------------
# elapsed_within SECONDS WHAT COMMAND...: COMMAND exits 0 within SECONDS; stderr is in err.txt.
elapsed_within() {
  local bound=$1 what=$2 started=$SECONDS
  shift 2
  expect_exit 0 "$@"
  echo "$what: $((SECONDS - started)) s"
  [ $((SECONDS - started)) -lt "$bound" ] || fail "$what took $((SECONDS - started)) s, more than $bound"
  [ "$(wc -l <err.txt)" = 1 ] || fail "$what said more than one line: $(cat err.txt)"
}

with_notify "webhook = \"$url/fail\""
before=$(requests)
elapsed_within 30 "HTTP 500" "$TRAINCTL" notify "$run" --event completed
[ "$(cat err.txt)" = "trainctl: notify completed: curl exited with code 22: curl: (22) The requested URL returned error: 500" ] ||
  fail "HTTP 500: $(cat err.txt)"
[ $(($(requests) - before)) = 3 ] || fail "HTTP 500 was tried $(($(requests) - before)) times, not 3"

with_notify "webhook = \"http://127.0.0.1:$closed_port/hook\""
elapsed_within 30 "connection refused" "$TRAINCTL" notify "$run" --event completed
grep -q "^trainctl: notify completed: curl exited with code 7: curl: (7) Failed to connect" err.txt ||
  fail "connection refused: $(cat err.txt)"

mkdir -p no-curl
elapsed_within 30 "no curl" env PATH="$work/no-curl" "$TRAINCTL" notify "$run" --event completed
[ "$(cat err.txt)" = "trainctl: notify completed: curl is not installed (the Debian package curl); webhooks are sent with it" ] ||
  fail "no curl: $(cat err.txt)"

# --- a command ---------------------------------------------------------------------------------
cat >record.sh <<'SH'
#!/bin/sh
cat >"$1"
echo "ran with $2" >"$1.args"
SH
cat >fails.sh <<'SH'
#!/bin/sh
cat >/dev/null
echo "ignored line"
echo "no route to the pager" >&2
exit 3
SH
cat >hangs.sh <<'SH'
#!/bin/sh
sleep 600 &
echo $! >"$1"
wait
SH
chmod +x record.sh fails.sh hangs.sh

with_notify "command = [\"$work/record.sh\", \"$work/received.json\", \"two words\"]"
expect_exit 0 "$TRAINCTL" notify "$run" --event completed
[ "$(cat err.txt)" = "trainctl: notified completed to $work/record.sh" ] || fail "command: $(cat err.txt)"
check_record "$(cat received.json)" completed 4242
[ "$(cat received.json.args)" = "ran with two words" ] || fail "the command got $(cat received.json.args)"

with_notify "command = [\"$work/fails.sh\"]"
elapsed_within 30 "failing command" "$TRAINCTL" notify "$run" --event completed
[ "$(cat err.txt)" = "trainctl: notify completed: $work/fails.sh exited with code 3: no route to the pager" ] ||
  fail "failing command: $(cat err.txt)"

with_notify 'command = ["no-such-notifier"]'
elapsed_within 30 "missing command" "$TRAINCTL" notify "$run" --event completed
[ "$(cat err.txt)" = "trainctl: notify completed: cannot run no-such-notifier: No such file or directory" ] ||
  fail "missing command: $(cat err.txt)"

with_notify "command = [\"$work/hangs.sh\", \"$work/sleeper.pid\"]" 'timeout = 2'
elapsed_within 20 "hanging command" "$TRAINCTL" notify "$run" --event completed
[ "$(cat err.txt)" = "trainctl: notify completed: $work/hangs.sh did not finish within 2 s; killed" ] ||
  fail "hanging command: $(cat err.txt)"
# Killed is dead or a zombie, which a PID 1 that reaps nothing may keep.
sleeper_state=$(ps -o stat= -p "$(cat sleeper.pid)" || true)
[[ -z $sleeper_state || $sleeper_state == Z* ]] || fail "the hanging command's sleep outlived it ($sleeper_state)"

# --- validate and render -------------------------------------------------------------------------
cp config.toml hostile.toml
cat >>hostile.toml <<'TOML'
[notify]
webhook = "https://chat.example.org/hooks/x$(id)';id;'"
on = ["failed"]
TOML
said=$("$TRAINCTL" validate hostile.toml --no-preflight)
[[ $said == *"; notifies chat.example.org of failed" ]] || fail "validate says: $said"
"$TRAINCTL" render hostile.toml --run-dir "$work/runs/hostile" >hostile.sbatch
grep -qxF "notifier='$(readlink -f "$TRAINCTL")'" hostile.sbatch || fail "no notifier in the script"
grep -qxF '  "$notifier" notify "$run_dir" --event "$1" --job "$requeue_target" || true' hostile.sbatch ||
  fail "no notify call in the script"
! grep -nF -e '$(id)' -e chat.example.org hostile.sbatch || fail "a [notify] value reached the script (above)"
"$TRAINCTL" render config.toml >plain.sbatch
! grep -n notifier plain.sbatch || fail "a config without [notify] got a notifier (above)"
echo "PASS"
