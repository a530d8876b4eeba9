#!/usr/bin/python3
"""The PyTorch peer of scripts/bench_gpt2_cpu.sh: trains the GPT-2 of tests/integration/gpt2_peer.py
(Hugging Face's layout, eager) with the shape, token data, micro-batch and AdamW settings of
the one-rank trainctl config the benchmark runs (unshuffled windows, GPT-2's init, the same
gradient clipping), in one process, and prints tokens/s as JSON."""
import argparse
import pathlib
import sys
import tomllib

import torch

from bench_torch_lib import add_timing_options, time_training

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests" / "integration"))
from gpt2_peer import gpt2_of  # noqa: E402
from peer_lib import adamw, read_tokens, step_batch, train_settings  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--config", required=True, help="a trainctl config with [model] kind = \"gpt2\"")
    add_timing_options(parser)
    args = parser.parse_args()

    with open(args.config, "rb") as f:
        config = tomllib.load(f)
    train = train_settings(config)
    model = gpt2_of(config)
    model.init_weights(train.get("seed", 0))
    optimizer = adamw(model, train)
    # trainctl reads data paths relative to the config's directory.
    tokens = read_tokens(pathlib.Path(args.config).parent / config["data"]["train"])
    block_size, batch = config["model"]["block_size"], train["micro_batch"]

    def step(s):
        optimizer.zero_grad(set_to_none=True)
        loss = model.loss(*step_batch(tokens, block_size, batch, s))
        loss.backward()
        if train["grad_clip"] > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), train["grad_clip"])
        optimizer.step()
        return loss

    time_training(step, args, batch * block_size, "tokens")


if __name__ == "__main__":
    main()
