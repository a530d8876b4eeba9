"""PyTorch's side of gpt2_pytorch.sh, and the model of scripts/bench_torch_gpt2.py: a GPT-2
written here (no transformers) with the parameter names and layouts of Hugging Face's
GPT2LMHeadModel (Conv1D weights [in, out], the LM head tied to transformer.wte), so that a
trainctl checkpoint loads with load_state_dict(strict=True). Everything else it needs (shape,
data file, batch, optimizer settings) it reads from the checkpoint's resolved config; what the
peers share (the commands loss, train, sample and greedy among them) is peer_lib.py's.
  loss CKPT --expect L      the mean loss of the batch of the checkpoint's next step, to 1e-5
  train START END [--metrics FILE]
                            AdamW from START over the same unshuffled batches, against END, to 1e-4
  sample CKPT --prompt P --tokens N --trainctl-output FILE
                            trainctl's greedy continuation, token by token, against PyTorch's argmax
  init CONFIG OUT --seed S  a model.safetensors of the config's GPT-2 from PyTorch's init, named as
                            the Hugging Face Hub's GPT-2 files are (no "transformer." prefix, the
                            causal-mask buffers and the tied lm_head.weight stored too)
  greedy CKPT --prompt-tokens JSON --tokens N
                            PyTorch's greedy continuation (argmax, the lowest id among equal
                            maxima) of the prompt's tokens, as a JSON list of N tokens
"""
import math
import sys
import tomllib

import torch
import torch.nn.functional as F

from hf_weights import write_safetensors
from peer_lib import cross_entropy, peer_main


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
        return cross_entropy(self(inputs), targets)


def gpt2_of(config):
    """The GPT-2 that a trainctl config's [model] describes, uninitialised."""
    model = config["model"]
    if model.get("kind") != "gpt2":
        sys.exit(f"model.kind is {model.get('kind')!r}, not 'gpt2'")
    return Gpt2(**{key: model[key] for key in ("n_layer", "n_head", "n_embd", "block_size", "vocab_size")})


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


def add_own_commands(commands):
    init = commands.add_parser("init")
    init.add_argument("config")
    init.add_argument("out")
    init.add_argument("--seed", type=int, required=True)
    init.set_defaults(run=command_init)


if __name__ == "__main__":
    peer_main(__doc__, gpt2_of, add_own_commands)
