"""What the PyTorch peers of trainctl's language models share (gpt2_peer.py, llama_peer.py, and the
benchmarks' scripts/bench_torch_*.py): llm.c's token files and the unshuffled batches trainctl
draws from them, trainctl's [train] defaults and AdamW's two groups, a trainctl checkpoint
(weights, AdamW state, position, config) as a model of the peer's, and the peers' common
commands over a model of theirs: the loss of a checkpoint's next batch, AdamW steps from one
checkpoint to another, and greedy decoding; and a peer's command line, whose commands, separated
by "::", run in one process, starting PyTorch once. A model
of a peer is a torch.nn.Module with Hugging Face's parameter names whose forward gives logits
[batch, time, vocab] of int64 tokens and whose loss(inputs, targets) is the mean cross-entropy."""
import argparse
import functools
import json
import sys
import tomllib

import h5py
import numpy as np
import torch
import torch.nn.functional as F

TOKEN_FILE_HEADER_INTS = 256
# (magic, version): the tokens' type. llm.c's GPT-2 format, and its Llama 3 format for ids above 65535.
TOKEN_FILE_FORMATS = {(20240520, 1): "<u2", (20240801, 7): "<u4"}


def read_tokens(path):
    """The tokens of an llm.c token file (a header of 256 int32, then uint16 or uint32 tokens)."""
    header = np.fromfile(path, dtype="<i4", count=TOKEN_FILE_HEADER_INTS)
    dtype = TOKEN_FILE_FORMATS.get((int(header[0]), int(header[1])))
    if dtype is None:
        sys.exit(f"{path}: not an llm.c token file (magic {header[0]}, version {header[1]})")
    tokens = np.fromfile(path, dtype=dtype, offset=TOKEN_FILE_HEADER_INTS * 4)
    if len(tokens) != header[2]:
        sys.exit(f"{path}: {len(tokens)} tokens, its header says {header[2]}")
    return tokens


def step_batch(tokens, block_size, global_batch, step):
    """(inputs, targets) [global_batch, block_size] of unshuffled step `step`: windows
    s*G ... s*G+G-1 of block_size + 1 tokens, wrapping at the epoch end."""
    windows = (len(tokens) - 1) // block_size
    first = step % (windows // global_batch) * global_batch
    rows = np.stack([tokens[i * block_size:i * block_size + block_size + 1] for i in range(first, first + global_batch)])
    rows = torch.from_numpy(rows.astype(np.int64))
    return rows[:, :-1], rows[:, 1:]


def train_settings(config):
    """A trainctl config's [train], with trainctl's defaults (common/train_spec.cpp) for the keys it leaves out."""
    return {"weight_decay": 0.0, "betas": [0.9, 0.999], "eps": 1e-8, "grad_clip": 0.0, "schedule": "constant",
            "warmup_steps": 0, **config["train"]}


def adamw(model, train):
    """torch.optim.AdamW in trainctl's two groups: weight decay on 2-D tensors (embeddings too), none on 1-D."""
    groups = [{"params": [p for p in model.parameters() if p.dim() >= 2], "weight_decay": train["weight_decay"]},
              {"params": [p for p in model.parameters() if p.dim() < 2], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=train["lr"], betas=tuple(train["betas"]), eps=train["eps"])


class Checkpoint:
    """A trainctl checkpoint: weights, AdamW state, position, and the config it trained with;
    model_of(config) builds the peer's model of that config, uninitialised."""

    def __init__(self, path, model_of):
        with h5py.File(path, "r") as f:
            self.weights = {name: torch.from_numpy(f["model"][name][:]) for name in f["model"]}
            self.optimizer_state = {name: {s: torch.from_numpy(f["optimizer"][name][s][:]) for s in f["optimizer"][name]}
                                    for name in f["optimizer"]}
            self.step = int(f.attrs["step"])
            self.optimizer_step = int(f.attrs["optimizer_step"])
            self.global_batch = int(f.attrs["global_batch"])
            self.config = tomllib.loads(f.attrs["config"])
        self.block_size = self.config["model"]["block_size"]
        self.train = train_settings(self.config)
        self.model_of = model_of

    def model(self):
        model = self.model_of(self.config)
        model.load_state_dict(self.weights, strict=True)
        return model

    @functools.cached_property
    def tokens(self):
        if self.config["data"].get("shuffle", True):
            sys.exit("the peer replays unshuffled runs only: set data.shuffle = false")
        return read_tokens(self.config["data"]["train"])

    def batch(self, step):
        return step_batch(self.tokens, self.block_size, self.global_batch, step)


def cross_entropy(logits, targets):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def check_close(what, torch_value, trainctl_value, rtol):
    relative = abs(torch_value - trainctl_value) / abs(trainctl_value)
    print(f"{what}: PyTorch {torch_value:.9g}, trainctl {trainctl_value:.9g} (relative difference {relative:.3g})")
    if not relative <= rtol:
        sys.exit(f"FAIL: {what} differs by more than {rtol:g} (relative)")


def worst_difference(name, ours, theirs):
    """max|ours - theirs| / max|theirs| of one tensor, and a line naming its worst element."""
    difference = (ours - theirs).abs()
    flat = int(difference.argmax())
    index = tuple(int(i) for i in np.unravel_index(flat, tuple(theirs.shape)))
    relative = (difference.view(-1)[flat] / theirs.abs().max()).item()
    return relative, (f"{name}: worst element {list(index)}: PyTorch {ours.view(-1)[flat].item():.9g} vs trainctl "
                      f"{theirs.view(-1)[flat].item():.9g} (relative difference {relative:.3g})")


def check_tensors(what, compared, tolerance):
    """compared: (name, PyTorch's, trainctl's) tensors, each within `tolerance` as worst_difference
    measures it; prints every tensor's worst element and the worst of all."""
    results = [worst_difference(*entry) for entry in compared]
    for _, line in results:
        print(line)
    worst, line = max(results)
    print(f"{what}, the worst of {len(results)} tensors: {line}")
    if not worst <= tolerance:
        sys.exit(f"FAIL: {what} differs by {worst:.3g} > {tolerance:g} (relative)")


def command_loss(args, model_of):
    """The mean loss of the batch of the checkpoint's next step, against trainctl's, to 1e-5."""
    checkpoint = Checkpoint(args.checkpoint, model_of)
    with torch.no_grad():
        loss = checkpoint.model().loss(*checkpoint.batch(checkpoint.step)).item()
    check_close(f"loss of step {checkpoint.step + 1}'s batch", loss, args.expect, 1e-5)


def logged_losses(metrics):
    """{step: loss} of a metrics.jsonl's step records (the loss of step - 1's batch), or None."""
    if metrics is None:
        return None
    with open(metrics) as f:
        records = [json.loads(line) for line in f]
    return {record["step"]: record["loss"] for record in records if "loss" in record and "event" not in record}


def check_training(start_path, end_path, model_of, losses=None, loss_tolerance=1e-5):
    """AdamW from the checkpoint at start_path over the same unshuffled batches, against end_path's
    weights and AdamW state to 1e-4; with `losses` (trainctl's logged loss of each step's batch, by
    step), each step's loss to loss_tolerance too."""
    start, end = Checkpoint(start_path, model_of), Checkpoint(end_path, model_of)
    train = start.train
    if train["schedule"] != "constant" or train["warmup_steps"] != 0:
        sys.exit("the peer trains at a constant learning rate: set train.schedule = \"constant\", warmup_steps = 0")
    model = start.model()
    optimizer = adamw(model, train)
    for name, parameter in model.named_parameters():
        optimizer.state[parameter] = {"step": torch.tensor(float(start.optimizer_step)), **start.optimizer_state[name]}
    worst_loss = 0.0
    for step in range(start.step, end.step):
        optimizer.zero_grad()
        loss = model.loss(*start.batch(step))
        loss.backward()
        if losses is not None:
            relative = abs(loss.item() - losses[step + 1]) / abs(losses[step + 1])
            worst_loss = max(worst_loss, relative)
            print(f"step {step + 1}: loss PyTorch {loss.item():.9g}, trainctl {losses[step + 1]:.9g} "
                  f"(relative difference {relative:.3g})")
            if not relative <= loss_tolerance:
                sys.exit(f"FAIL: step {step + 1}'s loss differs by {relative:.3g} > {loss_tolerance:g} (relative)")
        if train["grad_clip"] > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), train["grad_clip"])
        optimizer.step()
    if losses is not None:
        print(f"{end.step - start.step} steps' losses within {worst_loss:.3g} of trainctl's (relative)")

    compared = [(name, parameter.detach(), end.weights[name]) for name, parameter in model.named_parameters()]
    compared += [(f"{name}/{state}", optimizer.state[parameter][state], end.optimizer_state[name][state])
                 for name, parameter in model.named_parameters() for state in ("exp_avg", "exp_avg_sq")]
    check_tensors(f"after {end.step - start.step} AdamW steps, trainctl's step-{end.step} checkpoint", compared, 1e-4)


def greedy(model, tokens, count, block_size):
    """`count` tokens of greedy decoding after `tokens` (argmax, the lowest id among equal maxima),
    each over the last block_size tokens of the context."""
    generated = []
    with torch.no_grad():
        for _ in range(count):
            generated.append(int(model(torch.tensor([(tokens + generated)[-block_size:]]))[0, -1].argmax()))
    return generated


def command_greedy(args, model_of):
    checkpoint = Checkpoint(args.checkpoint, model_of)
    print(json.dumps(greedy(checkpoint.model(), json.loads(args.prompt_tokens), args.tokens, checkpoint.block_size)))


def check_sample(model, block_size, prompt, count, printed):
    """Teacher-forced on trainctl's output (the bytes `trainctl sample` printed for byte tokens):
    each generated token must be PyTorch's argmax over the same cropped context, so the two
    greedy decodings are equal."""
    prompt = list(prompt.encode())
    generated = list(printed[len(prompt):len(prompt) + count])
    if printed[:len(prompt)] != bytes(prompt) or len(generated) != count:
        sys.exit(f"FAIL: trainctl sample did not print the prompt and {count} tokens: {printed!r}")
    tokens = prompt[:]
    with torch.no_grad():
        for position, trainctl_token in enumerate(generated):
            logits = model(torch.tensor([tokens[-block_size:]]))[0, -1]
            torch_token = int(logits.argmax())
            if torch_token != trainctl_token:
                sys.exit(f"FAIL: generated token {position}: trainctl {trainctl_token}, PyTorch's argmax {torch_token} "
                         f"(logits {logits[trainctl_token].item():.9g} vs {logits[torch_token].item():.9g})")
            tokens.append(torch_token)
    print(f"greedy continuation, {count} tokens, equal to PyTorch's: {bytes(tokens)!r}")


def check_checkpoint_sample(path, model_of, prompt, count, trainctl_output):
    """check_sample with the model of the checkpoint at `path` and what trainctl printed to the file
    trainctl_output."""
    checkpoint = Checkpoint(path, model_of)
    with open(trainctl_output, "rb") as f:
        printed = f.read()
    check_sample(checkpoint.model(), checkpoint.block_size, prompt, count, printed)


def add_common_commands(commands, model_of):
    """The subcommands loss, train, sample and greedy (above) for the peer's model_of."""
    loss = commands.add_parser("loss")
    loss.add_argument("checkpoint")
    loss.add_argument("--expect", type=float, required=True, help="trainctl's logged loss of that batch")
    loss.set_defaults(run=lambda args: command_loss(args, model_of))
    train = commands.add_parser("train")
    train.add_argument("start")
    train.add_argument("end")
    train.add_argument("--metrics", help="the run's metrics.jsonl (train.log_every = 1): each step's loss to 1e-5 too")
    train.set_defaults(run=lambda args: check_training(args.start, args.end, model_of, logged_losses(args.metrics)))
    sample = commands.add_parser("sample")
    sample.add_argument("checkpoint")
    sample.add_argument("--prompt", required=True)
    sample.add_argument("--tokens", type=int, required=True)
    sample.add_argument("--trainctl-output", required=True, help="what `trainctl sample --temperature 0` printed")
    sample.set_defaults(run=lambda args: check_checkpoint_sample(args.checkpoint, model_of, args.prompt, args.tokens,
                                                                 args.trainctl_output))
    greedy_command = commands.add_parser("greedy")
    greedy_command.add_argument("checkpoint")
    greedy_command.add_argument("--prompt-tokens", required=True)
    greedy_command.add_argument("--tokens", type=int, required=True)
    greedy_command.set_defaults(run=lambda args: command_greedy(args, model_of))


def peer_main(description, model_of, add_own_commands):
    """A peer's command line: the common commands and its own (add_own_commands(subparsers));
    several commands separated by "::" run one after the other in this process."""
    torch.set_num_threads(1)
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(required=True)
    add_common_commands(commands, model_of)
    add_own_commands(commands)
    command = []
    for token in sys.argv[1:] + ["::"]:
        if token != "::":
            command.append(token)
            continue
        args = parser.parse_args(command)
        args.run(args)
        command = []
