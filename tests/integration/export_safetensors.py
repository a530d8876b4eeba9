"""Python's side of export_safetensors.sh.

tokens TRAIN VAL FRACTION INPUT...: the token files (llm.c format) hold the inputs' bytes in
order, the last FRACTION of them in VAL.

export DIR CHECKPOINT: DIR/model.safetensors, read by hf_weights.py (which holds it to the format
as the safetensors package writes it), holds exactly the checkpoint's /model tensors (read with
h5py) in F32, bit for bit; for gpt2 these are GPT2LMHeadModel's names and shapes without the
tied lm_head.weight; and DIR/config.json describes the model of the checkpoint's stored config,
with torch_dtype float32."""
import json
import sys
import tomllib

import h5py
import numpy as np

from hf_weights import expected_config, read_safetensors
from peer_lib import read_tokens


def fail(message):
    sys.exit(f"FAIL: {message}")


def check_tokens(train, val, fraction, inputs):
    text = b"".join(open(path, "rb").read() for path in inputs)
    expected = np.frombuffer(text, dtype=np.uint8).astype(np.uint16)
    val_count = int(len(expected) * fraction + 0.5)  # llround, as tokenize splits
    for path, want in ((train, expected[:len(expected) - val_count]), (val, expected[len(expected) - val_count:])):
        got = read_tokens(path)
        if len(got) != len(want) or not np.array_equal(got, want):
            fail(f"{path}: {len(got)} tokens, expected {len(want)} bytes of the inputs")
    print(f"tokens: {len(expected) - val_count} + {val_count} tokens are the inputs' bytes")


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


def check_export(directory, checkpoint):
    exported = {name: tensor.numpy() for name, tensor in read_safetensors(f"{directory}/model.safetensors").items()}
    if any(tensor.dtype != np.float32 for tensor in exported.values()):
        fail(f"{directory}/model.safetensors: not every tensor is F32")
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
