#!/usr/bin/env python3
"""Mutation checks of the CUDA kernels' tests on the CPU implementation of CUDA (cuda_on_cpu/).

Each mutation plants a classic GPU bug in a copy of one of kernels/cuda/'s sources, builds the
sanitized CPU backend again with that copy in place of the original (the build's own compile
and link commands, taken from compile_commands.json and ninja), and runs the kernels' test
group for it under two schedules. The mutant must be caught, and caught by what is meant to
catch it:
  - an off-by-one store (attention's guard on the rows past the sequence): AddressSanitizer
    reports a heap-buffer-overflow WRITE, as compute-sanitizer's memcheck would on a GPU;
  - a removed barrier before a shared-memory tile is reused (attention's key and value tiles):
    results off the CPU reference, and different bits under the two fiber schedules;
  - a shuffle reached by half a warp (the loss's row sum): a deadlock report naming the
    shuffle, the block and where each of its threads waits (the other half at the block's next
    barrier).
A mutation whose text no longer occurs exactly once in its source fails the test: the check
must be brought up to date with the kernel, never left to pass without mutating anything.

Usage: cuda_mutations.py BUILD_DIR TEST_CUDA_KERNELS ASAN_RUNTIME
"""
import json
import os
import pathlib
import shlex
import subprocess
import sys
import tempfile

BACKEND = "kernels/libtrainctl-cuda-on-cpu-asan.so"

MUTATIONS = [
    {
        "name": "off-by-one store",
        "file": "attention.cu",
        "old": "  if (i >= seq) return;\n  const float inverse_sum = 1.0f / running_sum;",
        "new": "  if (i > seq) return;\n  const float inverse_sum = 1.0f / running_sum;",
        "group": "attention",
        "expect": ["ERROR: AddressSanitizer: heap-buffer-overflow", "WRITE of size 4", "attention_forward_kernel"],
    },
    {
        "name": "removed barrier before a shared-memory reuse",
        "file": "attention.cu",
        "old": (
            "  float running_max = -INFINITY, running_sum = 0.0f;\n\n"
            "  const int64_t key_end = min(seq, first_query + kTile);\n"
            "  for (int64_t first_key = 0; first_key < key_end; first_key += kTile) {\n"
            "    __syncthreads();  // the previous tile's readers are done\n"
        ),
        "new": (
            "  float running_max = -INFINITY, running_sum = 0.0f;\n\n"
            "  const int64_t key_end = min(seq, first_query + kTile);\n"
            "  for (int64_t first_key = 0; first_key < key_end; first_key += kTile) {\n"
        ),
        "group": "attention",
        "expect": ["[FAIL] attention f32 B=2 T=37 C=48 H=3 (d=16) out: worst",
                   "[FAIL] attention f32 B=2 T=37 C=48 H=3 (d=16) out: differs under schedules in-order and reversed"],
    },
    {
        "name": "a shuffle reached by half a warp",
        "file": "loss.cu",
        "old": "    denominator = warp_sum(denominator);\n",
        "new": "    if (lane < 16) denominator = warp_sum(denominator);\n",
        "group": "softmax_cross_entropy",
        "expect": ["cuda_on_cpu: deadlock in ", "softmax_cross_entropy_kernel", "block (0,0,0)",
                   "threads 0-15 (first (0,0,0), warp 0 lane 0): waits at __shfl_xor_sync(mask 0xffffffff)",
                   "threads 16-255 (first (16,0,0), warp 0 lane 16): waits at __syncthreads()"],
    },
]


def compile_command(build_dir, wrapper):
    """The build's command that compiles `wrapper` (kernels/<file>.cpp) into the sanitized backend."""
    for entry in json.loads((build_dir / "compile_commands.json").read_text()):
        if entry["file"] == wrapper and "-asan.so.p" in entry["output"]:
            return entry["command"], entry["output"]
    sys.exit(f"FAIL: {wrapper} is not compiled into {BACKEND} (compile_commands.json)")


def link_command(build_dir):
    commands = subprocess.run(["ninja", "-C", str(build_dir), "-t", "commands", BACKEND], check=True,
                              capture_output=True, text=True).stdout.strip().splitlines()
    return commands[-1]


def build_mutant(build_dir, source_dir, work, mutation):
    source = source_dir / "kernels" / "cuda" / mutation["file"]
    text = source.read_text()
    occurrences = text.count(mutation["old"])
    if occurrences != 1:
        sys.exit(f"FAIL: mutation '{mutation['name']}': its text occurs {occurrences} times in {source}, "
                 "not once; update tests/cuda_mutations.py to the kernel as it is now")
    mutant_source = work / mutation["file"]
    mutant_source.write_text(text.replace(mutation["old"], mutation["new"]))
    wrapper = work / (mutation["file"] + ".cpp")
    wrapper.write_text(f'#include "{mutant_source}"\n')

    command, output = compile_command(build_dir, "kernels/" + mutation["file"] + ".cpp")
    words = shlex.split(command)
    mutant_object = str(work / (mutation["file"] + ".o"))
    kept = []
    skip = 0
    for word in words:
        if skip:
            skip -= 1
            continue
        if word in ("-MQ", "-MF"):
            skip = 1
            continue
        if word == "-MD":
            continue
        kept.append(word)
    kept[kept.index("-o") + 1] = mutant_object
    kept[kept.index("-c") + 1] = str(wrapper)
    subprocess.run(kept, cwd=build_dir, check=True)

    link = shlex.split(link_command(build_dir))
    link = [mutant_object if word == output else word for word in link]
    mutant_backend = str(work / "libmutant.so")
    link[link.index("-o") + 1] = mutant_backend
    subprocess.run(link, cwd=build_dir, check=True)
    return mutant_backend


def main():
    build_dir, test_program, asan_runtime = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    source_dir = pathlib.Path(__file__).resolve().parent.parent
    failures = 0
    with tempfile.TemporaryDirectory(prefix="trainctl-mutants.") as temporary:
        for number, mutation in enumerate(MUTATIONS):
            work = pathlib.Path(temporary) / str(number)
            work.mkdir()
            backend = build_mutant(build_dir, source_dir, work, mutation)
            environment = dict(os.environ, TRAINCTL_CUDA_BACKEND=backend, LD_PRELOAD=asan_runtime,
                               ASAN_OPTIONS="detect_leaks=0", UBSAN_OPTIONS="halt_on_error=1")
            run = subprocess.run([test_program, "--only", mutation["group"], "--schedules", "in-order,reversed"],
                                 env=environment, capture_output=True, text=True, timeout=600)
            output = run.stdout + run.stderr
            missing = [part for part in mutation["expect"] if part not in output]
            caught = run.returncode != 0 and not missing
            print(f"[{' OK ' if caught else 'FAIL'}] {mutation['name']} ({mutation['file']}): "
                  f"the {mutation['group']} group exits {run.returncode}" +
                  ("" if caught else f"; missing from its output: {missing}"))
            lines = [line for line in output.splitlines()
                     if any(part in line for part in mutation["expect"]) or "SUMMARY" in line]
            for line in lines[:6]:
                print("    " + line)
            if not caught:
                print(output[-4000:])
                failures += 1
    print(f"{len(MUTATIONS)} mutations, {failures} not caught")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
