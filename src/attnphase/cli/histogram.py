"""`attnphase histogram`: the study's Section 2 transformer on the counting task (resumable SQLite store)."""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any

from attnphase.cli.common import (
    CLIError,
    add_output_args,
    check_store_path,
    emit,
    nonnegative_int,
    parse_int_spec,
    positive_float,
    positive_int,
)

# Bounds refused before any work: far beyond the study's sizes, small enough that a typo cannot start a run
# that exhausts memory (the ensemble's own estimate, checked next, is the finer test).
_BOUNDS = {"seq_len": 256, "alphabet": 100_000, "width": 4096, "hidden": 16_384, "n_draws": 5_000_000,
           "epochs": 1_000_000, "batch_size": 1_000_000, "batch_models": 1024}

COLUMNS = ("variant", "n_train", "seed", "val_accuracy", "train_accuracy", "mechanism", "mechanism_score",
           "tok_dev", "pos_dev", "seconds")
STABILITY_COLUMNS = ("variant", "n_train", "seed", "noise_distance", "distance", "relative_distance",
                     "study_distance", "study_distance_zeros", "init_distance", "val_accuracy_before",
                     "val_accuracy_after", "mechanism_after", "mechanism_score_after")
SUMMARY_COLUMNS = ("n_train", "runs", "frac_positional", "positional_lo", "positional_hi", "frac_semantic",
                   "semantic_lo", "semantic_hi", "frac_mixed", "mixed_lo", "mixed_hi", "mean_accuracy",
                   "sem_accuracy")


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "histogram",
        help="the counting-task transformer of the study's Section 2 (positional / semantic / both)",
        description="Train the one-layer, one-head transformer of the study's Section 2 on the counting task "
        "(label = how often a token occurs in its sequence), restricted to a positional or semantic attention or "
        "unrestricted (both), and measure which mechanism its attention uses (docs/histogram.md). Defaults: the "
        "study's schedule (L = 10, alphabet 15, width 64, Adam lr 1e-3, batch 32, 200 epochs, the whole 70 %% "
        "training split). Several seeds train at once as one batched ensemble.",
    )
    p.add_argument("--variant", default="positional",
                   help="positional, semantic or both, or a comma list (default positional)")
    p.add_argument("--n-train", default=None,
                   help="training sequences: an integer or a comma list (default: the whole training split)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--seed", type=nonnegative_int, default=None, help="one seed (default 0)")
    g.add_argument("--seeds", default=None, help="seeds: a comma list or start:stop (inclusive), e.g. 0:9")
    p.add_argument("--epochs", type=positive_int, default=200, help="training epochs (default 200)")
    p.add_argument("--batch-size", type=positive_int, default=32, help="minibatch size (default 32)")
    p.add_argument("--lr", type=positive_float, default=1e-3, help="learning rate (default 1e-3)")
    p.add_argument("--optimizer", choices=("adam", "sgd"), default="adam",
                   help="adam (betas 0.9, 0.98, eps 1e-9: the study's) or sgd (default adam)")
    p.add_argument("--seq-len", type=positive_int, default=10, help="tokens per sequence L (default 10)")
    p.add_argument("--alphabet", type=positive_int, default=15, help="alphabet size (default 15)")
    p.add_argument("--width", type=positive_int, default=64, help="embedding width, even (default 64)")
    p.add_argument("--hidden", type=positive_int, default=128, help="MLP hidden width (default 128)")
    p.add_argument("--n-draws", type=positive_int, default=50_000,
                   help="sequences drawn before duplicates are removed (default 50000)")
    p.add_argument("--data-seed", type=nonnegative_int, default=0, help="seed of the draws and the split (default 0)")
    p.add_argument("--batch-models", type=positive_int, default=10,
                   help="models trained together as one ensemble; each ensemble is stored when it ends (default 10)")
    p.add_argument("--device", default="auto", help="auto (CUDA when present, default), cpu or cuda[:N]")
    p.add_argument("--store", default=None, help="SQLite results store: finished runs are read back, new ones added")
    p.add_argument("--stability", action="store_true",
                   help="then run the stability test on the positional / semantic runs (prints its rows)")
    p.add_argument("--stability-epochs", type=positive_int, default=100, help="SGD epochs of the test (default 100)")
    p.add_argument("--summary", action="store_true",
                   help="print one row per n_train (mechanism fractions, Wilson intervals) instead of one per run")
    add_output_args(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=_histogram)


def _parse(args: argparse.Namespace) -> tuple[list[str], list[int | None], list[int], Any]:
    """Every input check, before any work (one line, exit code 2)."""
    from attnphase.experiments.histogram.train import Schedule

    variants = [v.strip() for v in str(args.variant).split(",") if v.strip()]
    bad = [v for v in variants if v not in ("positional", "semantic", "both")]
    if not variants or bad:
        raise CLIError(f"--variant must be positional, semantic or both (or a comma list), got {args.variant!r}")
    for name, bound in _BOUNDS.items():
        value = getattr(args, name)
        if value > bound:
            raise CLIError(f"--{name.replace('_', '-')} must be <= {bound}, got {value}")
    if args.seq_len < 2:
        raise CLIError(f"--seq-len must be >= 2, got {args.seq_len}")
    if args.alphabet < 2:
        raise CLIError(f"--alphabet must be >= 2, got {args.alphabet}")
    if args.width % 2:
        raise CLIError(f"--width must be even (two halves for the restricted variants), got {args.width}")
    if re.fullmatch(r"auto|cpu|cuda(:[0-9]+)?", str(args.device)) is None:
        raise CLIError(f"--device must be auto, cpu or cuda[:N], got {args.device!r}")
    seeds = [args.seed if args.seed is not None else 0] if args.seeds is None else parse_int_spec(args.seeds, "--seeds")
    if any(s < 0 for s in seeds):
        raise CLIError(f"--seeds must be integers >= 0, got {args.seeds!r}")
    schedule = Schedule(seq_len=args.seq_len, alphabet=args.alphabet, n_draws=args.n_draws, data_seed=args.data_seed,
                        width=args.width, hidden=args.hidden, epochs=args.epochs, batch_size=args.batch_size,
                        lr=args.lr, optimizer=args.optimizer)
    # The largest possible training split (before duplicates are removed): a bound checked without drawing.
    split = int(round(0.7 * args.n_draws))
    n_trains: list[int | None] = [None]
    if args.n_train is not None:
        n_trains = list(parse_int_spec(args.n_train, "--n-train"))
        for n in n_trains:
            if n < 1 or n > split:
                raise CLIError(f"--n-train must lie in 1..{split} (70 % of --n-draws), got {n}")
    return variants, n_trains, seeds, schedule


def _histogram(args: argparse.Namespace) -> int:
    variants, n_trains, seeds, schedule = _parse(args)
    from attnphase.experiments.histogram.model import resolve_device
    from attnphase.experiments.histogram.runs import stability_histogram, train_histogram_summary
    from attnphase.experiments.histogram.sweep import sweep_table
    from attnphase.experiments.histogram.train import check_size, dataset

    resolve_device(args.device)
    largest = max(n or int(round(0.7 * args.n_draws)) for n in n_trains)
    check_size(schedule, min(args.batch_models, len(variants) * len(seeds)), largest)
    if args.store is not None:
        check_store_path(args.store)  # a foreign or damaged file is refused before any training
    data = dataset(schedule)  # ~0.1 s at the study's size; the exact split size after duplicates are removed
    for n in n_trains:
        if n is not None and n > len(data.train):
            raise CLIError(f"--n-train must lie in 1..{len(data.train)} (the training split), got {n}")
    runs, ran, reused = [], 0, 0
    for n in n_trains:
        got, s = train_histogram_summary(variants, n, seeds, schedule, args.store, args.device, args.batch_models,
                                         progress=not args.no_progress)
        runs += got
        ran, reused = ran + s.ran, reused + s.reused
    if not args.quiet:
        print(f"attnphase histogram: {ran} runs trained, {reused} read from the store", file=sys.stderr)
    if args.stability:
        restricted = [r for r in runs if r.variant != "both"]
        if not restricted:
            raise CLIError("--stability needs a positional or semantic variant")
        stab = stability_histogram(restricted, args.store, epochs=args.stability_epochs, device=args.device,
                                   progress=not args.no_progress)
        emit([s.to_dict() for s in stab], args, STABILITY_COLUMNS)
    elif args.summary:
        emit([r.to_dict() for r in sweep_table(runs)], args, SUMMARY_COLUMNS)
    else:
        emit([r.to_dict() for r in runs], args, COLUMNS)
    return 0
