#!/usr/bin/env python3
"""Finds pipelines whose reader may stop before its writer has finished: grep -q at the end of a
pipe (and grep's -m, --quiet, --silent, --max-count), and head there. The reader exits at its
first match or line and closes the pipe; a writer still writing dies of SIGPIPE, and under
`set -o pipefail` that fails the pipeline, or not, depending on timing (issue 28: `ckpt inspect`
piped into grep -q failed cluster_four_node one run in three). Capture the output first (`out=$(cmd)` and
`grep -q … <<<"$out"`, or a file), or use a reader that reads to the end (`sed -n 1p`).

Usage: scripts/shell_lint.py [PATH...]   (default: tests/ and scripts/ of this checkout)
Prints FILE:LINE: the line, for each finding; exits 1 if there is any, else 0."""
import os
import re
import sys

# A single `|` (not `||`), then the early-stopping reader. grep's short options may be bundled
# (-qE, -Fxq) or give -m its count (-m1).
EARLY_READER = re.compile(
    r"(?<!\|)\|(?!\|)\s*"
    r"(?:grep\b(?:\s+-(?:-(?:quiet|silent|max-count)\b|[A-Za-z]*[qm]))"
    r"|(?:head)\b)")


def files_under(path):
    if os.path.isfile(path):
        yield path
        return
    for root, dirs, names in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
        for name in sorted(names):
            yield os.path.join(root, name)


def findings(path):
    try:
        with open(path, encoding="utf-8") as text:
            lines = text.read().splitlines()
    except (UnicodeDecodeError, OSError):
        return  # not text: nothing of a shell's here
    for number, line in enumerate(lines, 1):
        if EARLY_READER.search(line):
            yield number, line.strip()


def main(paths):
    if not paths:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        paths = [os.path.join(root, "tests"), os.path.join(root, "scripts")]
    found = 0
    for path in paths:
        for file in files_under(path):
            for number, line in findings(file):
                print(f"{file}:{number}: {line}")
                found += 1
    if found:
        print(f"shell_lint: {found} pipeline(s) whose reader may stop early; capture the output first "
              "(see scripts/shell_lint.py)", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
