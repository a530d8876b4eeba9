#!/usr/bin/env python3
"""Compares the training-loss curves of two runs, step by step.

Usage: compare_curves.py REFERENCE_RUN RUN --tolerance REL [--steps N] [--curve FILE.tsv]

Reads each run directory's metrics.jsonl (a step a resumed run logged again counts once, as it
was logged last) and requires both runs to have logged the same steps (N of them, when given),
and every loss of RUN within REL relative of REFERENCE_RUN's at the same step. Prints the
largest and mean relative difference of each quarter of the curve and the worst step; writes
the whole curve to FILE.tsv when given. Exit 0 when every step is within the tolerance, 1
otherwise. The tests (tests/integration/) and scripts/gpu_check.sh compare curves with it.
"""
import argparse
import json
import pathlib
import sys


def losses(run):
    by_step = {}
    with open(pathlib.Path(run) / "metrics.jsonl") as metrics:
        for line in metrics:
            record = json.loads(line)
            if "loss" in record and "event" not in record:
                by_step[record["step"]] = record["loss"]
    return by_step


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    parser.add_argument("reference")
    parser.add_argument("run")
    parser.add_argument("--tolerance", type=float, required=True)
    parser.add_argument("--steps", type=int)
    parser.add_argument("--curve")
    args = parser.parse_args()
    reference, run = losses(args.reference), losses(args.run)
    steps = sorted(reference)
    if sorted(run) != steps or (args.steps is not None and len(steps) != args.steps):
        sys.exit(f"FAIL: {args.reference} logged {len(reference)} steps, {args.run} {len(run)}"
                 + (f", expected {args.steps} each" if args.steps is not None else "")
                 + "; they must log the same steps")
    relative = [abs(run[s] - reference[s]) / abs(reference[s]) for s in steps]
    if args.curve:
        with open(args.curve, "w") as curve:
            curve.write("step\treference\trun\trelative\n")
            for step, difference in zip(steps, relative):
                curve.write(f"{step}\t{reference[step]:.9g}\t{run[step]:.9g}\t{difference:.3g}\n")
    window = max(len(steps) // 4, 1)
    for first in range(0, len(steps), window):
        part = relative[first:first + window]
        print(f"steps {steps[first]}-{steps[first + len(part) - 1]}: largest relative difference {max(part):.3g}, "
              f"mean {sum(part) / len(part):.3g}")
    worst = max(range(len(steps)), key=lambda i: relative[i])
    step = steps[worst]
    print(f"worst step {step}: {reference[step]:.9g} against {run[step]:.9g}, relative {relative[worst]:.3g} "
          f"(tolerance {args.tolerance:g}), {len(steps)} steps compared")
    return 0 if relative[worst] <= args.tolerance else 1


if __name__ == "__main__":
    sys.exit(main())
