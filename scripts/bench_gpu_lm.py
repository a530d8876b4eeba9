"""PyTorch peer of scripts/gpu_check.sh's language-model throughput steps (gpt2bench, llama): the
GPT-2 or the Llama of a trainctl config (tests/integration/gpt2_peer.py, llama_peer.py: Hugging
Face's layouts, AdamW in two groups, gradient clipping), trained on one GPU on the config's token
file, unshuffled, in fp32 and with bf16 autocast, eager and torch.compile, with PyTorch's fused
causal attention (scaled_dot_product_attention) as people train it. Prints tokens/s, TFLOP/s and
MFU per variant, with the FLOPs per token trainctl counts (6 N + 12 n_layer (attention width)
block_size, N the parameters a token's matrix products use: models/gpt2/gpt2.cpp,
models/llama/llama.cpp) and the peaks of bench_gpu_mlp.py.
Usage: python3 scripts/bench_gpu_lm.py --config CONFIG.toml [--warmup 10] [--steps 30]
                                        [--precisions fp32,bf16]
"""
import argparse
import pathlib
import sys
import time
import tomllib

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests" / "integration"))
import gpt2_peer  # noqa: E402
import llama_peer  # noqa: E402
from bench_gpu_mlp import peak_flops  # noqa: E402
from peer_lib import adamw, read_tokens, step_batch, train_settings  # noqa: E402


def model_of(config, seed):
    """The config's model, initialised, and its FLOPs per token as trainctl counts them."""
    shape = config["model"]
    if shape["kind"] == "gpt2":
        model = gpt2_peer.gpt2_of(config)
        model.init_weights(seed)
        looked_up, attention_width = model.transformer.wpe.weight.numel(), shape["n_embd"]
    else:
        model = llama_peer.llama_of(config)
        model.init_lively(seed)
        spec = llama_peer.llama_spec(shape)
        looked_up = 0 if spec["tie_embeddings"] else model.model.embed_tokens.weight.numel()
        attention_width = spec["n_head"] * spec["head_dim"]
    parameters = sum(p.numel() for p in model.parameters()) - looked_up
    return model, 6 * parameters + 12 * shape["n_layer"] * attention_width * shape["block_size"]


def measure(config, tokens, args, precision, compiled):
    train = train_settings(config)
    model, flops = model_of(config, train.get("seed", 0))
    model = model.cuda()
    optimizer = adamw(model, train)
    block_size, batch = config["model"]["block_size"], train["micro_batch"]
    batches = [tuple(t.cuda() for t in step_batch(tokens, block_size, batch, s)) for s in range(4)]

    def step(inputs, targets):
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=precision == "bf16"):
            loss = model.loss(inputs, targets)
        loss.backward()
        if train["grad_clip"] > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), train["grad_clip"])
        optimizer.step()

    run = torch.compile(step) if compiled else step
    for s in range(args.warmup):
        run(*batches[s % len(batches)])
    torch.cuda.synchronize()
    began = time.perf_counter()
    for s in range(args.steps):
        run(*batches[s % len(batches)])
    torch.cuda.synchronize()
    rate = args.steps * batch * block_size / (time.perf_counter() - began)
    peak = peak_flops(precision)
    mfu = f"MFU {rate * flops / peak:.1%}" if peak else "MFU unknown (no peak for this GPU)"
    print(f"pytorch {torch.__version__} {precision} {'compile' if compiled else 'eager'}: {rate:,.0f} tokens/s, "
          f"{rate * flops / 1e12:.1f} TFLOP/s, {mfu}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--precisions", default="fp32,bf16", help="comma-separated: fp32, bf16 or both")
    args = parser.parse_args()
    with open(args.config, "rb") as f:
        config = tomllib.load(f)
    tokens = read_tokens(pathlib.Path(args.config).parent / config["data"]["train"])
    torch.backends.cuda.matmul.allow_tf32 = False  # trainctl's fp32 GEMM is true fp32
    gpt2_peer.Attention.fused = llama_peer.Attention.fused = True
    print(f"GPU: {torch.cuda.get_device_name()}", flush=True)
    for precision in args.precisions.split(","):
        for compiled in (False, True):
            measure(config, tokens, args, precision, compiled)


if __name__ == "__main__":
    main()
