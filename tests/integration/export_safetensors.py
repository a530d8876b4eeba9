"""Python's side of export_safetensors.sh.

tokens TRAIN VAL FRACTION INPUT...: the token files (llm.c format) hold the inputs' bytes in
order, the last FRACTION of them in VAL.

export DIR CHECKPOINT: DIR/model.safetensors, read without the safetensors package (Debian has
none): the 8-byte little-endian header length, the JSON header, the raw bytes, holds exactly the
checkpoint's /model tensors (read with h5py), bit for bit; for gpt2 these are GPT2LMHeadModel's
names and shapes without the tied lm_head.weight; and DIR/config.json describes the model of the
checkpoint's stored config, with torch_dtype float32."""
import json
import struct
import sys
import tomllib

import h5py
import numpy as np


def fail(message):
    sys.exit(f"FAIL: {message}")


def read_token_file(path):
    with open(path, "rb") as file:
        data = file.read()
    header = np.frombuffer(data[:1024], dtype="<i4")
    if header[0] != 20240520 or header[1] != 1:
        fail(f"{path}: header {header[:3]}")
    tokens = np.frombuffer(data[1024:], dtype="<u2")
    if len(tokens) != header[2]:
        fail(f"{path}: {len(tokens)} tokens, header says {header[2]}")
    return tokens


def check_tokens(train, val, fraction, inputs):
    text = b"".join(open(path, "rb").read() for path in inputs)
    expected = np.frombuffer(text, dtype=np.uint8).astype(np.uint16)
    val_count = int(len(expected) * fraction + 0.5)  # llround, as tokenize splits
    for path, want in ((train, expected[:len(expected) - val_count]), (val, expected[len(expected) - val_count:])):
        got = read_token_file(path)
        if len(got) != len(want) or not np.array_equal(got, want):
            fail(f"{path}: {len(got)} tokens, expected {len(want)} bytes of the inputs")
    print(f"tokens: {len(expected) - val_count} + {val_count} tokens are the inputs' bytes")


def read_safetensors(path):
    with open(path, "rb") as file:
        data = file.read()
    (length,) = struct.unpack("<Q", data[:8])
    if length % 8 != 0:
        fail(f"{path}: header length {length} is not a multiple of 8")
    header = json.loads(data[8:8 + length])
    if header.pop("__metadata__", None) != {"format": "pt"}:
        fail(f"{path}: __metadata__ is not {{'format': 'pt'}}")
    body = data[8 + length:]
    tensors, end = {}, 0
    for name, entry in sorted(header.items(), key=lambda item: item[1]["data_offsets"]):
        begin, stop = entry["data_offsets"]
        if begin != end or entry["dtype"] != "F32":
            fail(f"{path}: {name} is {entry['dtype']} at [{begin}, {stop}), expected F32 from {end}")
        tensors[name] = np.frombuffer(body[begin:stop], dtype="<f4").reshape(entry["shape"])
        end = stop
    if end != len(body):
        fail(f"{path}: tensors end at byte {end} of {len(body)}")
    return tensors


def gpt2_shapes(model):
    """GPT2LMHeadModel.state_dict() shapes (Conv1D weights [in, out]), without lm_head.weight."""
    layers, width, vocab = model["n_layer"], model["n_embd"], model["vocab_size"]
    shapes = {"transformer.wte.weight": [vocab, width], "transformer.wpe.weight": [model["block_size"], width],
              "transformer.ln_f.weight": [width], "transformer.ln_f.bias": [width]}
    for layer in range(layers):
        prefix = f"transformer.h.{layer}."
        for name, shape in (("ln_1.weight", [width]), ("ln_1.bias", [width]),
                            ("attn.c_attn.weight", [width, 3 * width]), ("attn.c_attn.bias", [3 * width]),
                            ("attn.c_proj.weight", [width, width]), ("attn.c_proj.bias", [width]),
                            ("ln_2.weight", [width]), ("ln_2.bias", [width]),
                            ("mlp.c_fc.weight", [width, 4 * width]), ("mlp.c_fc.bias", [4 * width]),
                            ("mlp.c_proj.weight", [4 * width, width]), ("mlp.c_proj.bias", [width])):
            shapes[prefix + name] = shape
    return shapes


def expected_config(model):
    """config.json's fields for a checkpoint's [model], torch_dtype aside (hf_weights.py uses it too)."""
    if model.get("kind", "mlp") == "mlp":
        return {"model_type": "trainctl-mlp", "inputs": model["inputs"], "hidden": model.get("hidden", []),
                "classes": model["classes"], "activation": model.get("activation", "relu")}
    block, vocab = model["block_size"], model["vocab_size"]
    return {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_layer": model["n_layer"],
            "n_head": model["n_head"], "n_embd": model["n_embd"], "n_positions": block, "n_ctx": block,
            "vocab_size": vocab, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5,
            "resid_pdrop": 0, "embd_pdrop": 0, "attn_pdrop": 0, "tie_word_embeddings": True,
            "bos_token_id": vocab - 1, "eos_token_id": vocab - 1}


def check_export(directory, checkpoint):
    exported = read_safetensors(f"{directory}/model.safetensors")
    with h5py.File(checkpoint, "r") as file:
        stored = {name: np.asarray(dataset) for name, dataset in file["model"].items()}
        config_text = file.attrs["config"]
    config_text = config_text.decode() if isinstance(config_text, bytes) else config_text
    model = tomllib.loads(config_text)["model"]

    if set(exported) != set(stored):
        fail(f"tensor names differ: only exported {sorted(set(exported) - set(stored))}, "
             f"only in the checkpoint {sorted(set(stored) - set(exported))}")
    for name, values in stored.items():
        if exported[name].shape != values.shape:
            fail(f"{name}: shape {exported[name].shape}, checkpoint {values.shape}")
        differing = np.flatnonzero(exported[name].view(np.uint32) != values.astype("<f4").view(np.uint32))
        if differing.size:
            worst = differing[np.argmax(np.abs(exported[name].ravel()[differing] - values.ravel()[differing]))]
            fail(f"{name}: {differing.size} elements differ; worst {worst}: "
                 f"{exported[name].ravel()[worst]!r} vs {values.ravel()[worst]!r}")
    if model.get("kind") == "gpt2":
        shapes = {name: list(values.shape) for name, values in exported.items()}
        if shapes != gpt2_shapes(model):
            fail(f"the tensors are not GPT2LMHeadModel's: {shapes}")

    with open(f"{directory}/config.json") as file:
        config = json.load(file)
    if config != {**expected_config(model), "torch_dtype": "float32"}:
        fail(f"config.json is {config}, expected {expected_config(model)} and torch_dtype float32")
    print(f"export: {len(exported)} tensors equal the checkpoint's bit for bit; config.json is right")


if __name__ == "__main__":
    if sys.argv[1] == "tokens":
        check_tokens(sys.argv[2], sys.argv[3], float(sys.argv[4]), sys.argv[5:])
    else:
        check_export(sys.argv[2], sys.argv[3])
