"""PyTorch's side of gpt2_pytorch.sh, and the model of scripts/bench_torch_gpt2.py: a GPT-2
written here (no transformers) with the parameter names and layouts of Hugging Face's
GPT2LMHeadModel (Conv1D weights [in, out], the LM head tied to transformer.wte), so that a
trainctl checkpoint loads with load_state_dict(strict=True). Everything else it needs (shape,
data file, batch, optimizer settings) it reads from the checkpoint's resolved config.
  loss CKPT --expect L      the mean loss of the batch of the checkpoint's next step, to 1e-5
  train START END           AdamW from START over the same unshuffled batches, against END, to 1e-4
  sample CKPT --prompt P --tokens N --trainctl-output FILE
                            trainctl's greedy continuation, token by token, against PyTorch's argmax
  init CONFIG OUT --seed S  a model.safetensors of the config's GPT-2 from PyTorch's init, named as
                            the Hugging Face Hub's GPT-2 files are (no "transformer." prefix, the
                            causal-mask buffers and the tied lm_head.weight stored too)
  same-weights CKPT WEIGHTS [--rounded-to bfloat16]
                            the checkpoint's weights are those of the safetensors file or Hugging
                            Face directory (hf_weights.py), bitwise (rounded to bf16 first)
  greedy CKPT --prompt-tokens JSON --tokens N
                            PyTorch's greedy continuation (argmax, the lowest id among equal
                            maxima) of the prompt's tokens, as a JSON list of N tokens
"""
import argparse
import functools
import json
import math
import struct
import sys
import tomllib

import h5py
import numpy as np
import torch
import torch.nn.functional as F

from hf_weights import read_weights, write_safetensors

TOKEN_FILE_MAGIC, TOKEN_FILE_VERSION, TOKEN_FILE_HEADER_INTS = 20240520, 1, 256


class Conv1D(torch.nn.Module):
    """GPT-2's linear layer: y = x @ weight + bias, weight [in, out] (torch.nn.Linear's transpose)."""

    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.empty(n_in, n_out))
        self.bias = torch.nn.Parameter(torch.zeros(n_out))

    def forward(self, x):
        return torch.addmm(self.bias, x.reshape(-1, x.shape[-1]), self.weight).view(*x.shape[:-1], -1)


class Attention(torch.nn.Module):
    # Set on the class by a GPU benchmark: PyTorch's fused causal attention (flash attention on a
    # GPU, PyTorch >= 2.0) instead of the explicit softmax, as people train with.
    fused = False

    def __init__(self, n_embd, n_head):
        super().__init__()
        self.n_head = n_head
        self.c_attn = Conv1D(n_embd, 3 * n_embd)
        self.c_proj = Conv1D(n_embd, n_embd)

    def forward(self, x):
        batch, time, channels = x.shape
        head_dim = channels // self.n_head
        q, k, v = (t.view(batch, time, self.n_head, head_dim).transpose(1, 2)
                   for t in self.c_attn(x).split(channels, dim=2))
        if self.fused:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            scores = (q @ k.transpose(-2, -1)) / math.sqrt(head_dim)
            future = torch.ones(time, time, dtype=torch.bool, device=x.device).triu(1)
            y = scores.masked_fill(future, float("-inf")).softmax(dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).reshape(batch, time, channels))


class Mlp(torch.nn.Module):
    def __init__(self, n_embd):
        super().__init__()
        self.c_fc = Conv1D(n_embd, 4 * n_embd)
        self.c_proj = Conv1D(4 * n_embd, n_embd)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(torch.nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.ln_1 = torch.nn.LayerNorm(n_embd, eps=1e-5)
        self.attn = Attention(n_embd, n_head)
        self.ln_2 = torch.nn.LayerNorm(n_embd, eps=1e-5)
        self.mlp = Mlp(n_embd)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Gpt2(torch.nn.Module):
    def __init__(self, n_layer, n_head, n_embd, block_size, vocab_size):
        super().__init__()
        self.block_size = block_size
        self.transformer = torch.nn.ModuleDict({
            "wte": torch.nn.Embedding(vocab_size, n_embd),
            "wpe": torch.nn.Embedding(block_size, n_embd),
            "h": torch.nn.ModuleList(Block(n_embd, n_head) for _ in range(n_layer)),
            "ln_f": torch.nn.LayerNorm(n_embd, eps=1e-5),
        })

    def init_weights(self, seed):
        """GPT-2's init: normal(0, 0.02), residual projections scaled by 1/sqrt(2 n_layer), biases zero."""
        generator = torch.Generator().manual_seed(seed)
        residual_std = 0.02 / math.sqrt(2 * len(self.transformer.h))
        with torch.no_grad():
            for name, parameter in self.named_parameters():
                if parameter.dim() == 1:
                    parameter.fill_(1.0 if name.endswith("weight") else 0.0)  # LayerNorm gains; biases
                else:
                    std = residual_std if name.endswith("c_proj.weight") else 0.02
                    parameter.normal_(0.0, std, generator=generator)

    def forward(self, tokens):
        """Logits [batch, time, vocab] of int64 tokens [batch, time]."""
        t = self.transformer
        x = t.wte(tokens) + t.wpe(torch.arange(tokens.shape[1], device=tokens.device))
        for block in t.h:
            x = block(x)
        return t.ln_f(x) @ t.wte.weight.T

    def loss(self, inputs, targets):
        logits = self(inputs)
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1))


def gpt2_of(config):
    """The GPT-2 that a trainctl config's [model] describes, uninitialised."""
    model = config["model"]
    if model.get("kind") != "gpt2":
        sys.exit(f"model.kind is {model.get('kind')!r}, not 'gpt2'")
    return Gpt2(**{key: model[key] for key in ("n_layer", "n_head", "n_embd", "block_size", "vocab_size")})


def train_settings(config):
    """A trainctl config's [train], with trainctl's defaults (common/train_spec.cpp) for the keys it leaves out."""
    return {"weight_decay": 0.0, "betas": [0.9, 0.999], "eps": 1e-8, "grad_clip": 0.0, "schedule": "constant",
            "warmup_steps": 0, **config["train"]}


def adamw(model, train):
    """torch.optim.AdamW in GPT-2's two groups: weight decay on 2-D tensors (embeddings too), none on 1-D."""
    groups = [{"params": [p for p in model.parameters() if p.dim() >= 2], "weight_decay": train["weight_decay"]},
              {"params": [p for p in model.parameters() if p.dim() < 2], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=train["lr"], betas=tuple(train["betas"]), eps=train["eps"])


def read_tokens(path):
    """The tokens of an llm.c token file (a header of 256 int32, then uint16 tokens)."""
    header = np.fromfile(path, dtype="<i4", count=TOKEN_FILE_HEADER_INTS)
    if header[0] != TOKEN_FILE_MAGIC or header[1] != TOKEN_FILE_VERSION:
        sys.exit(f"{path}: not an llm.c token file (magic {header[0]}, version {header[1]})")
    return np.fromfile(path, dtype="<u2", count=header[2], offset=TOKEN_FILE_HEADER_INTS * 4)


def step_batch(tokens, block_size, global_batch, step):
    """(inputs, targets) [global_batch, block_size] of unshuffled step `step`: windows
    s*G ... s*G+G-1 of block_size + 1 tokens, wrapping at the epoch end."""
    windows = (len(tokens) - 1) // block_size
    first = step % (windows // global_batch) * global_batch
    rows = np.stack([tokens[i * block_size:i * block_size + block_size + 1] for i in range(first, first + global_batch)])
    rows = torch.from_numpy(rows.astype(np.int64))
    return rows[:, :-1], rows[:, 1:]


class Checkpoint:
    """A trainctl checkpoint: weights, AdamW state, position, and the config it trained with."""

    def __init__(self, path):
        with h5py.File(path, "r") as f:
            self.weights = {name: torch.from_numpy(f["model"][name][:]) for name in f["model"]}
            self.optimizer_state = {name: {s: torch.from_numpy(f["optimizer"][name][s][:]) for s in f["optimizer"][name]}
                                    for name in f["optimizer"]}
            self.step = int(f.attrs["step"])
            self.optimizer_step = int(f.attrs["optimizer_step"])
            self.global_batch = int(f.attrs["global_batch"])
            self.config = tomllib.loads(f.attrs["config"])
        self.block_size = self.config["model"]["block_size"]
        self.train = train_settings(self.config)

    def model(self):
        model = gpt2_of(self.config)
        model.load_state_dict(self.weights, strict=True)
        return model

    @functools.cached_property
    def tokens(self):
        if self.config["data"].get("shuffle", True):
            sys.exit("the peer replays unshuffled runs only: set data.shuffle = false")
        return read_tokens(self.config["data"]["train"])

    def batch(self, step):
        return step_batch(self.tokens, self.block_size, self.global_batch, step)


def check_close(what, torch_value, trainctl_value, rtol):
    relative = abs(torch_value - trainctl_value) / abs(trainctl_value)
    print(f"{what}: PyTorch {torch_value:.9g}, trainctl {trainctl_value:.9g} (relative difference {relative:.3g})")
    if not relative <= rtol:
        sys.exit(f"FAIL: {what} differs by more than {rtol:g} (relative)")


def command_loss(args):
    checkpoint = Checkpoint(args.checkpoint)
    with torch.no_grad():
        loss = checkpoint.model().loss(*checkpoint.batch(checkpoint.step)).item()
    check_close(f"loss of step {checkpoint.step + 1}'s batch", loss, args.expect, 1e-5)


def worst_difference(name, ours, theirs):
    """max|ours - theirs| / max|theirs| of one tensor, and a line naming its worst element."""
    difference = (ours - theirs).abs()
    flat = int(difference.argmax())
    index = tuple(int(i) for i in np.unravel_index(flat, tuple(theirs.shape)))
    relative = (difference.view(-1)[flat] / theirs.abs().max()).item()
    return relative, (f"{name}: worst element {list(index)}: PyTorch {ours.view(-1)[flat].item():.9g} vs trainctl "
                      f"{theirs.view(-1)[flat].item():.9g} (relative difference {relative:.3g})")


def command_train(args):
    start, end = Checkpoint(args.start), Checkpoint(args.end)
    train = start.train
    if train["schedule"] != "constant" or train["warmup_steps"] != 0:
        sys.exit("the peer trains at a constant learning rate: set train.schedule = \"constant\", warmup_steps = 0")
    model = start.model()
    optimizer = adamw(model, train)
    for name, parameter in model.named_parameters():
        optimizer.state[parameter] = {"step": torch.tensor(float(start.optimizer_step)), **start.optimizer_state[name]}
    for step in range(start.step, end.step):
        optimizer.zero_grad()
        model.loss(*start.batch(step)).backward()
        if train["grad_clip"] > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), train["grad_clip"])
        optimizer.step()

    compared = [(name, parameter.detach(), end.weights[name]) for name, parameter in model.named_parameters()]
    compared += [(f"{name}/{state}", optimizer.state[parameter][state], end.optimizer_state[name][state])
                 for name, parameter in model.named_parameters() for state in ("exp_avg", "exp_avg_sq")]
    results = [worst_difference(*entry) for entry in compared]
    for _, line in results:
        print(line)
    worst, line = max(results)
    print(f"after {end.step - start.step} AdamW steps, the worst of {len(results)} tensors: {line}")
    if not worst <= 1e-4:
        sys.exit(f"FAIL: trainctl's step-{end.step} checkpoint differs from PyTorch by {worst:.3g} > 1e-4 (relative)")


def command_init(args):
    with open(args.config, "rb") as f:
        config = tomllib.load(f)
    model = gpt2_of(config)
    model.init_weights(args.seed)
    tensors = {name.removeprefix("transformer."): tensor for name, tensor in model.state_dict().items()}
    block_size = config["model"]["block_size"]
    for block in range(config["model"]["n_layer"]):
        tensors[f"h.{block}.attn.bias"] = torch.ones(block_size, block_size).tril().view(1, 1, block_size, block_size)
    tensors["lm_head.weight"] = tensors["wte.weight"]
    write_safetensors(args.out, tensors)
    print(f"wrote {args.out}: {len(tensors)} tensors")


def command_same_weights(args):
    stored = read_weights(args.weights)
    weights = Checkpoint(args.checkpoint).weights
    for name, tensor in weights.items():
        theirs = stored.get(name, stored.get(name.removeprefix("transformer.")))
        if theirs is not None and args.rounded_to:
            theirs = theirs.to(getattr(torch, args.rounded_to))
        if theirs is None or theirs.shape != tensor.shape or not torch.equal(theirs.float(), tensor):
            sys.exit(f"FAIL: {args.checkpoint}'s {name} is not {args.weights}'s, bitwise")
    print(f"{args.checkpoint}: all {len(weights)} tensors are {args.weights}'s, bitwise")


def command_greedy(args):
    checkpoint = Checkpoint(args.checkpoint)
    model = checkpoint.model()
    tokens = json.loads(args.prompt_tokens)
    generated = []
    with torch.no_grad():
        for _ in range(args.tokens):
            generated.append(int(model(torch.tensor([(tokens + generated)[-checkpoint.block_size:]]))[0, -1].argmax()))
    print(json.dumps(generated))


def command_sample(args):
    """Teacher-forced on trainctl's output: each generated token must be PyTorch's argmax (the lowest
    id among equal maxima) over the same cropped context, so the two greedy decodings are equal."""
    checkpoint = Checkpoint(args.checkpoint)
    model = checkpoint.model()
    prompt = list(args.prompt.encode())
    with open(args.trainctl_output, "rb") as f:
        printed = f.read()
    generated = list(printed[len(prompt):len(prompt) + args.tokens])
    if printed[:len(prompt)] != bytes(prompt) or len(generated) != args.tokens:
        sys.exit(f"FAIL: trainctl sample did not print the prompt and {args.tokens} tokens: {printed!r}")
    tokens = prompt[:]
    with torch.no_grad():
        for position, trainctl_token in enumerate(generated):
            logits = model(torch.tensor([tokens[-checkpoint.block_size:]]))[0, -1]
            torch_token = int(logits.argmax())
            if torch_token != trainctl_token:
                sys.exit(f"FAIL: generated token {position}: trainctl {trainctl_token}, PyTorch's argmax {torch_token} "
                         f"(logits {logits[trainctl_token].item():.9g} vs {logits[torch_token].item():.9g})")
            tokens.append(torch_token)
    print(f"greedy continuation, {args.tokens} tokens, equal to PyTorch's: {bytes(tokens)!r}")


def main():
    torch.set_num_threads(1)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(required=True)
    loss = commands.add_parser("loss")
    loss.add_argument("checkpoint")
    loss.add_argument("--expect", type=float, required=True, help="trainctl's logged loss of that batch")
    loss.set_defaults(run=command_loss)
    train = commands.add_parser("train")
    train.add_argument("start")
    train.add_argument("end")
    train.set_defaults(run=command_train)
    sample = commands.add_parser("sample")
    sample.add_argument("checkpoint")
    sample.add_argument("--prompt", required=True)
    sample.add_argument("--tokens", type=int, required=True)
    sample.add_argument("--trainctl-output", required=True, help="what `trainctl sample --temperature 0` printed")
    sample.set_defaults(run=command_sample)
    init = commands.add_parser("init")
    init.add_argument("config")
    init.add_argument("out")
    init.add_argument("--seed", type=int, required=True)
    init.set_defaults(run=command_init)
    same_weights = commands.add_parser("same-weights")
    same_weights.add_argument("checkpoint")
    same_weights.add_argument("weights", help="a safetensors file or a Hugging Face directory")
    same_weights.add_argument("--rounded-to", choices=["bfloat16"], help="the weights rounded as torch's .to() does")
    same_weights.set_defaults(run=command_same_weights)
    greedy = commands.add_parser("greedy")
    greedy.add_argument("checkpoint")
    greedy.add_argument("--prompt-tokens", required=True)
    greedy.add_argument("--tokens", type=int, required=True)
    greedy.set_defaults(run=command_greedy)
    args = parser.parse_args()
    args.run(args)


if __name__ == "__main__":
    main()
