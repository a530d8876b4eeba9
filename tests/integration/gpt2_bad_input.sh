#!/usr/bin/env bash
# What the runtime refuses for a gpt2 run, each with exit 2 and a message naming the key and the
# file: token files that are not llm.c's format or do not fit the model, a tokenizer that cannot
# be read or has more tokens than the model, a checkpoint of another model kind or shape, and a
# CUDA device that cannot be used here.
source "$(dirname "$0")/lib.sh"
make_token_data

expect_message() { grep -qF -- "$1" err.txt || fail "expected \"$1\" in: $(cat err.txt)"; }

gpt2=(model.kind='"gpt2"' job.ranks_per_node=1 train.steps=4 checkpoint.every_steps=2)

# Token files: the runtime names the key, then the file and the problem (--no-preflight: the CLI's
# header check would refuse these first; cli_errors.sh tests that).
python3 - <<'PY'
import struct
def header(magic=20240520, version=1, count=64):
    return struct.pack("<256i", magic, version, count, *([0] * 253))
tokens = struct.pack("<64H", *range(64))
open("data/bad_magic.bin", "wb").write(header(magic=1234) + tokens)
open("data/bad_version.bin", "wb").write(header(version=7) + tokens)
open("data/truncated.bin", "wb").write(header(count=64) + tokens[:100])
open("data/short.bin", "wb").write(header(count=20) + tokens[:40])
PY
for case in bad_magic bad_version truncated short; do
  write_config "$case.toml" "$case" "${gpt2[@]}" data.train="\"data/$case.bin\""
  expect_exit 2 "$TRAINCTL" run --no-preflight "$case.toml"
  expect_message "data.train: "
  expect_message "$work/data/$case.bin"
done
expect_exit 2 "$TRAINCTL" run --no-preflight bad_magic.toml
expect_message "magic"
# Fewer sequences than one global batch: the runtime names the key and the file.
write_config too_small.toml too_small "${gpt2[@]}" data.train='"data/short.bin"' model.block_size=8 train.micro_batch=4
expect_exit 2 "$TRAINCTL" run --no-preflight too_small.toml
expect_message "data.train: $work/data/short.bin: the dataset has"
write_config vocab.toml vocab "${gpt2[@]}" model.vocab_size=100
expect_exit 2 "$TRAINCTL" run vocab.toml
expect_message "data.train: "
expect_message "model.vocab_size"

# data.tokenizer: a directory that holds none (the CLI's preflight, then the runtime), and one of
# 258 tokens (the 256 bytes in GPT-2's byte-to-character mapping, one merge, <|endoftext|>)
# for a model of 256.
mkdir -p no-tokenizer
write_config no_tokenizer.toml no_tokenizer "${gpt2[@]}" data.tokenizer='"no-tokenizer"'
expect_exit 2 "$TRAINCTL" validate no_tokenizer.toml
expect_message "data.tokenizer: $work/no-tokenizer: not a tokenizer directory: it holds neither vocab.json and merges.txt nor tokenizer.json"
expect_exit 2 "$TRAINCTL" run --no-preflight no_tokenizer.toml
expect_message "data.tokenizer: $work/no-tokenizer: not a tokenizer directory"
python3 - <<'PY'
import json, os
printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAC + 1), *range(0xAE, 0xFF + 1)]
characters = {b: chr(b) for b in printable}
characters.update({b: chr(256 + n) for n, b in enumerate(b for b in range(256) if b not in characters)})
vocab = {characters[b]: b for b in range(256)}
vocab["\u0120t"] = 256
vocab["<|endoftext|>"] = 257
os.makedirs("small-tokenizer")
json.dump(vocab, open("small-tokenizer/vocab.json", "w"))
open("small-tokenizer/merges.txt", "w").write("#version: 0.2\n\u0120 t\n")
PY
write_config small_tokenizer.toml small_tokenizer "${gpt2[@]}" data.tokenizer='"small-tokenizer"'
expect_exit 2 "$TRAINCTL" run small_tokenizer.toml
expect_message "data.tokenizer: $work/small-tokenizer has 258 tokens, more than model.vocab_size = 256"

# A checkpoint of another model kind, then of another shape, in the run directory resumed.
write_config mlp.toml resumed job.ranks_per_node=1 train.steps=2 checkpoint.every_steps=2
make_data
"$TRAINCTL" run mlp.toml >/dev/null
write_config gpt2.toml resumed "${gpt2[@]}"
expect_exit 2 "$TRAINCTL" run gpt2.toml --resume
expect_message "checkpoint $work/runs/resumed/checkpoints/step-00000002.h5 holds a model of kind \"mlp\" but the config's model.kind is \"gpt2\""

write_config narrow.toml shaped "${gpt2[@]}"
"$TRAINCTL" run narrow.toml >/dev/null
write_config wide.toml shaped "${gpt2[@]}" model.n_embd=64
expect_exit 2 "$TRAINCTL" run wide.toml --resume
expect_message "checkpoint $work/runs/shaped/checkpoints/step-00000004.h5 does not fit the config's model: it has transformer.wte.weight [256, 32], the config needs transformer.wte.weight [256, 64]"

# train.device = "cuda" where it cannot run: a backend library that cannot be opened, no GPU
# visible, fewer GPUs than ranks on the node (the CPU implementation of CUDA has the GPUs that
# CUDA_VISIBLE_DEVICES names).
write_config cuda.toml cuda "${gpt2[@]}" train.device='"cuda"' job.gpus_per_node=1
TRAINCTL_CUDA_BACKEND=$work/missing.so expect_exit 2 "$TRAINCTL" run cuda.toml --run-dir runs/no-backend
expect_message "train.device = \"cuda\": cannot open the CUDA backend: $work/missing.so: cannot open shared object file"
TRAINCTL_CUDA_BACKEND=gpu expect_exit 2 "$TRAINCTL" run cuda.toml --run-dir runs/bad-backend
expect_message 'train.device = "cuda": TRAINCTL_CUDA_BACKEND="gpu": expected "cuda", "cpu" or the path of a backend library'
if [ "$TRAINCTL_HAVE_CUDA_ON_CPU" = 1 ]; then
  TRAINCTL_CUDA_BACKEND=cpu CUDA_VISIBLE_DEVICES= expect_exit 2 "$TRAINCTL" run cuda.toml --run-dir runs/no-gpu
  expect_message 'train.device = "cuda": no usable CUDA device: cudaGetDeviceCount failed with cudaErrorNoDevice (no CUDA-capable device is detected); CUDA_VISIBLE_DEVICES=""'
  if [ "$TRAINCTL_HAVE_MPI" = 1 ]; then
    write_config cuda2.toml cuda2 "${gpt2[@]}" train.device='"cuda"' job.ranks_per_node=2 job.gpus_per_node=2
    TRAINCTL_CUDA_BACKEND=cpu CUDA_VISIBLE_DEVICES=3 expect_exit 2 "$TRAINCTL" run cuda2.toml --ranks 2
    expect_message '2 ranks on this node but only 1 GPUs visible (CUDA_VISIBLE_DEVICES="3"); each rank needs a GPU'
    # Both ranks fail alike in their set-up, so they end together, without MPI_Abort, whose
    # messages from two ranks at once can crash mpirun (rank_failure.h).
    ! grep -q MPI_ABORT err.txt || fail "the ranks aborted instead of ending together: $(cat err.txt)"
  fi
fi
echo "PASS"
