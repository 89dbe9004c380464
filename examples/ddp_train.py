#!/usr/bin/python3
"""A small data-parallel training job that speaks baton's launch contract.

It reads only the environment baton's executors document (docs/jobs.md):
  RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT  torchrun's variables (gloo rendezvous)
  BATON_JOB_ID, BATON_ATTEMPT                             which job, which attempt of it
  BATON_CHECKPOINT_DIR                                    stable across attempts and sizes

It trains a small (3.2M-parameter by default) MLP language-model-like network on synthetic data with DistributedDataParallel
over gloo (CPU), checkpoints every --checkpoint-every steps into BATON_CHECKPOINT_DIR, tells
baton about each checkpoint through the marker file baton-checkpoint.json in that directory, and
resumes from the latest checkpoint when it starts. The global batch is fixed, so a restart at
another world size (an elastic resize) continues the same optimisation with a different
per-rank batch.

Each rank appends one line per event to its own log (stdout, which the executor keeps):
  start job=J attempt=A rank=R world=W pid=P resume_step=S t=T
  step=N loss=L world=W attempt=A rank=R t=T
  checkpoint step=N bytes=B attempt=A t=T          (rank 0)
  end job=J attempt=A rank=R step=N t=T
and, with --events FILE, the start and end lines also to FILE (appended, one write per line),
so a test can check from the ranks' own records that no two attempts ran at once.
"""
import argparse
import json
import os
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

MARKER = "baton-checkpoint.json"


def log(line, events=None):
    text = f"{line} t={time.time():.6f}"
    print(text, flush=True)
    if events:
        fd = os.open(events, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, (text + "\n").encode())
        finally:
            os.close(fd)


def env_int(name, default=None):
    value = os.environ.get(name)
    if value is None:
        if default is None:
            sys.exit(f"ddp_train: {name} is not set (start me through baton or torchrun)")
        return default
    return int(value)


class Model(nn.Module):
    """Token embeddings, a projection of the whole context, residual MLP blocks and a vocabulary
    head: about (8 * depth + context) * width^2 + 2 * vocab * width parameters."""

    def __init__(self, vocab, width, depth, context):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.project = nn.Linear(context * width, width)
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.LayerNorm(width), nn.Linear(width, 4 * width), nn.GELU(),
                          nn.Linear(4 * width, width)) for _ in range(depth))
        self.head = nn.Linear(width, vocab)

    def forward(self, tokens):
        x = self.project(self.embed(tokens).flatten(1))
        for block in self.blocks:
            x = x + block(x)
        return self.head(x)


def batch_for(step, rank, world, global_batch, vocab, context):
    """The step's global batch is the same whatever the world size; each rank takes its slice."""
    g = torch.Generator().manual_seed(1_000_003 * step + 17)
    tokens = torch.randint(0, vocab, (global_batch, context), generator=g)
    target = tokens[:, 0]  # learnable: predict the first token of the context
    per = global_batch // world
    lo = rank * per
    return tokens[lo:lo + per], target[lo:lo + per]


def latest_checkpoint(ckpt_dir):
    path = os.path.join(ckpt_dir, MARKER)
    try:
        with open(path) as f:
            marker = json.load(f)
        return marker["step"], os.path.join(ckpt_dir, marker["file"])
    except FileNotFoundError:
        return 0, None


def save_checkpoint(ckpt_dir, step, attempt, model, optimizer):
    name = f"step-{step:08d}.pt"
    tmp = os.path.join(ckpt_dir, name + ".tmp")
    torch.save({"step": step, "model": model.state_dict(), "optimizer": optimizer.state_dict()},
               tmp)
    os.replace(tmp, os.path.join(ckpt_dir, name))
    size = os.path.getsize(os.path.join(ckpt_dir, name))
    marker_tmp = os.path.join(ckpt_dir, MARKER + ".tmp")
    with open(marker_tmp, "w") as f:
        json.dump({"step": step, "attempt": attempt, "bytes": size, "file": name}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(marker_tmp, os.path.join(ckpt_dir, MARKER))  # baton reads only whole markers
    for old in os.listdir(ckpt_dir):  # keep the newest two
        if old.startswith("step-") and old.endswith(".pt") and old < f"step-{step - 1:08d}":
            try:
                os.remove(os.path.join(ckpt_dir, old))
            except FileNotFoundError:
                pass
    return size


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=100, help="train until this global step")
    p.add_argument("--checkpoint-every", type=int, default=10)
    p.add_argument("--global-batch", type=int, default=32)
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--depth", type=int, default=4)
    p.add_argument("--vocab", type=int, default=128)
    p.add_argument("--context", type=int, default=16)
    p.add_argument("--step-seconds", type=float, default=0.0,
                   help="sleep this long per step (stretch a test job without more compute)")
    p.add_argument("--events", default=None, help="append start/end lines to this file too")
    args = p.parse_args()

    rank, world = env_int("RANK"), env_int("WORLD_SIZE")
    job, attempt = env_int("BATON_JOB_ID", 0), env_int("BATON_ATTEMPT", 1)
    ckpt_dir = os.environ.get("BATON_CHECKPOINT_DIR") or sys.exit(
        "ddp_train: BATON_CHECKPOINT_DIR is not set")
    if args.global_batch % world:
        sys.exit(f"ddp_train: --global-batch {args.global_batch} is not a multiple of the "
                 f"world size {world}")
    os.makedirs(ckpt_dir, exist_ok=True)
    torch.manual_seed(0)
    torch.set_num_threads(1)

    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timedelta(seconds=120))
    model = Model(args.vocab, args.width, args.depth, args.context)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    step, path = latest_checkpoint(ckpt_dir)
    if path:
        state = torch.load(path)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        step = state["step"]
    ddp = DistributedDataParallel(model)
    params = sum(t.numel() for t in model.parameters())
    log(f"start job={job} attempt={attempt} rank={rank} world={world} pid={os.getpid()} "
        f"resume_step={step} params={params}", args.events)

    loss_fn = nn.CrossEntropyLoss()
    while step < args.steps:
        tokens, target = batch_for(step, rank, world, args.global_batch, args.vocab, args.context)
        optimizer.zero_grad()
        loss = loss_fn(ddp(tokens), target)
        loss.backward()
        optimizer.step()
        step += 1
        total = loss.detach().clone()
        dist.all_reduce(total)
        log(f"step={step} loss={total.item() / world:.4f} world={world} attempt={attempt} "
            f"rank={rank}")
        if args.step_seconds:
            time.sleep(args.step_seconds)
        if step % args.checkpoint_every == 0 or step == args.steps:
            if rank == 0:
                size = save_checkpoint(ckpt_dir, step, attempt, model, optimizer)
                log(f"checkpoint step={step} bytes={size} attempt={attempt}")
            dist.barrier()
    log(f"end job={job} attempt={attempt} rank={rank} step={step}", args.events)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
