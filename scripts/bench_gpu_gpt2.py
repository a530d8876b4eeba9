"""PyTorch peer of scripts/gpu_check.sh's GPT-2 throughput step (gpt2bench): the GPT-2 of a
trainctl config (tests/integration/gpt2_peer.py: Hugging Face's layout, GPT-2's init, AdamW in
two groups, gradient clipping), trained on one GPU on the config's token file, unshuffled, in
fp32 and with bf16 autocast, eager and torch.compile, with PyTorch's fused causal attention
(scaled_dot_product_attention) as people train it. Prints tokens/s, TFLOP/s and MFU per variant,
with the FLOPs per token trainctl counts (models/gpt2/gpt2.cpp: 6 N + 12 n_layer n_embd block_size,
N the parameters without wpe) and the peaks of bench_gpu_mlp.py.
Usage: python3 scripts/bench_gpu_gpt2.py --config CONFIG.toml [--warmup 10] [--steps 30]
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
from bench_gpu_mlp import peak_flops  # noqa: E402
from gpt2_peer import Attention, gpt2_of  # noqa: E402
from peer_lib import adamw, read_tokens, step_batch, train_settings  # noqa: E402


def flops_per_token(model, config):
    shape = config["model"]
    parameters = sum(p.numel() for p in model.parameters()) - model.transformer.wpe.weight.numel()
    return 6 * parameters + 12 * shape["n_layer"] * shape["n_embd"] * shape["block_size"]


def measure(config, tokens, args, precision, compiled):
    train = train_settings(config)
    model = gpt2_of(config)
    model.init_weights(train.get("seed", 0))
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
    flops = flops_per_token(model, config)
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
    Attention.fused = True
    print(f"GPU: {torch.cuda.get_device_name()}", flush=True)
    for precision in args.precisions.split(","):
        for compiled in (False, True):
            measure(config, tokens, args, precision, compiled)


if __name__ == "__main__":
    main()
