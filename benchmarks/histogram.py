"""Seconds per epoch of the counting transformer (study's schedule: 35 000 sequences, batch 32) on CPU, and on
CUDA when present, for ensembles of 1, 4 and 10 models (one training step per batch for all members).

    PYTHONPATH=src python benchmarks/histogram.py [--steps 100] [--models 1,4,10] [--threads 1]

An epoch is extrapolated from ``--steps`` timed steps (after 10 warm-up steps): 1094 steps at the defaults.
"""

from __future__ import annotations

import argparse
import math
import time

import torch

from attnphase.experiments.histogram.model import (
    count_labels_t,
    forward,
    init_params,
    member_losses,
    stack_params,
    variant_masks,
)
from attnphase.experiments.histogram.train import STUDY


def seconds_per_step(m: int, device: torch.device, steps: int) -> float:
    s = STUDY
    params = stack_params([init_params(i, "both", **s.dims()) for i in range(m)], device)
    masks = {k: v.to(device) for k, v in variant_masks(["both"] * m, s.width).items()}
    opt = torch.optim.Adam(list(params.values()), lr=s.lr, betas=s.betas, eps=s.eps)
    g = torch.Generator().manual_seed(0)
    batches = [torch.randint(0, s.alphabet, (m, s.batch_size, s.seq_len), generator=g).to(device) for _ in range(8)]

    def step(i: int) -> None:
        tok = batches[i % len(batches)]
        loss = member_losses(forward(params, masks, tok), count_labels_t(tok))
        opt.zero_grad(set_to_none=True)
        loss.sum().backward()
        opt.step()

    for i in range(10):
        step(i)
    if device.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for i in range(steps):
        step(i)
    if device.type == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - t0) / steps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--models", default="1,4,10")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    steps_per_epoch = math.ceil(35_000 / STUDY.batch_size)
    devices = [torch.device("cpu")] + ([torch.device("cuda")] if torch.cuda.is_available() else [])
    print(f"{'device':>6}  {'models':>6}  {'ms/step':>8}  {'s/epoch':>8}  {'s/epoch/model':>13}  "
          f"{'200 epochs/model (min)':>22}")
    for dev in devices:
        for m in (int(x) for x in args.models.split(",")):
            t = seconds_per_step(m, dev, args.steps)
            ep = t * steps_per_epoch
            print(f"{dev.type:>6}  {m:>6}  {1e3 * t:8.2f}  {ep:8.2f}  {ep / m:13.2f}  {200 * ep / m / 60:22.1f}")


if __name__ == "__main__":
    main()
