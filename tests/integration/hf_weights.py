"""Hugging Face model directories by hand, with json, struct and torch (Debian has neither the
safetensors nor the transformers module): what the tests write as a download, and read an export
with. A module (the PyTorch peers read and write their files with it) and the side of
hf_directories.sh, gpt2_init_from.sh and llama_pytorch.sh:
  shard SRC OUT... --files N --dtype bf16 --config TOML
                  SRC's tensors into each OUT, a directory of N shards split as save_pretrained
                  splits them, with model.safetensors.index.json, and config.json as the Hub's
                  gpt2 has it for the config's [model]; OUT as DIR:TENSOR: that tensor one column
                  short
  same-weights CKPT=WEIGHTS[:bfloat16]...
                  each checkpoint's weights are those of the safetensors file or Hugging Face
                  directory WEIGHTS (by name, with or without "transformer."), bitwise; with
                  :bfloat16, WEIGHTS rounded to bf16 by torch first
  check-export CKPT DIR:DTYPE:MAX_SHARD_SIZE...
                  each DIR is what save_pretrained would write of the checkpoint's model: the
                  same files, shards and index (json.dumps(index, indent=2, sort_keys=True) +
                  "\\n"), each tensor the checkpoint's in DTYPE (fp32, or bf16 as torch rounds),
                  bitwise, and config.json with the model's fields and torch_dtype
"""
import argparse
import json
import os
import struct
import sys
import tomllib

import h5py
import numpy as np
import torch

DTYPES = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16}
# Integers of each width, to move a tensor's bytes through numpy, which has no bfloat16.
SAME_WIDTH = {torch.float32: (torch.int32, "<i4"), torch.bfloat16: (torch.int16, "<i2"),
              torch.float16: (torch.int16, "<i2")}
INDEX = "model.safetensors.index.json"


def tensor_bytes(tensor):
    integers, _ = SAME_WIDTH[tensor.dtype]
    return tensor.detach().contiguous().view(integers).numpy().tobytes()


def write_safetensors(path, tensors):
    """The format: an 8-byte little-endian header length, the JSON header padded with spaces to 8
    bytes, then each tensor's bytes, in the dict's order."""
    header, blobs, offset = {}, [], 0
    for name, tensor in tensors.items():
        blob = tensor_bytes(tensor)
        dtype = next(key for key, value in DTYPES.items() if value == tensor.dtype)
        header[name] = {"dtype": dtype, "shape": list(tensor.shape), "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def read_safetensors(path):
    """{name: tensor} in the order of their data, each in its stored dtype. The file is held to the
    format as the safetensors package writes it (trainctl's exports must be): the header padded to
    8 bytes, __metadata__ {"format": "pt"} (transformers refuses a file without it), and the
    tensors' bytes one after another from the start of the data to its end, with no hole."""
    with open(path, "rb") as f:
        data = f.read()
    (length,) = struct.unpack("<Q", data[:8])
    if length % 8 != 0:
        sys.exit(f"{path}: header length {length} is not a multiple of 8")
    header = json.loads(data[8:8 + length])
    if header.pop("__metadata__", None) != {"format": "pt"}:
        sys.exit(f"{path}: __metadata__ is not {{'format': 'pt'}}")
    body, tensors, end = data[8 + length:], {}, 0
    for name, entry in sorted(header.items(), key=lambda item: item[1]["data_offsets"]):
        dtype = DTYPES[entry["dtype"]]
        begin, stop = entry["data_offsets"]
        if begin != end:
            sys.exit(f"{path}: {name} starts at byte {begin} of the data, expected {end}")
        integers = np.frombuffer(body[begin:stop], dtype=SAME_WIDTH[dtype][1]).copy()
        tensors[name] = torch.from_numpy(integers).view(dtype).reshape(entry["shape"])
        end = stop
    if end != len(body):
        sys.exit(f"{path}: the tensors end at byte {end} of the data's {len(body)}")
    return tensors


def read_weights(path):
    """A safetensors file's tensors, or a Hugging Face directory's: model.safetensors, else the shards."""
    if not os.path.isdir(path):
        return read_safetensors(path)
    if os.path.exists(f"{path}/model.safetensors"):
        return read_safetensors(f"{path}/model.safetensors")
    with open(f"{path}/{INDEX}") as f:
        files = sorted(set(json.load(f)["weight_map"].values()))
    return {name: tensor for file in files for name, tensor in read_safetensors(f"{path}/{file}").items()}


def split_into_shards(sizes, max_shard_size):
    """huggingface_hub's split_state_dict_into_shards over {name: bytes}, in order: lists of names."""
    shards, current, filled = [], [], 0
    for name, size in sizes.items():
        if size > max_shard_size:
            shards.append([name])
            continue
        if filled + size > max_shard_size:
            shards.append(current)
            current, filled = [], 0
        current.append(name)
        filled += size
    if current:
        shards.append(current)
    return shards


def split_into_files(tensors, files):
    """split_into_shards of {name: tensor} at the smallest shard size that makes at most `files`
    files of it."""
    sizes = {name: t.numel() * t.element_size() for name, t in tensors.items()}
    max_shard_size = sum(sizes.values()) // files
    while len(split_into_shards(sizes, max_shard_size)) > files:
        max_shard_size += 1
    return split_into_shards(sizes, max_shard_size)


def shard_names(count):
    return ["model.safetensors"] if count == 1 else [f"model-{i + 1:05d}-of-{count:05d}.safetensors" for i in range(count)]


def index_text(shards, tensors):
    """The index as save_pretrained writes it."""
    names = shard_names(len(shards))
    index = {"metadata": {"total_parameters": sum(t.numel() for t in tensors.values()),
                          "total_size": sum(t.numel() * t.element_size() for t in tensors.values())},
             "weight_map": {name: names[i] for i, shard in enumerate(shards) for name in shard}}
    return json.dumps(index, indent=2, sort_keys=True) + "\n"


def expected_config(model):
    """config.json's fields for a checkpoint's [model], torch_dtype aside."""
    if model.get("kind", "mlp") == "mlp":
        return {"model_type": "trainctl-mlp", "inputs": model["inputs"], "hidden": model.get("hidden", []),
                "classes": model["classes"], "activation": model.get("activation", "relu")}
    block, vocab = model["block_size"], model["vocab_size"]
    return {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_layer": model["n_layer"],
            "n_head": model["n_head"], "n_embd": model["n_embd"], "n_positions": block, "n_ctx": block,
            "vocab_size": vocab, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5,
            "resid_pdrop": 0, "embd_pdrop": 0, "attn_pdrop": 0, "tie_word_embeddings": True,
            "bos_token_id": vocab - 1, "eos_token_id": vocab - 1}


def hub_gpt2_config(model, torch_dtype):
    """config.json as the Hub's gpt2 has it, for a trainctl [model]: dropouts and summary fields
    that export does not write, and different, which init_from does not compare."""
    end_of_text = model["vocab_size"] - 1
    return {"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
            "bos_token_id": end_of_text, "embd_pdrop": 0.1, "eos_token_id": end_of_text, "initializer_range": 0.02,
            "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": model["block_size"], "n_embd": model["n_embd"],
            "n_head": model["n_head"], "n_layer": model["n_layer"], "n_positions": model["block_size"],
            "resid_pdrop": 0.1, "summary_activation": None, "summary_first_dropout": 0.1,
            "summary_proj_to_labels": True, "summary_type": "cls_index", "summary_use_proj": True,
            "task_specific_params": {"text-generation": {"do_sample": True, "max_length": 50}},
            "torch_dtype": torch_dtype, "transformers_version": "4.46.0", "vocab_size": model["vocab_size"]}


def command_shard(args):
    tensors = {name: tensor.to(DTYPES[args.dtype.upper()]) for name, tensor in read_safetensors(args.source).items()}
    with open(args.config, "rb") as f:
        model = tomllib.load(f)["model"]
    for out in args.out:
        directory, _, shrunk = out.partition(":")
        written = dict(tensors)
        if shrunk:
            written[shrunk] = written[shrunk][..., :-1].contiguous()
        shards = split_into_files(written, args.files)
        assert len(shards) == args.files, shards
        os.makedirs(directory)
        for name, shard in zip(shard_names(len(shards)), shards):
            write_safetensors(f"{directory}/{name}", {key: written[key] for key in shard})
        with open(f"{directory}/{INDEX}", "w") as f:
            f.write(index_text(shards, written))
        with open(f"{directory}/config.json", "w") as f:
            torch_dtype = {"BF16": "bfloat16", "F16": "float16"}.get(args.dtype.upper(), "float32")
            json.dump(hub_gpt2_config(model, torch_dtype), f, indent=2, sort_keys=True)
        print(f"wrote {directory}: {len(written)} tensors in {len(shards)} files ({args.dtype})")


def check_export(directory, dtype_name, max_shard_size, stored, config):
    from gpt2_peer import gpt2_of  # here: gpt2_peer imports this module
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[dtype_name]
    # save_pretrained's order: the state_dict's, without the LM head tied to wte.
    order = [name for name in gpt2_of(config).state_dict() if name != "lm_head.weight"]
    expected = {name: stored[name].to(dtype) for name in order}
    shards = split_into_shards({name: t.numel() * t.element_size() for name, t in expected.items()}, max_shard_size)
    names = shard_names(len(shards))
    files = sorted(names + ["config.json"] + ([INDEX] if len(shards) > 1 else []))
    if sorted(os.listdir(directory)) != files:
        sys.exit(f"FAIL: {directory} holds {sorted(os.listdir(directory))}, expected {files}")
    if len(shards) > 1:
        with open(f"{directory}/{INDEX}") as f:
            written = f.read()
        if written != index_text(shards, expected):
            sys.exit(f"FAIL: {directory}'s index is\n{written}\nexpected\n{index_text(shards, expected)}")
    for name, shard in zip(names, shards):
        tensors = read_safetensors(f"{directory}/{name}")
        if list(tensors) != shard:
            sys.exit(f"FAIL: {directory}/{name} holds {list(tensors)}, expected {shard}")
        integers = SAME_WIDTH[dtype][0]
        for key, tensor in tensors.items():
            if tensor.dtype != dtype or tensor.shape != expected[key].shape or not torch.equal(
                    tensor.view(integers), expected[key].view(integers)):
                sys.exit(f"FAIL: {directory}/{name}: {key} is not the checkpoint's in {dtype}, bitwise")
    with open(f"{directory}/config.json") as f:
        written = json.load(f)
    wanted = {**expected_config(config["model"]), "torch_dtype": {"fp32": "float32", "bf16": "bfloat16"}[dtype_name]}
    if written != wanted:
        sys.exit(f"FAIL: {directory}/config.json is {written}, expected {wanted}")
    print(f"{directory}: {len(expected)} tensors in {len(shards)} files as save_pretrained writes them, "
          f"{dtype_name}, bitwise the checkpoint's; config.json right")


def command_same_weights(args):
    for pair in args.pairs:
        checkpoint, _, weights = pair.partition("=")
        weights, _, rounded_to = weights.partition(":")
        stored = read_weights(weights)
        with h5py.File(checkpoint, "r") as f:
            names = list(f["model"])
            for name in names:
                tensor = torch.from_numpy(f["model"][name][:])
                theirs = stored.get(name, stored.get(name.removeprefix("transformer.")))
                if theirs is not None and rounded_to:
                    theirs = theirs.to(getattr(torch, rounded_to))
                if theirs is None or theirs.shape != tensor.shape or not torch.equal(theirs.float(), tensor):
                    sys.exit(f"FAIL: {checkpoint}'s {name} is not {weights}'s, bitwise")
        print(f"{checkpoint}: all {len(names)} tensors are {weights}'s{' rounded to ' + rounded_to if rounded_to else ''}, "
              "bitwise")


def command_check_export(args):
    with h5py.File(args.checkpoint, "r") as f:
        stored = {name: torch.from_numpy(f["model"][name][:]) for name in f["model"]}
        config = tomllib.loads(f.attrs["config"])
    for export in args.exports:
        directory, dtype_name, max_shard_size = export.split(":")
        check_export(directory, dtype_name, int(max_shard_size), stored, config)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(required=True)
    shard = commands.add_parser("shard")
    shard.add_argument("source")
    shard.add_argument("out", nargs="+", help="DIR, or DIR:TENSOR for that tensor one column short")
    shard.add_argument("--files", type=int, required=True)
    shard.add_argument("--dtype", required=True, choices=["f32", "bf16", "f16"])
    shard.add_argument("--config", required=True)
    shard.set_defaults(run=command_shard)
    same = commands.add_parser("same-weights")
    same.add_argument("pairs", nargs="+", help="CKPT=WEIGHTS, or CKPT=WEIGHTS:bfloat16")
    same.set_defaults(run=command_same_weights)
    check = commands.add_parser("check-export")
    check.add_argument("checkpoint")
    check.add_argument("exports", nargs="+", help="DIR:DTYPE:MAX_SHARD_SIZE, DTYPE fp32 or bf16")
    check.set_defaults(run=command_check_export)
    args = parser.parse_args()
    args.run(args)


if __name__ == "__main__":
    main()
