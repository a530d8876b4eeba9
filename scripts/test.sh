#!/usr/bin/env bash
# The test command (README, .ci/run): installs what the tests need, builds, runs every meson
# test (unit, local integration, and the cluster tests, which start the local SLURM cluster
# themselves), stops the cluster, and ends with the plain count computed from meson's
# testlog.json:  tests: N passed, N failed, N skipped
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
# The npm packages the tokenizer tests take as their oracle, installed once here rather than by
# two tests at once into one cache; where npm cannot reach its registry those tests skip.
bash -c 'source tests/integration/tiktoken_npm.sh && install_tiktoken_npm' || true
# The CUDA code's tests run on the CPU implementation of CUDA: a build that cannot make it fails
# here with the reason, instead of leaving those tests out.
if ! scripts/build.sh -Dcuda-on-cpu=enabled; then
  echo "test.sh: the build failed (above), so no test ran" >&2
  exit 1
fi
trap 'scripts/cluster.sh down >/dev/null 2>&1 || true' EXIT

meson_status=0
meson test -C build --print-errorlogs || meson_status=$?

python3 - build/meson-logs/testlog.json <<'PY'
import json, sys
passed = failed = skipped = 0
with open(sys.argv[1]) as log:
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
exit $meson_status
