#!/usr/bin/python3
"""The PyTorch peer of scripts/bench_cpu.sh: trains the same MLP as a trainctl config
(torch.nn.Sequential(Linear, Act, ..., Linear), AdamW, cross-entropy) on the same HDF5 data
with the same batch, in one process, and prints samples/s as JSON."""
import argparse

import h5py
import torch

from bench_torch_lib import add_timing_options, time_training


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", required=True)
    parser.add_argument("--hidden", type=int, nargs="+", required=True)
    parser.add_argument("--classes", type=int, required=True)
    parser.add_argument("--activation", choices=["relu", "gelu"], default="gelu")
    parser.add_argument("--batch", type=int, required=True)
    add_timing_options(parser)
    args = parser.parse_args()

    torch.manual_seed(0)
    with h5py.File(args.data, "r") as f:
        x = torch.from_numpy(f["x"][:])
        y = torch.from_numpy(f["y"][:]).long()
    widths = [x.shape[1], *args.hidden, args.classes]
    layers = []
    for i in range(len(widths) - 1):
        layers.append(torch.nn.Linear(widths[i], widths[i + 1]))
        if i + 2 < len(widths):
            layers.append(torch.nn.ReLU() if args.activation == "relu" else torch.nn.GELU())
    model = torch.nn.Sequential(*layers)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    loss_fn = torch.nn.CrossEntropyLoss()
    steps_per_epoch = x.shape[0] // args.batch

    def step(s):
        start = (s % steps_per_epoch) * args.batch
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(x[start:start + args.batch]), y[start:start + args.batch])
        loss.backward()
        optimizer.step()
        return loss

    time_training(step, args, args.batch, "samples")


if __name__ == "__main__":
    main()
