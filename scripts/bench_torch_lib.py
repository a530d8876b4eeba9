"""Shared by the PyTorch peers of the CPU benchmarks (bench_torch_mlp.py, bench_torch_gpt2.py):
their timing options and the timed loop, so that every peer is measured the same way."""
import json
import time

import torch


def add_timing_options(parser):
    parser.add_argument("--steps", type=int, required=True, help="timed steps")
    parser.add_argument("--warmup-steps", type=int, default=20, help="untimed steps first")
    parser.add_argument("--threads", type=int, default=1)


def time_training(step, args, units_per_step, unit):
    """Calls step(s) for the warm-up steps, then times args.steps more; prints one JSON line with
    "<unit>_per_s", the seconds, the last step's loss, the torch version and the threads."""
    torch.set_num_threads(args.threads)
    for s in range(args.warmup_steps):
        step(s)
    began = time.perf_counter()
    for s in range(args.warmup_steps, args.warmup_steps + args.steps):
        loss = step(s)
    seconds = time.perf_counter() - began
    print(json.dumps({f"{unit}_per_s": args.steps * units_per_step / seconds, "seconds": seconds,
                      "final_loss": float(loss), "torch": torch.__version__, "threads": args.threads}))
