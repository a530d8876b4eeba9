"""PyTorch peer of scripts/gpu_check.sh's throughput step: the same MLP (Linear/GELU stack,
softmax cross-entropy, AdamW, gradient clipping), trained on random data on one GPU, in fp32
and with bf16 autocast, eager and torch.compile. Prints samples/s and TFLOP/s per variant.
Usage: python3 scripts/bench_gpu_mlp.py --features 1024 --classes 1024 --hidden 8192 --layers 4 --batch 8192
"""
import argparse
import time

import torch


def model(args):
    widths = [args.features] + [args.hidden] * args.layers + [args.classes]
    layers = []
    for i, (a, b) in enumerate(zip(widths, widths[1:])):
        layers.append(torch.nn.Linear(a, b))
        if i + 2 < len(widths):
            layers.append(torch.nn.GELU())
    return torch.nn.Sequential(*layers).cuda(), widths


def measure(args, precision, compiled):
    torch.manual_seed(5)
    net, widths = model(args)
    optimizer = torch.optim.AdamW(net.parameters(), lr=1e-3, weight_decay=0.01, fused=True)
    x = torch.randn(args.batch, args.features, device="cuda")
    y = torch.randint(0, args.classes, (args.batch,), device="cuda")

    def step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=precision == "bf16"):
            loss = torch.nn.functional.cross_entropy(net(x), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        optimizer.step()

    run = torch.compile(step) if compiled else step
    for _ in range(args.warmup):
        run()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(args.steps):
        run()
    torch.cuda.synchronize()
    rate = args.steps * args.batch / (time.perf_counter() - start)
    flops = 6 * sum(a * b for a, b in zip(widths, widths[1:]))
    name = f"pytorch {torch.__version__} {precision} {'compile' if compiled else 'eager'}"
    print(f"{name}: {rate:,.0f} samples/s, {rate * flops / 1e12:.1f} TFLOP/s, MFU {rate * flops / 989e12:.1%} of 989 TFLOP/s")


def main():
    parser = argparse.ArgumentParser()
    for flag, default in [("features", 1024), ("classes", 1024), ("hidden", 8192), ("layers", 4), ("batch", 8192),
                          ("warmup", 10), ("steps", 50)]:
        parser.add_argument(f"--{flag}", type=int, default=default)
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False  # trainctl's fp32 GEMM is true fp32
    for precision in ("fp32", "bf16"):
        for compiled in (False, True):
            measure(args, precision, compiled)


if __name__ == "__main__":
    main()
