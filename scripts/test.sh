#!/usr/bin/env bash
# The test command (README, .ci/run): installs what the tests need, builds, runs every meson
# test (unit, local integration, and the cluster tests, which start the local SLURM cluster
# themselves), and ends with the plain count computed from meson's testlog.json:
#   tests: N passed, N failed, N skipped
# It says what it is doing all along: each test as it starts and as it ends, and every 15 s the
# tests still running. A local cluster that was up before the tests stays up, in its shape (the
# tests reshape it); one that the tests started is stopped.
# Usage: scripts/test.sh [meson test arguments: test names, --suite unit, ...]   (none: every test)
#        scripts/test.sh --repeat N [--load K] TEST...
# The second form runs the named tests N times, with K busy loops on the CPUs beside them (default
# none), and says how often each passed: the way to show that a test passes on a fast machine and
# on a loaded one alike. Its last line is `repeat: N rounds, P of T runs passed`.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/progress.sh

rounds=0 load=0
while [ $# -gt 0 ]; do
  case $1 in
    --repeat) rounds=${2:?--repeat takes a count}; shift 2 ;;
    --load) load=${2:?--load takes a count of busy loops}; shift 2 ;;
    *) break ;;
  esac
done
if ! [[ $rounds =~ ^[0-9]+$ && $load =~ ^[0-9]+$ ]]; then
  echo "test.sh: --repeat and --load take whole numbers" >&2
  exit 2
fi
if [ "$load" -gt 0 ] && [ "$rounds" -eq 0 ]; then
  echo "test.sh: --load goes with --repeat N" >&2
  exit 2
fi
if [ "$rounds" -gt 0 ] && [ $# -eq 0 ]; then
  echo "test.sh: --repeat N names the tests to repeat" >&2
  exit 2
fi

# First what the build needs; the rest installs while the build begins, and the tests wait for it.
scripts/install-deps.sh --build
install_the_rest() {
  scripts/install-deps.sh
  # The npm packages the tokenizer tests take as their oracles, installed once here rather than by
  # several tests at once into one cache; where npm cannot reach its registry those tests skip.
  echo "test.sh: the npm packages of the tokenizer tests (js-tiktoken, gpt-3-encoder, llama3-tokenizer-js," \
    "@huggingface/tokenizers, llama-tokenizer-js)"
  { bash -c 'source tests/integration/tokenizer_npm.sh && install_tokenizer_npm' 2>&1 || true; } | progress_filter npm false
}
install_the_rest &
installing=$!

# cluster_plan: three lines: what every cluster test runs (the programs: the meson `depends` they
# all have) as ninja targets; the cluster tests that run no more; and those that need more of the
# build (the CUDA-on-CPU backend, or everything, to install it). Tests in meson's order.
cluster_plan() {
  python3 - <<'PY'
import json, os, subprocess
def introspect(what):
    return json.loads(subprocess.run(["meson", "introspect", "build", what], check=True,
                                     capture_output=True, text=True).stdout)
files = {target["id"]: target["filename"] for target in introspect("--targets")}
tests = [test for test in introspect("--tests") if any(suite.split(":")[-1] == "cluster" for suite in test["suite"])]
common = set.intersection(*(set(test["depends"]) for test in tests)) if tests else set()
print(" ".join(sorted(os.path.relpath(file, "build") for target in common for file in files[target])))
print(" ".join(test["name"] for test in tests if set(test["depends"]) <= common))
print(" ".join(test["name"] for test in tests if not set(test["depends"]) <= common))
PY
}

# The CUDA code's tests run on the CPU implementation of CUDA: a build that cannot make it fails
# here with the reason, instead of leaving those tests out. For every test, the build starts with
# what the cluster tests run: they mostly wait for SLURM, so they start while the rest builds (in
# the background, which writes its exit status to build_status once it has ended).
build=(scripts/build.sh -Dcuda-on-cpu=enabled)
building=""
build_status=build/meson-logs/test-command-build.status
every_test=$(( $# == 0 && rounds == 0 ))
if ((every_test)); then
  echo "test.sh: configuring (scripts/build.sh)"
  if ! "${build[@]}" -- build.ninja; then
    wait "$installing" || true
    echo "test.sh: the configuration failed (above), so no test ran" >&2
    exit 1
  fi
  plan=$(cluster_plan) || { echo "test.sh: meson introspect failed (above), so no test ran" >&2; exit 1; }
  { read -ra targets; read -ra cluster_first; read -ra cluster_last; } <<<"$plan"
  echo "test.sh: building what the cluster tests run (${#targets[@]} targets), then the rest beside them"
  build=(scripts/build.sh -- "${targets[@]}")
else
  echo "test.sh: building (scripts/build.sh)"
fi
if ! "${build[@]}"; then
  wait "$installing" || true
  echo "test.sh: the build failed (above), so no test ran" >&2
  exit 1
fi
if ((every_test)); then
  rm -f "$build_status"
  { status=0; scripts/build.sh || status=$?; echo "$status" >"$build_status.new"; mv "$build_status.new" "$build_status"; } &
  building=$!
fi
if ! wait "$installing"; then
  [ -z "$building" ] || wait "$building" || true
  echo "test.sh: installing the packages failed (above), so no test ran" >&2
  exit 1
fi

# cluster_shape: "NODES GPUS" of the local cluster when it is up (healthy or not), else nothing.
cluster_shape() {
  scripts/cluster.sh status 2>/dev/null | sed -nE '1{
    s/^(up|unhealthy): ([0-9]+) node.*, ([0-9]+) GPU.*/\2 \3/p; t
    s/^(up|unhealthy): ([0-9]+) node.*/\2 0/p; }' || true
}
# The tests start the cluster and reshape it as each needs; afterwards it is as it was: stopped
# if they started it, else up in its shape (its jobs gone, as after any reshaping).
cluster_before=$(cluster_shape)
leave_cluster() {
  local now
  now=$(cluster_shape)
  if [ -z "$cluster_before" ] && [ -n "$now" ]; then
    echo "test.sh: stopping the local cluster the tests started"
    scripts/cluster.sh down >/dev/null 2>&1 || true
  elif [ -n "$cluster_before" ] && [ "$now" != "$cluster_before" ]; then
    echo "test.sh: putting the local cluster back as it was before the tests:" \
      "${cluster_before% *} node(s), ${cluster_before#* } GPU(s) per node"
    scripts/cluster.sh up --nodes "${cluster_before% *}" --gpus "${cluster_before#* }" 2>&1 | sed 's/^/  /' || true
  fi
}
if [ -n "$cluster_before" ]; then
  echo "test.sh: the local cluster is up already: the cluster tests use it, and those that reshape it cancel its jobs"
fi

# run_tests [--build-status FILE] LANE [--and LANE]...: meson tests, one per lane at a time and
# the lanes all at once, saying each test as it starts and as it ends, and every 15 s those still
# running. A LANE is meson test arguments [--then meson test arguments]...: a step starts when the
# one before it has ended. Each step writes its results where its --logbase says (testlog by
# default) in build/meson-logs/. With --build-status, the rest of the build goes on beside them,
# and a step whose arguments begin with --after-build waits until FILE holds its exit status; if
# it failed, those steps never start. meson test prints a line as each test ends; the starts come
# from meson's child processes, each a test's command line (meson introspect --tests).
run_tests() {
  python3 - build "$@" <<'PY'
import json, os, select, signal, subprocess, sys, time

build, arguments = sys.argv[1], sys.argv[2:]
build_file = arguments[1] if arguments[:1] == ["--build-status"] else None
lanes = [[[]]]  # each lane's steps to come, each step its arguments
for argument in arguments[2 if build_file else 0:]:
    if argument == "--and":
        lanes.append([[]])
    elif argument == "--then":
        lanes[-1].append([])
    else:
        lanes[-1][-1].append(argument)
QUIET_SECONDS = 14  # a line at least every 15 s: the loop wakes once a second

tests = json.loads(subprocess.run(["meson", "introspect", build, "--tests"], check=True,
                                  capture_output=True, text=True).stdout)
several_suites = len({suite for test in tests for suite in test["suite"]}) > 1

def pretty(test):  # the name meson's result lines give the test
    if not several_suites or not test["suite"]:
        return test["name"]
    project = test["suite"][0].split(":")[0]
    return f"{project}:{'+'.join(s.split(':', 1)[-1] for s in test['suite'])} / {test['name']}"

# By arguments; a program's name may differ from the test's command (an interpreter found
# through a shim that execs the real one: python3 -> python3.11).
by_arguments = {}
for test in tests:
    by_arguments.setdefault(tuple(test["cmd"][1:]), []).append((os.path.basename(test["cmd"][0]), pretty(test)))

def test_of(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = [a.decode(errors="replace") for a in f.read().split(b"\0")[:-1]]
    except OSError:
        return None
    if not argv:
        return None
    for program, name in by_arguments.get(tuple(argv[1:]), []):
        if os.path.basename(argv[0]).startswith(program):
            return name
    return None

def children(parent):
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == parent:
                        pids.append(int(entry))
            except (OSError, IndexError, ValueError):
                pass
    return pids

def say(line):
    sys.stdout.buffer.write(line if isinstance(line, bytes) else line.encode())
    sys.stdout.buffer.write(b"\n")
    sys.stdout.flush()

# Ctrl-C is meson's to handle (it stops the tests and reports them); this relays until they end.
signal.signal(signal.SIGINT, signal.SIG_IGN)
def start_meson(arguments):
    meson = subprocess.Popen(["meson", "test", "-C", build, "--print-errorlogs", *arguments],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    pending[meson.stdout.fileno()] = b""
    return meson

pending = {}  # each output's unfinished line
build_status = None if build_file else 0  # None while it builds
mesons = []
lane_mesons = [None] * len(lanes)  # each lane's step running, or the last one
def start_steps():  # each lane's next step, once the one before it has ended (and the build, where it waits)
    for lane, steps in enumerate(lanes):
        if not steps or (lane_mesons[lane] and lane_mesons[lane].poll() is None):
            continue
        waits = steps[0][:1] == ["--after-build"]
        if waits and build_status is None:
            continue
        if waits and build_status:
            steps.clear()  # the build failed: this step and those after it never start
            continue
        lane_mesons[lane] = start_meson(steps.pop(0)[waits:])
        mesons.append(lane_mesons[lane])
running = {}  # pid -> (name, started), the tests seen running
# When meson last said something or a test started, and when anything was last printed.
last_news = last_said = time.monotonic()
start_steps()
while pending or any(lanes):
    for output in select.select(list(pending), [], [], 1.0)[0]:
        chunk = os.read(output, 65536)
        if not chunk:
            unfinished = pending.pop(output)
            if unfinished:
                say(unfinished)
            continue
        *lines, pending[output] = (pending[output] + chunk).split(b"\n")
        for line in lines:
            say(line)
            last_news = last_said = time.monotonic()
    if build_status is None and os.path.exists(build_file):
        with open(build_file) as status:
            build_status = int(status.read())
        if build_status:
            say("test.sh: the build failed (above), so the tests that need all of it did not run")
    start_steps()
    now = time.monotonic()
    alive = {pid for meson in mesons for pid in children(meson.pid)}
    for pid in list(running):
        if pid not in alive:
            del running[pid]
    for pid in alive - running.keys():
        name = test_of(pid)
        if name:
            running[pid] = (name, now)
            say(f"      start {name}")
            last_news = last_said = now
    if now - last_said >= QUIET_SECONDS:
        if running:
            say("      still running: " + ", ".join(f"{name} ({now - started:.0f} s)"
                                                  for name, started in running.values()))
        else:
            say(f"      meson test: still working, nothing new for {now - last_news:.0f} s")
        last_said = now
sys.exit(max([1 if build_status else 0] + [meson.wait() for meson in mesons]))
PY
}

# count_results LOG...: the plain count of the results in meson's LOGs (build/meson-logs/*.json),
# failing if any failed; a LOG that is not there (its meson test never started) counts nothing.
count_results() {
  python3 - "$@" <<'PY'
import json, os, sys
passed = failed = skipped = 0
for path in filter(os.path.exists, sys.argv[1:]):
    with open(path) as log:
        for line in log:
            result = json.loads(line)["result"]
            if result in ("OK", "EXPECTEDFAIL"):
                passed += 1
            elif result == "SKIP":
                skipped += 1
            else:  # FAIL, TIMEOUT, UNEXPECTEDPASS, ERROR
                failed += 1
print(f"tests: {passed} passed, {failed} failed, {skipped} skipped")
sys.exit(1 if failed else 0)
PY
}

# repeat_results TALLY: adds this round's result of each test to TALLY (lines "NAME RESULT").
repeat_results() {
  python3 -c '
import json
with open("build/meson-logs/testlog.json") as log:
    for line in log:
        entry = json.loads(line)
        print(entry["name"], entry["result"])' >>"$1"
}

busy_loops=()
stop_load() {
  [ ${#busy_loops[@]} -eq 0 ] || kill "${busy_loops[@]}" 2>/dev/null || true
  busy_loops=()
}
trap 'stop_load; leave_cluster' EXIT

if [ "$rounds" -eq 0 ]; then
  meson_status=0
  logs=build/meson-logs
  if [ $# -eq 0 ]; then
    # Every test: the cluster suite (one test at a time, on the one cluster), which spends most of
    # its time waiting for SLURM, starts while the rest builds (its tests that need more than the
    # programs come last, once all is built); once everything is built, the others run two at a
    # time, the longest first: most of them keep one core busy (unit tests, the CUDA code under
    # the sanitizers, fuzzing, one-rank training). Each meson test writes its own log.
    echo "test.sh: running the cluster suite while the rest builds, then the other tests two at a time"
    rm -f "$logs"/cluster.json "$logs"/cluster-last.json "$logs"/others.json
    lanes=()  # the cluster tests by name, where there are any: without names meson test runs all
    [ ${#cluster_first[@]} -eq 0 ] ||
      lanes+=(--no-rebuild --suite cluster --num-processes 1 --logbase cluster "${cluster_first[@]}")
    [ ${#cluster_last[@]} -eq 0 ] || lanes+=(${lanes[0]+--then} --after-build
      --no-rebuild --suite cluster --num-processes 1 --logbase cluster-last "${cluster_last[@]}")
    lanes+=(${lanes[0]+--and} --after-build --no-rebuild --no-suite cluster --num-processes 2 --logbase others)
    run_tests --build-status "$build_status" "${lanes[@]}" || meson_status=$?
    wait "$building" || true
    results=("$logs"/cluster.json "$logs"/cluster-last.json "$logs"/others.json)
  else
    echo "test.sh: running the tests (meson test)"
    run_tests "$@" || meson_status=$?
    results=("$logs"/testlog.json)
  fi
  stop_load
  leave_cluster
  trap - EXIT
  count_results "${results[@]}"
  exit $meson_status
fi

for ((i = 0; i < load; i++)); do
  bash -c 'while :; do :; done' &
  busy_loops+=($!)
done
tally=$(mktemp)
for ((round = 1; round <= rounds; round++)); do
  echo "test.sh: round $round of $rounds of $* ($load busy loop(s) beside)"
  run_tests "$@" || true
  repeat_results "$tally"
done
stop_load
leave_cluster
trap - EXIT
python3 - "$tally" "$rounds" <<'PY'
import collections, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    name, result = line.rstrip("\n").rsplit(" ", 1)  # meson's names hold spaces ("suite / test")
    runs[name].append(result)
total = passed = 0
for name, results in runs.items():
    ok = sum(result in ("OK", "EXPECTEDFAIL") for result in results)
    others = collections.Counter(result for result in results if result not in ("OK", "EXPECTEDFAIL"))
    print(f"repeat: {name}: {ok} of {len(results)} passed" + "".join(f", {n} {r}" for r, n in others.items()))
    total += len(results)
    passed += ok
print(f"repeat: {sys.argv[2]} rounds, {passed} of {total} runs passed")
sys.exit(0 if passed == total else 1)
PY
