"""Where a run's GPU time goes, from Nsight Compute's per-launch CSV (scripts/gpu_check.sh's
profile step: `ncu --metrics gpu__time_duration.sum --csv --page raw --log-file FILE`): the
launches grouped by kernel, template arguments kept (a bf16 and an fp32 instance are different
costs) and parameter lists dropped, the costliest first, each with its share of the whole.
Usage: python3 scripts/kernel_profile.py FILE.csv [--top 12]
"""
import argparse
import csv
import re
import sys
from collections import defaultdict

SECONDS_PER_UNIT = {"nsecond": 1e-9, "ns": 1e-9, "usecond": 1e-6, "us": 1e-6, "msecond": 1e-3, "ms": 1e-3,
                    "second": 1.0, "s": 1.0}
TIME_METRIC = "gpu__time_duration.sum"


def kernel_group(name):
    name = re.sub(r"^void ", "", name.strip())
    depth = 0
    for i, c in enumerate(name):  # the parameter list opens at the first '(' outside <...>
        depth += c == "<"
        depth -= c == ">"
        if c == "(" and depth == 0:
            return name[:i]
    return name


def launches(path):
    """(kernel name, seconds) of each launch; ncu's own messages (==PROF==, ==WARNING==) and the
    program's output interleave with the CSV and are skipped."""
    with open(path, newline="") as f:
        lines = [line for line in f if line.startswith('"')]
    rows = csv.reader(lines)
    header = next((row for row in rows if "Kernel Name" in row and TIME_METRIC in row), None)
    if header is None:
        sys.exit(f"{path}: no per-launch table with 'Kernel Name' and {TIME_METRIC}")
    name_at, time_at = header.index("Kernel Name"), header.index(TIME_METRIC)
    unit = None
    for row in rows:
        if len(row) <= max(name_at, time_at):
            continue
        if not row[0]:  # the units row under the header
            unit = row[time_at]
            continue
        value = row[time_at].replace(",", "")
        if unit not in SECONDS_PER_UNIT:
            sys.exit(f"{path}: unknown unit {unit!r} of {TIME_METRIC}")
        yield row[name_at], float(value) * SECONDS_PER_UNIT[unit]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("csv")
    parser.add_argument("--top", type=int, default=12)
    args = parser.parse_args()
    total = defaultdict(float)
    count = defaultdict(int)
    for name, seconds in launches(args.csv):
        group = kernel_group(name)
        total[group] += seconds
        count[group] += 1
    whole = sum(total.values())
    if not whole:
        sys.exit(f"{args.csv}: no kernel launches")
    print(f"{sum(count.values())} launches of {len(total)} kernels, {whole * 1e3:.1f} ms of GPU time")
    print(f"{'share':>6} {'ms':>9} {'launches':>8} {'mean us':>9}  kernel")
    for group in sorted(total, key=total.get, reverse=True)[: args.top]:
        print(f"{total[group] / whole:6.1%} {total[group] * 1e3:9.2f} {count[group]:8d} "
              f"{total[group] / count[group] * 1e6:9.1f}  {group[:110]}")


if __name__ == "__main__":
    main()
