"""PyTorch's side of llama_pytorch.sh, and the model of scripts/bench_gpu_lm.py: Hugging Face's
LlamaForCausalLM written here (no transformers: Debian has none) as transformers computes it in
fp32, with its parameter names and layouts (nn.Linear weights [out, in], no biases), so that a
trainctl checkpoint or a Hugging Face directory loads with load_state_dict(strict=True):
RMSNorm in fp32 (weight * (x * rsqrt(mean(x^2) + eps))), RoPE by rotate_half with transformers'
inverse frequencies (_compute_default_rope_parameters, and _compute_llama3_parameters for
rope_scaling), causal attention with key/value head h // (n_head / n_kv_head) for query head h
(repeat_kv), scores times head_dim ** -0.5 and an fp32 softmax, down(silu(gate(x)) * up(x)), the
embedding without positions, the LM head tied to it or its own. What the peers share (the
commands loss, train, sample and greedy, and commands separated by "::" run in one process) is
peer_lib.py's.
  loss CKPT --expect L       the mean loss of the batch of the checkpoint's next step, to 1e-5
  train START END [--metrics FILE]
                             AdamW from START over the same unshuffled batches: each step's loss
                             against trainctl's metrics to 1e-5, END's weights and state to 1e-4
  sample CKPT --prompt P --tokens N --trainctl-output FILE
                             trainctl's greedy continuation, token by token, against PyTorch's argmax
  init --seed S [--dtype F32|BF16] [--shards N] CONFIG DIR [CONFIG DIR ...]
                             for each CONFIG a Hugging Face directory DIR of its Llama (config.json,
                             model.safetensors, or N shards model-0000i-of-0000N.safetensors and
                             model.safetensors.index.json) from an init of seed S livelier than
                             Hugging Face's (weights normal(0, 0.1), norm weights 1 + normal(0,
                             0.1)), so that attention and RoPE move the loss
  run RUN --steps N --prompt P --tokens T --sample STEP=FILE...
                             train from RUN's step-0 checkpoint to its step-N one (with its
                             metrics.jsonl), and sample from each STEP's checkpoint against FILE
  export DIR CKPT --prompt P --tokens T --trainctl-output FILE
                             DIR (trainctl export's) loads into a Llama of its config.json, whose
                             logits equal those of the checkpoint's weights to 1e-5, and whose
                             greedy decoding is what trainctl printed to FILE
"""
import json
import math
import pathlib
import sys
import tomllib

import torch
import torch.nn.functional as F

from hf_weights import DTYPES, INDEX, index_text, read_weights, shard_names, split_into_files, write_safetensors
from peer_lib import (Checkpoint, check_checkpoint_sample, check_sample, check_tensors, check_training, cross_entropy,
                      logged_losses, peer_main)

# A [model] key of trainctl's and the LlamaConfig field of config.json it maps to.
CONFIG_FIELDS = {"n_layer": "num_hidden_layers", "n_embd": "hidden_size", "n_head": "num_attention_heads",
                 "n_kv_head": "num_key_value_heads", "head_dim": "head_dim", "intermediate_size": "intermediate_size",
                 "vocab_size": "vocab_size", "rope_theta": "rope_theta", "rope_scaling": "rope_scaling",
                 "rms_norm_eps": "rms_norm_eps", "tie_embeddings": "tie_word_embeddings"}


class RmsNorm(torch.nn.Module):
    def __init__(self, width, eps):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(width))
        self.eps = eps

    def forward(self, x):
        variance = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(variance + self.eps))


def inverse_frequencies(head_dim, rope_theta, rope_scaling):
    """transformers' _compute_default_rope_parameters and, with rope_scaling, _compute_llama3_parameters."""
    inv_freq = 1.0 / (rope_theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).to(dtype=torch.float) / head_dim))
    if rope_scaling is None:
        return inv_freq
    factor = rope_scaling["factor"]
    low_freq_factor = rope_scaling["low_freq_factor"]
    high_freq_factor = rope_scaling["high_freq_factor"]
    old_context_len = rope_scaling["original_max_position_embeddings"]
    low_freq_wavelen = old_context_len / low_freq_factor
    high_freq_wavelen = old_context_len / high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    inv_freq_llama = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth_factor = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    smoothed_inv_freq = (1 - smooth_factor) * inv_freq_llama / factor + smooth_factor * inv_freq_llama
    is_medium_freq = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    return torch.where(is_medium_freq, smoothed_inv_freq, inv_freq_llama)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Attention(torch.nn.Module):
    # Set on the class by a GPU benchmark: PyTorch's fused causal attention (flash attention on a
    # GPU, PyTorch >= 2.0) instead of the explicit softmax, as people train with.
    fused = False

    def __init__(self, n_embd, n_head, n_kv_head, head_dim):
        super().__init__()
        self.n_head, self.n_kv_head, self.head_dim = n_head, n_kv_head, head_dim
        self.q_proj = torch.nn.Linear(n_embd, n_head * head_dim, bias=False)
        self.k_proj = torch.nn.Linear(n_embd, n_kv_head * head_dim, bias=False)
        self.v_proj = torch.nn.Linear(n_embd, n_kv_head * head_dim, bias=False)
        self.o_proj = torch.nn.Linear(n_head * head_dim, n_embd, bias=False)

    def forward(self, x, cos, sin):
        batch, time, _ = x.shape
        q = self.q_proj(x).view(batch, time, self.n_head, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(batch, time, self.n_kv_head, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(batch, time, self.n_kv_head, self.head_dim).transpose(1, 2)
        q = (q * cos) + (rotate_half(q) * sin)
        k = (k * cos) + (rotate_half(k) * sin)
        # repeat_kv: each key/value head for n_head / n_kv_head query heads in a row.
        groups = self.n_head // self.n_kv_head
        k, v = (t.repeat_interleave(groups, dim=1) for t in (k, v))
        if self.fused:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            scores = torch.matmul(q, k.transpose(2, 3)) * self.head_dim ** -0.5
            future = torch.ones(time, time, dtype=torch.bool, device=x.device).triu(1)
            y = scores.masked_fill(future, float("-inf")).softmax(dim=-1, dtype=torch.float32).to(q.dtype) @ v
        return self.o_proj(y.transpose(1, 2).reshape(batch, time, self.n_head * self.head_dim))


class Mlp(torch.nn.Module):
    def __init__(self, n_embd, intermediate_size):
        super().__init__()
        self.gate_proj = torch.nn.Linear(n_embd, intermediate_size, bias=False)
        self.up_proj = torch.nn.Linear(n_embd, intermediate_size, bias=False)
        self.down_proj = torch.nn.Linear(intermediate_size, n_embd, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Block(torch.nn.Module):
    def __init__(self, spec):
        super().__init__()
        self.input_layernorm = RmsNorm(spec["n_embd"], spec["rms_norm_eps"])
        self.self_attn = Attention(spec["n_embd"], spec["n_head"], spec["n_kv_head"], spec["head_dim"])
        self.post_attention_layernorm = RmsNorm(spec["n_embd"], spec["rms_norm_eps"])
        self.mlp = Mlp(spec["n_embd"], spec["intermediate_size"])

    def forward(self, x, cos, sin):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class Llama(torch.nn.Module):
    def __init__(self, spec):
        """spec: trainctl's [model] keys (llama_spec), defaults filled in."""
        super().__init__()
        self.block_size = spec["block_size"]
        self.model = torch.nn.ModuleDict({
            "embed_tokens": torch.nn.Embedding(spec["vocab_size"], spec["n_embd"]),
            "layers": torch.nn.ModuleList(Block(spec) for _ in range(spec["n_layer"])),
            "norm": RmsNorm(spec["n_embd"], spec["rms_norm_eps"]),
        })
        if not spec["tie_embeddings"]:
            self.lm_head = torch.nn.Linear(spec["n_embd"], spec["vocab_size"], bias=False)
        self.register_buffer("inv_freq", inverse_frequencies(spec["head_dim"], spec["rope_theta"],
                                                             spec["rope_scaling"]), persistent=False)

    def init_lively(self, seed):
        generator = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for parameter in self.parameters():
                parameter.normal_(0.0, 0.1, generator=generator)
                if parameter.dim() == 1:
                    parameter.add_(1.0)

    def forward(self, tokens):
        """Logits [batch, time, vocab] of int64 tokens [batch, time]."""
        # LlamaRotaryEmbedding: angles position * inv_freq in float, both halves alike.
        positions = torch.arange(tokens.shape[1], device=tokens.device, dtype=torch.float)
        freqs = (self.inv_freq[:, None] @ positions[None, :]).transpose(0, 1)
        angles = torch.cat((freqs, freqs), dim=-1)
        cos, sin = angles.cos(), angles.sin()
        x = self.model.embed_tokens(tokens)
        for layer in self.model.layers:
            x = layer(x, cos, sin)
        x = self.model.norm(x)
        head = self.lm_head.weight if hasattr(self, "lm_head") else self.model.embed_tokens.weight
        return x @ head.T

    def loss(self, inputs, targets):
        return cross_entropy(self(inputs), targets)


def llama_spec(model):
    """A [model] table with llama_spec.cpp's defaults filled in."""
    spec = {"n_kv_head": model["n_head"], "head_dim": model["n_embd"] // model["n_head"], "rope_theta": 500000.0,
            "rope_scaling": None, "rms_norm_eps": 1e-5, "tie_embeddings": False, **model}
    if spec["rope_scaling"] is not None:
        spec["rope_scaling"] = {key: value for key, value in spec["rope_scaling"].items() if key != "rope_type"}
    return spec


def llama_of(config):
    """The Llama that a trainctl config's [model] describes, uninitialised."""
    if config["model"].get("kind") != "llama":
        sys.exit(f"model.kind is {config['model'].get('kind')!r}, not 'llama'")
    return Llama(llama_spec(config["model"]))


def llama_of_directory(directory, block_size):
    """The Llama of a Hugging Face directory's config.json, its weights loaded (strict)."""
    directory = pathlib.Path(directory)
    hf = json.loads((directory / "config.json").read_text())
    if hf.get("architectures") != ["LlamaForCausalLM"]:
        sys.exit(f"FAIL: {directory}/config.json: architectures {hf.get('architectures')}")
    spec = llama_spec({key: hf[field] for key, field in CONFIG_FIELDS.items() if field in hf} |
                      {"block_size": block_size})
    model = Llama(spec)
    model.load_state_dict({name: tensor.float() for name, tensor in read_weights(str(directory)).items()}, strict=True)
    return model


def write_directory(config_path, directory, seed, dtype, shards):
    """A Hugging Face directory of the config's Llama, initialised livelily from `seed`."""
    with open(config_path, "rb") as f:
        config = tomllib.load(f)
    model = llama_of(config)
    model.init_lively(seed)
    spec = llama_spec(config["model"])
    hf = {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
          "torch_dtype": {"F32": "float32", "BF16": "bfloat16"}[dtype]}
    hf |= {field: spec[key] for key, field in CONFIG_FIELDS.items()}
    if spec["rope_scaling"] is not None:
        hf["rope_scaling"] = {"rope_type": "llama3", **spec["rope_scaling"]}
    directory = pathlib.Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(hf, indent=2))
    tensors = {name: tensor.to(DTYPES[dtype]) for name, tensor in model.state_dict().items()}
    split = split_into_files(tensors, shards)
    for file, names in zip(shard_names(len(split)), split):
        write_safetensors(str(directory / file), {name: tensors[name] for name in names})
    if len(split) > 1:
        (directory / INDEX).write_text(index_text(split, tensors))
    print(f"wrote {directory}: {len(tensors)} tensors in {dtype}, {shards} file(s)")


def command_init(args):
    if len(args.pairs) % 2 != 0:
        sys.exit("init: CONFIG DIR pairs")
    for config_path, directory in zip(args.pairs[::2], args.pairs[1::2]):
        write_directory(config_path, directory, args.seed, args.dtype, args.shards)


def command_run(args):
    run = pathlib.Path(args.run_dir)

    def checkpoint(step):
        return str(run / "checkpoints" / f"step-{step:08d}.h5")

    check_training(checkpoint(0), checkpoint(args.steps), llama_of, logged_losses(run / "metrics.jsonl"))
    for sample in args.sample:
        step, trainctl_output = sample.split("=", 1)
        check_checkpoint_sample(checkpoint(int(step)), llama_of, args.prompt, args.tokens, trainctl_output)


def command_export(args):
    checkpoint = Checkpoint(args.checkpoint, llama_of)
    exported = llama_of_directory(args.dir, checkpoint.block_size)
    inputs, _ = checkpoint.batch(checkpoint.step)
    with torch.no_grad():
        check_tensors(f"{args.dir}'s logits against those of {args.checkpoint}'s weights",
                      [("logits", exported(inputs), checkpoint.model()(inputs))], 1e-5)
    with open(args.trainctl_output, "rb") as f:
        check_sample(exported, checkpoint.block_size, args.prompt, args.tokens, f.read())


def add_own_commands(commands):
    init = commands.add_parser("init")
    init.add_argument("--seed", type=int, required=True)
    init.add_argument("--dtype", choices=["F32", "BF16"], default="F32")
    init.add_argument("--shards", type=int, default=1)
    init.add_argument("pairs", nargs="+", metavar="CONFIG DIR")
    init.set_defaults(run=command_init)
    run = commands.add_parser("run")
    run.add_argument("run_dir", metavar="RUN")
    run.add_argument("--steps", type=int, required=True)
    run.add_argument("--prompt", required=True)
    run.add_argument("--tokens", type=int, required=True)
    run.add_argument("--sample", nargs="+", default=[], metavar="STEP=FILE")
    run.set_defaults(run=command_run)
    export = commands.add_parser("export")
    export.add_argument("dir")
    export.add_argument("checkpoint")
    export.add_argument("--prompt", required=True)
    export.add_argument("--tokens", type=int, required=True)
    export.add_argument("--trainctl-output", required=True)
    export.set_defaults(run=command_export)


if __name__ == "__main__":
    peer_main(__doc__, llama_of, add_own_commands)
