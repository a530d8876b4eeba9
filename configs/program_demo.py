#!/usr/bin/python3
"""program_demo: a small PyTorch DDP program (CPU, gloo) that trainctl runs as one process per rank.

It fits an MLP to y = sin(x @ w_true) and follows trainctl's program contract:
  * RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, ... are what torch.distributed's env:// reads;
  * its checkpoints go to TRAINCTL_CHECKPOINT_DIR, and every start resumes from the newest one;
  * each checkpoint's step goes to $TRAINCTL_RUN_DIR/progress.step, for the no-progress guard;
  * rank 0 appends {"step", "loss"} and {"step", "val_loss"} lines to $TRAINCTL_RUN_DIR/metrics.jsonl;
  * on the job's signal (SIGTERM, SIGUSR1 or SIGUSR2) the ranks agree on a step, save it and exit
    with TRAINCTL_EXIT_REQUEUE, so that trainctl requeues the job;
  * at the end it writes $TRAINCTL_RUN_DIR/final.pt and every rank exits 0.
Its values come from the command line; it does not read TRAINCTL_PARAMS. A resumed run ends with
weights bitwise equal to an uninterrupted run's: a batch depends only on (seed, step, rank), and
everything else that training carries from step to step is in the checkpoint.
"""
import argparse
import datetime
import json
import os
import re
import signal
import socket
import time
from pathlib import Path

STOP_SIGNALS = (signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2)
stop_requested = False


def request_stop(signum, frame):
    # Only a flag: the signal may come in the middle of a collective, and the ranks must first
    # agree on the step at which they all stop.
    global stop_requested
    stop_requested = True


# Before importing torch, which takes seconds: the job's signal can come that early, and its
# default action would kill the process instead of letting it save after its first step.
for signum in STOP_SIGNALS:
    signal.signal(signum, request_stop)

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

IN_FEATURES = 16
BATCH_ROWS = 32
VAL_ROWS = 256
KEEP_CHECKPOINTS = 2
CHECKPOINT_NAME = re.compile(r"step-(\d+)\.pt")


def make_batch(seed, rows, w_true):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, IN_FEATURES, generator=generator)
    return x, torch.sin(x @ w_true)


def write_atomically(path, write):
    # trainctl and the next run may read these files at any moment: they must never see half.
    tmp = path.with_name(f".{path.name}.tmp")
    write(tmp)
    os.replace(tmp, path)


def checkpoints(checkpoint_dir):
    """The step-*.pt files, oldest first by the step in their name."""
    found = [(int(m.group(1)), path) for path in checkpoint_dir.iterdir()
             if (m := CHECKPOINT_NAME.fullmatch(path.name))]
    return [path for _, path in sorted(found)]


def save_checkpoint(step, model, optimizer, rank, checkpoint_dir, run_dir):
    if rank == 0:
        state = {"step": step, "model": model.state_dict(), "optimizer": optimizer.state_dict()}
        write_atomically(checkpoint_dir / f"step-{step:08d}.pt", lambda tmp: torch.save(state, tmp))
        write_atomically(run_dir / "progress.step", lambda tmp: tmp.write_text(f"{step}\n"))
        for old in checkpoints(checkpoint_dir)[:-KEEP_CHECKPOINTS]:
            old.unlink()
    # No rank may run ahead of a checkpoint that is not on disk yet.
    dist.barrier()


def mean_in_rank_order(world_size, bucket):
    # DDP communication hook. Gloo's ring all-reduce adds an element's terms in an order set by
    # the element's place in DDP's gradient bucket, and DDP lays its buckets out anew after the
    # first step of every run, so with 3 or more ranks a resumed run would drift in the last bits.
    # Gathered copies added in rank order give the same sum whatever the layout.
    grads = bucket.buffer()
    copies = [torch.empty_like(grads) for _ in range(world_size)]
    gathered = dist.all_gather(copies, grads, async_op=True).get_future()
    return gathered.then(lambda _: sum(copies[1:], copies[0]) / world_size)


def all_ranks_stop():
    flag = torch.tensor([int(stop_requested)])
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return bool(flag.item())


def shutdown(exit_code):
    # A rank that left early would break its peers' last collective and look like a failure.
    dist.barrier()
    dist.destroy_process_group()
    # os._exit skips interpreter teardown, which in torch 1.13 can deadlock (DDP's reducer joins
    # gloo's worker thread while holding the GIL that thread waits for) and which puts back the
    # default signal actions, so that a late signal would kill a run that is already decided.
    os._exit(exit_code)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--save-every", type=int, default=20, help="0: only on a stop signal and at the end")
    parser.add_argument("--log-every", type=int, default=5)
    parser.add_argument("--eval-every", type=int, default=0, help="0: no evaluation")
    parser.add_argument("--step-sleep", type=float, default=0.0, help="seconds to pause per step")
    parser.add_argument("--tag", default="")
    args = parser.parse_args()
    if args.log_every < 1:
        parser.error("--log-every must be at least 1")

    env = os.environ
    rank, world_size = int(env["RANK"]), int(env["WORLD_SIZE"])
    node = env.get("SLURMD_NODENAME") or socket.gethostname()
    print(f"program_demo: rank {rank} of {world_size} (local {env['LOCAL_RANK']} of "
          f"{env['LOCAL_WORLD_SIZE']}) on {node}, master {env['MASTER_ADDR']}:{env['MASTER_PORT']}, "
          f"restart {env['TRAINCTL_RESTART']}, tag {args.tag!r}", flush=True)
    run_dir, checkpoint_dir = Path(env["TRAINCTL_RUN_DIR"]), Path(env["TRAINCTL_CHECKPOINT_DIR"])

    torch.set_num_threads(int(env.get("OMP_NUM_THREADS", "1")))
    # Blocked while torch.distributed connects and starts its threads: the rendezvous fails on an
    # interrupted system call, and the threads inherit the mask, so that later signals land on
    # this thread, where the handler runs. A signal that comes meanwhile is delivered right after.
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)

    torch.manual_seed(args.seed)
    model = torch.nn.Sequential(torch.nn.Linear(IN_FEATURES, 64), torch.nn.Tanh(), torch.nn.Linear(64, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    w_true = torch.randn(IN_FEATURES, 1, generator=torch.Generator().manual_seed(args.seed))
    w_true /= IN_FEATURES ** 0.5  # keeps x @ w_true near unit scale, where sin is learnable
    val_x, val_y = make_batch(args.seed + 1, VAL_ROWS, w_true)

    start = 1
    saved = checkpoints(checkpoint_dir)
    if saved:
        state = torch.load(saved[-1], map_location="cpu")
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start = state["step"] + 1
        print(f"program_demo: rank {rank}: resuming from {saved[-1].name}", flush=True)
    ddp_model = DistributedDataParallel(model)
    ddp_model.register_comm_hook(world_size, mean_in_rank_order)
    metrics = open(run_dir / "metrics.jsonl", "a") if rank == 0 else None

    def log(**fields):
        metrics.write(json.dumps(fields) + "\n")
        metrics.flush()

    for step in range(start, args.steps + 1):
        x, y = make_batch(args.seed * 1_000_003 + step * 1009 + rank, BATCH_ROWS, w_true)
        # set_to_none: the step's gradients must not depend on the previous step's, which a
        # resumed run never had.
        optimizer.zero_grad(set_to_none=True)
        loss = F.mse_loss(ddp_model(x), y)
        loss.backward()
        optimizer.step()

        if step % args.log_every == 0 or step == args.steps:
            mean_loss = loss.detach().clone()
            dist.all_reduce(mean_loss)
            if rank == 0:
                log(step=step, loss=mean_loss.item() / world_size)
        if rank == 0 and args.eval_every > 0 and (step % args.eval_every == 0 or step == args.steps):
            with torch.no_grad():
                log(step=step, val_loss=F.mse_loss(model(val_x), val_y).item())
        time.sleep(args.step_sleep)

        if step == args.steps:
            break  # a stop signal during the last step changes nothing: the run is complete
        stop = all_ranks_stop()
        if stop or (args.save_every > 0 and step % args.save_every == 0):
            save_checkpoint(step, model, optimizer, rank, checkpoint_dir, run_dir)
        if stop:
            print(f"program_demo: rank {rank}: stop signal: saved at step {step}; "
                  "exiting with TRAINCTL_EXIT_REQUEUE", flush=True)
            shutdown(int(env.get("TRAINCTL_EXIT_REQUEUE", 75)))

    save_checkpoint(args.steps, model, optimizer, rank, checkpoint_dir, run_dir)
    if rank == 0:
        write_atomically(run_dir / "final.pt", lambda tmp: torch.save(model.state_dict(), tmp))
    shutdown(0)


if __name__ == "__main__":
    main()
