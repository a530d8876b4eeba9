#!/usr/bin/env python3
"""PyTorch's causal attention beside trainctl's (scripts/gpu_check.sh attention): for each shape
B,T,H,D or B,T,H,KV,D (H query heads sharing KV key/value heads; default GPT-2 124M's
8,1024,12,64 and 4,2048,16,128, and Llama 3.2 1B's 4,2048,32,8,64),
torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True) in bf16 on the GPU,
forward and backward, timed as tests/bench_attention.cpp times trainctl's (the median of --reps
runs after warm-up, each waited for) and counted with the same causal FLOPs; whether a rerun gives
bitwise the same output and gradients. Grouped-query shapes run twice where this PyTorch has
enable_gqa (2.5 and later): with it, and with the key/value heads repeated to every query head of
their group first (Hugging Face's repeat_kv, inside the timed forward, whose backward then sums
the copies' gradients), as models without enable_gqa run it; "gqa" names which. One line of JSON
per run, the same fields as bench_attention's. --device cpu runs the same on the CPU in fp32, a
check of this script on a machine without a GPU (its times are not a benchmark). Exit 77 where
this PyTorch has no scaled_dot_product_attention (before 2.0: Debian 12's is 1.13)."""
import argparse
import json
import statistics
import sys
import time

import torch
import torch.nn.functional as F


def has_enable_gqa():
    """Whether this PyTorch's scaled_dot_product_attention takes enable_gqa (2.5 and later)."""
    tiny = torch.zeros(1, 2, 1, 1)
    try:
        F.scaled_dot_product_attention(tiny, tiny[:, :1], tiny[:, :1], enable_gqa=True)
    except TypeError:
        return False
    return True


def repeat_kv(x, group):
    """[B, KV, T, D] -> [B, KV * group, T, D], each key/value head repeated for its group's query
    heads, in Hugging Face's order (query head h reads key/value head h // group)."""
    return x if group == 1 else x.repeat_interleave(group, dim=1)


def median_seconds(reps, run, synchronize):
    seconds = []
    for _ in range(reps):
        start = time.perf_counter()
        run()
        synchronize()
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds)


def bench(batch, seq, heads, kv_heads, head_size, gqa, reps, device):
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    synchronize = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    generator = torch.Generator(device=device).manual_seed(1)

    def uniform(head_count):
        return torch.empty((batch, head_count, seq, head_size), device=device, dtype=dtype).uniform_(
            -1, 1, generator=generator)

    q = uniform(heads).requires_grad_()
    k, v = (uniform(kv_heads).requires_grad_() for _ in range(2))
    grad_out = uniform(heads)
    group = heads // kv_heads
    out = None

    def forward():
        nonlocal out
        if gqa == "enable_gqa":
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        else:
            out = F.scaled_dot_product_attention(q, repeat_kv(k, group), repeat_kv(v, group), is_causal=True)

    def backward():
        for tensor in (q, k, v):
            tensor.grad = None
        out.backward(grad_out, retain_graph=True)

    forward()
    backward()
    first = [out.detach().clone()] + [tensor.grad.clone() for tensor in (q, k, v)]
    forward_seconds = median_seconds(reps, forward, synchronize)
    backward_seconds = median_seconds(reps, backward, synchronize)
    again = [out.detach()] + [tensor.grad for tensor in (q, k, v)]
    forward_flops = 4.0 * batch * heads * seq * seq * head_size / 2.0
    backward_flops = 2.5 * forward_flops
    print(json.dumps({
        "implementation": "pytorch_sdpa", "batch": batch, "seq": seq, "heads": heads, "kv_heads": kv_heads,
        "head_size": head_size, "gqa": gqa,
        "forward_ms": round(forward_seconds * 1e3, 4), "backward_ms": round(backward_seconds * 1e3, 4),
        "forward_tflops": round(forward_flops / forward_seconds / 1e12, 2),
        "backward_tflops": round(backward_flops / backward_seconds / 1e12, 2),
        "total_tflops": round((forward_flops + backward_flops) / (forward_seconds + backward_seconds) / 1e12, 2),
        "bitwise_rerun": all(torch.equal(a, b) for a, b in zip(first, again)),
        "device": device, "torch": torch.__version__}), flush=True)


def parse_shape(text):
    """B,T,H,D (KV = H) or B,T,H,KV,D."""
    sizes = [int(size) for size in text.split(",")]
    if len(sizes) == 4:
        sizes.insert(3, sizes[2])
    if len(sizes) != 5 or sizes[2] % sizes[3] != 0:
        raise argparse.ArgumentTypeError(f"a shape is B,T,H,D or B,T,H,KV,D with KV dividing H: {text}")
    return sizes


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("shapes", nargs="*", type=parse_shape,
                        default=[parse_shape(shape) for shape in ("8,1024,12,64", "4,2048,16,128", "4,2048,32,8,64")])
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    arguments = parser.parse_args()
    if not hasattr(F, "scaled_dot_product_attention"):
        print(f"SKIP: PyTorch {torch.__version__} has no scaled_dot_product_attention (2.0 and later)",
              file=sys.stderr)
        return 77
    variants = ["enable_gqa", "repeat_kv"] if has_enable_gqa() else ["repeat_kv"]
    for batch, seq, heads, kv_heads, head_size in arguments.shapes:
        for gqa in (variants if kv_heads != heads else [None]):
            bench(batch, seq, heads, kv_heads, head_size, gqa, arguments.reps, arguments.device)


if __name__ == "__main__":
    sys.exit(main())
