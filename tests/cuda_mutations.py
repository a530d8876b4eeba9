#!/usr/bin/env python3
"""Mutation checks on the CPU implementation of CUDA (cuda_on_cpu/): planted bugs that a test
must catch, each by what is meant to catch it.

Each mutation plants a bug in a copy of one source, compiles the copy with the build's own
command for the original (compile_commands.json), links the program under test again with it in
the original's place (ninja's link command), and runs the test group meant for it. Two sets:

kernels (the kernels' test, test_cuda_kernels, on the sanitized CPU backend, under two
schedules), classic GPU bugs in copies of kernels/cuda/'s sources:
  - an off-by-one store (attention's guard on the rows past the sequence): AddressSanitizer
    reports a heap-buffer-overflow WRITE, as compute-sanitizer's memcheck would on a GPU;
  - a removed barrier before a shared-memory tile is reused (attention's key and value tiles):
    results off the CPU reference, and different bits under the two fiber schedules;
  - a shuffle reached by half a warp (the loss's row sum): a deadlock report naming the
    shuffle, the block and where each of its threads waits (the other half at the block's next
    barrier);
  - RoPE's halves taken as interleaved pairs (GPT-J's layout, not Hugging Face's rotate_half):
    results off the CPU reference, forward and backward.
  - grouped-query attention's query heads mapped to their key/value heads in the interleaved
    order (h % kv_heads, repeat_interleave's) instead of Hugging Face's repeat_kv order
    (h / (heads / kv_heads)): the grouped-query cases' out and gradients off the CPU reference.
cuda_on_cpu (the implementation's own tests), mistakes in copies of its sources:
  - the bias added along D's columns instead of its rows (cublaslt.cpp): the BIAS epilogue's D
    is wrong (test_cuda_on_cpu's epilogues group);
  - GELU_AUX_BIAS not storing the GELU's input in the aux matrix (cublaslt.cpp): its aux check
    fails (the epilogues group);
  - mma's A fragment with the rows and columns of its registers 1 and 2 exchanged
    (matrix_fragments.cpp): D is wrong (test_tensor_cores_on_cpu's mma group);
  - ldmatrix .trans giving a lane the second element of its pair twice (matrix_fragments.cpp):
    the transposed loads are wrong (the ldmatrix group);
  - cp.async's wait_group completing one group more than it covers (execution.cpp): the planted
    read one wait too early finds data, not the poison (the planted group).
A mutation whose text no longer occurs exactly once in its source fails the test: the check
must be brought up to date with the source, never left to pass without mutating anything.

Usage: cuda_mutations.py kernels BUILD_DIR TEST_CUDA_KERNELS ASAN_RUNTIME
       cuda_mutations.py cuda_on_cpu BUILD_DIR
         (after building tests/test_cuda_on_cpu and tests/test_tensor_cores_on_cpu)
"""
import json
import os
import pathlib
import shlex
import subprocess
import sys
import tempfile

BACKEND = "kernels/libtrainctl-cuda-on-cpu-asan.so"
CUDA_ON_CPU_TEST = "tests/test_cuda_on_cpu"
TENSOR_CORES_TEST = "tests/test_tensor_cores_on_cpu"
CUDA_ON_CPU_LIBRARY = "cuda_on_cpu/libcuda_on_cpu-asan.a"

KERNEL_MUTATIONS = [
    {
        "name": "off-by-one store",
        "file": "kernels/cuda/attention.cu",
        "old": "  if (i >= seq) return;\n  const float inverse_sum = 1.0f / running_sum;",
        "new": "  if (i > seq) return;\n  const float inverse_sum = 1.0f / running_sum;",
        "group": "attention",
        "expect": ["ERROR: AddressSanitizer: heap-buffer-overflow", "WRITE of size 4", "attention_forward_kernel"],
    },
    {
        "name": "removed barrier before a shared-memory reuse",
        "file": "kernels/cuda/attention.cu",
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
        "expect": ["[FAIL] attention f32 B=2 T=37 H=3 KV=3 (d=16) out: worst",
                   "[FAIL] attention f32 B=2 T=37 H=3 KV=3 (d=16) out: differs under schedules in-order and reversed"],
    },
    {
        "name": "a shuffle reached by half a warp",
        "file": "kernels/cuda/loss.cu",
        "old": "    denominator = warp_sum(denominator);\n",
        "new": "    if (lane < 16) denominator = warp_sum(denominator);\n",
        "group": "softmax_cross_entropy",
        "expect": ["cuda_on_cpu: deadlock in ", "softmax_cross_entropy_kernel", "block (0,0,0)",
                   "threads 0-15 (first (0,0,0), warp 0 lane 0): waits at __shfl_xor_sync(mask 0xffffffff)",
                   "threads 16-255 (first (16,0,0), warp 0 lane 16): waits at __syncthreads()"],
    },
    {
        "name": "RoPE's halves as interleaved pairs",
        "file": "kernels/cuda/rope.cu",
        "old": (
            "      const float x1 = widen(head[i]), x2 = widen(head[i + half]);\n"
            "      const float c = cos[table_row + i], s = sign * sin[table_row + i];\n"
            "      head[i] = narrow<T>(x1 * c - x2 * s);\n"
            "      head[i + half] = narrow<T>(x2 * c + x1 * s);\n"
        ),
        "new": (
            "      const float x1 = widen(head[2 * i]), x2 = widen(head[2 * i + 1]);\n"
            "      const float c = cos[table_row + i], s = sign * sin[table_row + i];\n"
            "      head[2 * i] = narrow<T>(x1 * c - x2 * s);\n"
            "      head[2 * i + 1] = narrow<T>(x2 * c + x1 * s);\n"
        ),
        "group": "rope",
        "expect": ["[FAIL] rope f32 B=2 T=5 H=3 KV=1 d=8 forward: worst",
                   "[FAIL] rope bf16 B=2 T=37 H=4 KV=2 d=64 backward: worst"],
    },
    {
        "name": "grouped-query heads mapped in the interleaved order",
        "file": "kernels/cuda/attention.cu",
        "old": "    const int kv = layout.kv_head(h);\n",
        "new": "    const int kv = h % layout.kv_heads;\n",
        "group": "attention_gqa",
        "expect": ["[FAIL] attention f32 B=2 T=70 H=6 KV=2 (d=32) out: worst",
                   "[FAIL] attention f32 B=2 T=70 H=6 KV=2 (d=32) grad_qkv: worst",
                   "[FAIL] attention f32 B=1 T=65 H=4 KV=2 (d=128) out: worst"],
    },
]

CUDA_ON_CPU_MUTATIONS = [
    {
        "name": "the bias added along D's columns",
        "file": "cuda_on_cpu/cublaslt.cpp",
        "old": "value += load(type, bias, static_cast<int64_t>(row));",
        "new": "value += load(type, bias, static_cast<int64_t>(col));",
        "test": CUDA_ON_CPU_TEST,
        "group": "epilogues",
        "expect": ["[FAIL] epilogue BIAS NN A,B fp32 C,D fp32: D, padding kept, exactly",
                   "[FAIL] epilogue BIAS TT A,B bf16 C,D bf16: D, padding kept, exactly"],
    },
    {
        "name": "the GELU's input not stored in the aux matrix",
        "file": "cuda_on_cpu/cublaslt.cpp",
        "old": "        if ((steps & kStoreAux) != 0) store(type, aux, aux_at, value);\n",
        "new": "",
        "test": CUDA_ON_CPU_TEST,
        "group": "epilogues",
        "expect": ["[FAIL] epilogue GELU_AUX_BIAS NN A,B fp32 C,D fp32: aux = the GELU's input, padding kept, exactly",
                   "[FAIL] epilogue GELU_AUX_BIAS TT A,B bf16 C,D bf16: aux = the GELU's input, padding kept, exactly"],
    },
    {
        "name": "mma's A registers 1 and 2 exchanged",
        "file": "cuda_on_cpu/matrix_fragments.cpp",
        "old": "a[group + 8 * (i / 2 % 2)][in_group * 2 + (i & 1) + 8 * (i / 4)]",
        "new": "a[group + 8 * (i / 4)][in_group * 2 + (i & 1) + 8 * (i / 2 % 2)]",
        "test": TENSOR_CORES_TEST,
        "group": "mma",
        "expect": ["[FAIL] mma.sync m16n8k16 bf16, small integers: D = A B + C, every element bitwise",
                   "[FAIL] mma.sync chained over k = 32 (D the next C): D = A B + C"],
    },
    {
        "name": "ldmatrix .trans giving the second element twice",
        "file": "cuda_on_cpu/matrix_fragments.cpp",
        "old": "transposed ? element_at(rows[first], lane / 4)",
        "new": "transposed ? element_at(rows[first + 1], lane / 4)",
        "test": TENSOR_CORES_TEST,
        "group": "ldmatrix",
        "expect": ["[FAIL] ldmatrix.m8n8.x1.trans: ", "[FAIL] ldmatrix.m8n8.x4.trans: ",
                   "[ OK ] ldmatrix.m8n8.x4: "],
    },
    {
        "name": "cp.async's wait_group completing one group more",
        "file": "cuda_on_cpu/execution.cpp",
        "old": "return copy.group + static_cast<uint64_t>(pending_groups) < thread.committed_groups;",
        "new": "return copy.group + static_cast<uint64_t>(pending_groups) <= thread.committed_groups;",
        "test": TENSOR_CORES_TEST,
        "group": "planted",
        "expect": ["[FAIL] planted: each cp.async part read one wait too early: caught, every word the shared-memory "
                   "poison (0xFFFFFFFF)"],
    },
]


def compile_command(build_dir, compiled, output_part):
    """The build's command that compiles `compiled` (as compile_commands.json names it) into an
    output whose path contains `output_part`, and that output."""
    for entry in json.loads((build_dir / "compile_commands.json").read_text()):
        if entry["file"] == compiled and output_part in entry["output"]:
            return entry["command"], entry["output"]
    sys.exit(f"FAIL: no command compiles {compiled} into *{output_part}* (compile_commands.json)")


def compile_mutant(build_dir, compiled, output_part, source, mutant_object):
    """Compiles `source` as the build compiles `compiled`, into `mutant_object`; returns the
    original's object file."""
    command, output = compile_command(build_dir, compiled, output_part)
    kept = []
    skip = 0
    for word in shlex.split(command):
        if skip:
            skip -= 1
            continue
        if word in ("-MQ", "-MF"):
            skip = 1
            continue
        if word == "-MD":
            continue
        kept.append(word)
    kept[kept.index("-o") + 1] = str(mutant_object)
    kept[kept.index("-c") + 1] = str(source)
    subprocess.run(kept, cwd=build_dir, check=True)
    return output


def link_command(build_dir, target, output):
    """ninja's command that links `target`, writing `output` instead."""
    commands = subprocess.run(["ninja", "-C", str(build_dir), "-t", "commands", target], check=True,
                              capture_output=True, text=True).stdout.strip().splitlines()
    link = shlex.split(commands[-1])
    link[link.index("-o") + 1] = str(output)
    return link


def mutant_source(source_dir, work, mutation):
    """A copy of the mutation's source with the mutation planted."""
    source = source_dir / mutation["file"]
    text = source.read_text()
    occurrences = text.count(mutation["old"])
    if occurrences != 1:
        sys.exit(f"FAIL: mutation '{mutation['name']}': its text occurs {occurrences} times in {source}, "
                 "not once; update tests/cuda_mutations.py to the source as it is now")
    mutant = work / pathlib.Path(mutation["file"]).name
    mutant.write_text(text.replace(mutation["old"], mutation["new"]))
    return mutant


def build_mutant_backend(build_dir, source_dir, work, mutation):
    """The sanitized CPU backend with the mutant kernel source, compiled through a wrapper as
    the build compiles kernels/<file>.cpp."""
    mutant = mutant_source(source_dir, work, mutation)
    wrapper = work / (mutant.name + ".cpp")
    wrapper.write_text(f'#include "{mutant}"\n')
    mutant_object = work / (mutant.name + ".o")
    original = compile_mutant(build_dir, "kernels/" + mutant.name + ".cpp", "-asan.so.p", wrapper, mutant_object)
    mutant_backend = work / "libmutant.so"
    link = [str(mutant_object) if word == original else word
            for word in link_command(build_dir, BACKEND, mutant_backend)]
    subprocess.run(link, cwd=build_dir, check=True)
    return str(mutant_backend)


def build_mutant_test(build_dir, source_dir, work, mutation):
    """The mutation's test program linked with the mutant object ahead of the sanitized library,
    whose own copy of that object the linker then leaves out (every symbol it defines is
    defined)."""
    mutant = mutant_source(source_dir, work, mutation)
    mutant_object = work / (mutant.name + ".o")
    compile_mutant(build_dir, "../" + mutation["file"], "libcuda_on_cpu-asan.a.p", mutant, mutant_object)
    program = work / pathlib.Path(mutation["test"]).name
    link = link_command(build_dir, mutation["test"], program)
    link.insert(link.index(CUDA_ON_CPU_LIBRARY), str(mutant_object))
    subprocess.run(link, cwd=build_dir, check=True)
    return str(program)


def caught(mutation, run):
    """Whether the run failed with every expected part in its output; prints the verdict."""
    output = run.stdout + run.stderr
    missing = [part for part in mutation["expect"] if part not in output]
    found = run.returncode != 0 and not missing
    print(f"[{' OK ' if found else 'FAIL'}] {mutation['name']} ({mutation['file']}): "
          f"the {mutation['group']} group exits {run.returncode}" +
          ("" if found else f"; missing from its output: {missing}"))
    lines = [line for line in output.splitlines()
             if any(part in line for part in mutation["expect"]) or "SUMMARY" in line]
    for line in lines[:6]:
        print("    " + line)
    if not found:
        print(output[-4000:])
    return found


def main():
    if tuple(sys.argv[1:2]) + (len(sys.argv),) not in (("kernels", 5), ("cuda_on_cpu", 3)):
        sys.exit("usage: " + __doc__.split("Usage: ")[1])
    kind, build_dir = sys.argv[1], pathlib.Path(sys.argv[2])
    source_dir = pathlib.Path(__file__).resolve().parent.parent
    mutations = KERNEL_MUTATIONS if kind == "kernels" else CUDA_ON_CPU_MUTATIONS
    failures = 0
    with tempfile.TemporaryDirectory(prefix="trainctl-mutants.") as temporary:
        for number, mutation in enumerate(mutations):
            work = pathlib.Path(temporary) / str(number)
            work.mkdir()
            if kind == "kernels":
                backend = build_mutant_backend(build_dir, source_dir, work, mutation)
                environment = dict(os.environ, TRAINCTL_CUDA_BACKEND=backend, LD_PRELOAD=sys.argv[4],
                                   ASAN_OPTIONS="detect_leaks=0", UBSAN_OPTIONS="halt_on_error=1")
                command = [sys.argv[3], "--only", mutation["group"], "--schedules", "in-order,reversed"]
            else:
                command = [build_mutant_test(build_dir, source_dir, work, mutation), "--only", mutation["group"]]
                environment = dict(os.environ, ASAN_OPTIONS="detect_leaks=0", UBSAN_OPTIONS="halt_on_error=1")
            run = subprocess.run(command, env=environment, capture_output=True, text=True, timeout=600)
            failures += not caught(mutation, run)
    print(f"{len(mutations)} mutations, {failures} not caught")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
