"""PyTorch peer of scripts/gpu_check.sh's throughput step: the same MLP (Linear/GELU stack,
softmax cross-entropy, AdamW, gradient clipping), trained on random data on one GPU, in fp32
and with bf16 autocast, eager and torch.compile. Prints samples/s, TFLOP/s and MFU per variant:
against the GPU's dense bf16 peak for bf16, its fp32 peak (no TF32) for fp32.
Usage: python3 scripts/bench_gpu_mlp.py --features 1024 --classes 1024 --hidden 8192 --layers 4 --batch 8192
"""
import argparse
import time

import torch

# Dense peaks in FLOP/s, (bf16, fp32), by a part of the GPU's name, first match: the table of
# kernels/cuda/memory.cpp, whose MFU trainctl logs. The PCIe and NVL parts run at other clocks.
PEAK_FLOPS = [("H100 PCIe", None), ("H100 NVL", None), ("H200 NVL", None),
              ("H100", (989e12, 67e12)), ("H200", (989e12, 67e12)), ("A100", (312e12, 19.5e12))]


def peak_flops(precision):
    name = torch.cuda.get_device_name()
    peaks = next((peaks for part, peaks in PEAK_FLOPS if part in name), None)
    return None if peaks is None else peaks[0 if precision == "bf16" else 1]


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
    peak = peak_flops(precision)
    mfu = f"MFU {rate * flops / peak:.1%} of {peak / 1e12:g} TFLOP/s" if peak else "MFU unknown (no peak for this GPU)"
    print(f"{name}: {rate:,.0f} samples/s, {rate * flops / 1e12:.1f} TFLOP/s, {mfu}", flush=True)


def main():
    parser = argparse.ArgumentParser()
    for flag, default in [("features", 1024), ("classes", 1024), ("hidden", 8192), ("layers", 4), ("batch", 8192),
                          ("warmup", 10), ("steps", 50)]:
        parser.add_argument(f"--{flag}", type=int, default=default)
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False  # trainctl's fp32 GEMM is true fp32
    print(f"GPU: {torch.cuda.get_device_name()}", flush=True)
    for precision in ("fp32", "bf16"):
        for compiled in (False, True):
            measure(args, precision, compiled)


if __name__ == "__main__":
    main()
