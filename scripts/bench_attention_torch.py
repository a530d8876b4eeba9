#!/usr/bin/env python3
"""PyTorch's causal attention beside trainctl's (scripts/gpu_check.sh attention): for each shape
B,T,H,D (default GPT-2 124M's 8,1024,12,64 and 4,2048,16,128), torch.nn.functional.
scaled_dot_product_attention(q, k, v, is_causal=True) in bf16 on the GPU, forward and backward,
timed as tests/bench_attention.cpp times trainctl's (the median of --reps runs after warm-up, each
waited for) and counted with the same causal FLOPs; whether a rerun gives bitwise the same output
and gradients. One line of JSON per shape, the same fields as bench_attention's."""
import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F


def median_seconds(reps, run):
    seconds = []
    for _ in range(reps):
        start = time.perf_counter()
        run()
        torch.cuda.synchronize()
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds)


def bench(batch, seq, heads, head_size, reps):
    generator = torch.Generator(device="cuda").manual_seed(1)
    shape = (batch, heads, seq, head_size)
    q, k, v = (torch.empty(shape, device="cuda", dtype=torch.bfloat16).uniform_(-1, 1, generator=generator)
               .requires_grad_() for _ in range(3))
    grad_out = torch.empty(shape, device="cuda", dtype=torch.bfloat16).uniform_(-1, 1, generator=generator)
    out = None

    def forward():
        nonlocal out
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)

    def backward():
        for tensor in (q, k, v):
            tensor.grad = None
        out.backward(grad_out, retain_graph=True)

    forward()
    backward()
    first = [out.detach().clone()] + [tensor.grad.clone() for tensor in (q, k, v)]
    forward_seconds = median_seconds(reps, forward)
    backward_seconds = median_seconds(reps, backward)
    again = [out.detach()] + [tensor.grad for tensor in (q, k, v)]
    forward_flops = 4.0 * batch * heads * seq * seq * head_size / 2.0
    backward_flops = 2.5 * forward_flops
    print(json.dumps({
        "implementation": "pytorch_sdpa", "batch": batch, "seq": seq, "heads": heads, "head_size": head_size,
        "forward_ms": round(forward_seconds * 1e3, 4), "backward_ms": round(backward_seconds * 1e3, 4),
        "forward_tflops": round(forward_flops / forward_seconds / 1e12, 2),
        "backward_tflops": round(backward_flops / backward_seconds / 1e12, 2),
        "total_tflops": round((forward_flops + backward_flops) / (forward_seconds + backward_seconds) / 1e12, 2),
        "bitwise_rerun": all(torch.equal(a, b) for a, b in zip(first, again)),
        "torch": torch.__version__}), flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("shapes", nargs="*", default=["8,1024,12,64", "4,2048,16,128"])
    parser.add_argument("--reps", type=int, default=20)
    arguments = parser.parse_args()
    for shape in arguments.shapes:
        bench(*map(int, shape.split(",")), arguments.reps)


if __name__ == "__main__":
    main()
