#!/usr/bin/env python3
"""The real CUDA build's attention runs on tensor cores: kernels/cuda/flash_attention.cu, compiled
to PTX for sm_90 with the build's own nvcc command (compile_commands.json), holds in each of the
tensor-core attention kernels (the forward and the two backward passes) the bf16 mma.sync
m16n8k16 with fp32 accumulators, ldmatrix and cp.async. (On the GPU machine,
`scripts/gpu_check.sh tensorcores` also finds HMMA in their SASS with cuobjdump.)

Usage: tensor_core_ptx.py BUILD_DIR
"""
import json
import pathlib
import re
import shlex
import subprocess
import sys
import tempfile

KERNELS = ["forward_kernel", "key_gradients_kernel", "query_gradients_kernel"]
INSTRUCTIONS = ["mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", "ldmatrix.sync.aligned", "cp.async"]


def nvcc_command(build):
    for entry in json.loads((build / "compile_commands.json").read_text()):
        if entry["file"].endswith("kernels/cuda/flash_attention.cu") and "libtrainctl-cuda.so" in entry["output"]:
            return shlex.split(entry["command"]), entry["directory"]
    print("SKIP: this build has no CUDA backend built with nvcc")
    sys.exit(77)


def main():
    build = pathlib.Path(sys.argv[1]).resolve()
    command, directory = nvcc_command(build)
    # The same flags, but one virtual architecture, to PTX.
    kept, skip = [], False
    for word in command:
        if skip:
            skip = False
        elif word in ("-gencode", "-o"):
            skip = True
        elif word != "-c":
            kept.append(word)
    with tempfile.TemporaryDirectory() as temporary:
        ptx_file = pathlib.Path(temporary) / "flash_attention.ptx"
        subprocess.run(kept[:-1] + ["-arch=compute_90", "-ptx", "-o", str(ptx_file), kept[-1]], cwd=directory,
                       check=True)
        ptx = ptx_file.read_text()
    # Each entry's body: from `.entry NAME(` to the next entry.
    entries = re.split(r"\n\s*(?:\.visible\s+)?\.entry\s+", ptx)[1:]
    failures = 0
    for kernel in KERNELS:
        bodies = [body for body in entries if "flash" in body.split("(", 1)[0] and kernel in body.split("(", 1)[0]]
        if not bodies:
            print(f"FAIL: no tensor-core attention kernel {kernel} in the PTX")
            failures += 1
            continue
        for body in bodies:
            name = body.split("(", 1)[0]
            counts = {instruction: body.count(instruction) for instruction in INSTRUCTIONS}
            missing = [instruction for instruction, count in counts.items() if count == 0]
            print(f"{'FAIL' if missing else ' OK '} {name}: " +
                  ", ".join(f"{count} {instruction}" for instruction, count in counts.items()))
            failures += bool(missing)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
