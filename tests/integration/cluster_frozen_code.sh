#!/usr/bin/env bash
# A [program]'s code frozen at submit, and word of what happens to the job, on the real one-node
# cluster (docs/usage.md). The program lives in a git work tree with an uncommitted edit
# (version 2 over the committed 1), a submodule it sources a helper from, a .gitignore'd secrets
# file and the directory of an earlier run; the snapshot takes every untracked file
# (snapshot_include = ["*"]). Once it runs, its file is edited again (version 3), and the job is
# signalled: it saves, is requeued and completes. Both starts ran version 2 with the submodule's
# helper, from the run directory's code/, which holds the submodule's files and neither the
# secrets file nor the earlier run; run.json and `status --json` name the commit with
# "dirty": true and code.diff holds the edit. The job's [notify] webhook, a local HTTP server here
# whose URL the job reads from the environment it inherits from submit (webhook_env, so that no
# copy of the config holds it), received exactly one POST per event: "requeued", then
# "completed", each with the run's fields.
source "$(dirname "$0")/lib.sh"
require_cluster 1
git init -q helper
echo 'echo "train: the helper of the submodule"' >helper/helper.sh
git -C helper add helper.sh
git -C helper -c user.name=test -c user.email=test@example.com commit -qm helper
git init -q code
cat >code/train.sh <<'SH'
#!/bin/bash
version=1
source lib/helper.sh
echo "train: version $version, restart $TRAINCTL_RESTART, in $PWD"
if [ "$TRAINCTL_RESTART" = 0 ]; then
  trap 'echo 5 >"$TRAINCTL_RUN_DIR/progress.step"; echo "train: saved"; exit "$TRAINCTL_EXIT_REQUEUE"' TERM
  touch "$TRAINCTL_RUN_DIR/started"
  while :; do sleep 0.1; done
fi
echo 10 >"$TRAINCTL_RUN_DIR/progress.step"
SH
echo secrets.env >code/.gitignore
git -C code -c protocol.file.allow=always submodule add -q "$work/helper" lib
git -C code add train.sh .gitignore
git -C code -c user.name=test -c user.email=test@example.com commit -qm "version 1"
commit=$(git -C code rev-parse HEAD)
sed -i 's/^version=1$/version=2/' code/train.sh
echo 'TOKEN=not-to-be-copied' >code/secrets.env
# An earlier run, inside the tree.
printf '[job]\nname = "earlier"\n[program]\nworkdir = "code"\ncommand = ["true"]\nsnapshot = "none"\n' >earlier.toml
"$TRAINCTL" run earlier.toml --run-dir code/runs/earlier >earlier.log 2>&1 || fail "the earlier run: $(cat earlier.log)"

# The webhook: every POST's body on a line of posts.jsonl.
cat >hook.py <<'PY'
import http.server, sys
class Hook(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        with open("posts.jsonl", "ab") as posts:
            posts.write(body.replace(b"\n", b" ") + b"\n")
        self.send_response(200)
        self.end_headers()
    def log_message(self, *args):
        pass
server = http.server.HTTPServer(("127.0.0.1", 0), Hook)
open("hook.port", "w").write(str(server.server_port))
server.serve_forever()
PY
/usr/bin/python3 hook.py &
hook_pid=$!
trap 'rc=$?; kill $hook_pid 2>/dev/null; (exit $rc); cleanup' EXIT
wait_for_file hook.port 30
cat >frozen.toml <<TOML
[job]
name = "frozen"
signal = "TERM"
signal_grace = 60

[program]
workdir = "code"
command = ["bash", "train.sh"]
snapshot_include = ["*"]

[notify]
webhook_env = "TRAINCTL_TEST_WEBHOOK"
TOML

export TRAINCTL_TEST_WEBHOOK="http://127.0.0.1:$(cat hook.port)/hook"
job=$(submit frozen.toml)
run=runs/frozen
! grep -qF "$TRAINCTL_TEST_WEBHOOK" "$run/config.toml" "$run/run.json" "$run/job.sbatch" || fail "the webhook's URL was copied"
wait_for_file "$run/started" 120
sed -i 's/^version=2$/version=3/' code/train.sh
scancel -s TERM "$job"
wait_for_job "$job" 60 PENDING
wait_for_job "$job" 120 COMPLETED FAILED CANCELLED
log=$(cat "$run/logs/slurm-$job.out")
[ "$(job_field "$job" JobState)" = COMPLETED ] || fail "job ended $(job_field "$job" JobState): $log"
expect_one_signal_requeue "$job" "$run"
for restart in 0 1; do
  grep -qF "train: version 2, restart $restart, in $PWD/$run/code" <<<"$log" ||
    fail "start $restart did not run the code as submitted from $run/code: $log"
done
[ "$(grep -c '^train: the helper of the submodule$' <<<"$log")" = 2 ] || fail "a start lacked the submodule's helper: $log"
taken=$(cd "$run/code" && find . -type f | LC_ALL=C sort | paste -sd ' ')
[ "$taken" = "./.gitignore ./.gitmodules ./lib/helper.sh ./train.sh" ] ||
  fail "code/ holds other files than the tracked ones and the submodule's: $taken"
! grep -q "train: version [13]" <<<"$log" || fail "a start ran other code than was submitted: $log"
grep -q '^+version=2$' "$run/code.diff" || fail "code.diff lacks the uncommitted edit: $(cat "$run/code.diff")"

"$TRAINCTL" status "$run" --json >status.json
/usr/bin/python3 - status.json "$run/run.json" "$commit" "$PWD/code" <<'PY' || fail "status or run.json do not tell the code"
import json, sys
[row] = json.load(open(sys.argv[1]))
record = json.load(open(sys.argv[2]))
for code in (row["code"], record["code"]):
    assert code["snapshot"] == "git" and code["commit"] == sys.argv[3] and code["dirty"] is True, code
    assert code["source"] == sys.argv[4] and code["files"] == 4 and code["untracked"] == [], code
print("status: code", row["code"])
PY
"$TRAINCTL" status "$run" >status.txt
grep -qF "code: $PWD/code at $commit with uncommitted changes" status.txt || fail "status table: $(cat status.txt)"

# One POST per event, sent before the requeue and at the end.
/usr/bin/python3 - posts.jsonl "$job" "$PWD/$run" <<'PY' || fail "the webhook's posts: $(cat posts.jsonl)"
import json, sys
posts = [json.loads(line) for line in open(sys.argv[1])]
assert [post["event"] for post in posts] == ["requeued", "completed"], posts
for post in posts:
    assert post["run"] == sys.argv[3] and post["job"] == sys.argv[2], post
    assert {"step", "loss", "outcome"} <= post.keys(), post
assert posts[0]["outcome"].startswith("requeued: saved at step 5") and posts[0]["step"] == 5, posts[0]
assert posts[1]["outcome"] == "completed" and posts[1]["step"] == 10, posts[1]
print("webhook:", posts)
PY
echo "PASS"
