"""The histogram part of ``attnphase reproduce``: Section 2 of the study and the data-size sweep.

``histogram_section(out_dir, store, quick)`` trains what the store lacks, writes three figures and returns
the tables and a markdown block for the report.  The quick plan is a shortened schedule that fits in about
a minute on one core (20 epochs on 4000 sequences instead of 200 on 35 000; a sweep of 4 seeds at 250, 1000
and 2000 sequences): its accuracies are not the study's, but the mechanisms of the restricted variants and
the shape of the sweep are already visible.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from attnphase.experiments.histogram.runs import stability_histogram, train_histogram_summary
from attnphase.experiments.histogram.sweep import LABELS, sweep_table
from attnphase.experiments.histogram.train import STUDY, Schedule


@dataclass(frozen=True)
class HistogramPlan:
    name: str
    schedule: Schedule
    restricted_n_train: int | None  # None: the whole training split
    restricted_seeds: tuple[int, ...]
    stability_epochs: int
    sweep_schedule: Schedule
    sweep_n_train: tuple[int, ...]  # 0 stands for the whole split
    sweep_seeds: tuple[int, ...]
    example_sequences: int = 3


QUICK = HistogramPlan(name="quick", schedule=replace(STUDY, epochs=20), restricted_n_train=4000,
                      restricted_seeds=(0,), stability_epochs=5, sweep_schedule=replace(STUDY, epochs=20),
                      sweep_n_train=(250, 1000, 2000), sweep_seeds=(0, 1, 2, 3))
# The study's schedule: 10 runs per restricted variant, the stability test with 100 SGD epochs, and a sweep of
# 16 seeds at 8 sizes -- about 5 CPU-minutes per run of 200 epochs on the full split, so hours on a CPU; each
# finished ensemble is stored, so it may run in pieces.
FULL = HistogramPlan(name="full", schedule=STUDY, restricted_n_train=None, restricted_seeds=tuple(range(10)),
                     stability_epochs=100, sweep_schedule=STUDY,
                     sweep_n_train=(250, 500, 1000, 2000, 4000, 8000, 16000, 0), sweep_seeds=tuple(range(16)))


@dataclass(frozen=True)
class HistogramSection:
    plan: HistogramPlan
    restricted: list[dict[str, Any]]
    stability: list[dict[str, Any]]
    sweep: list[dict[str, Any]]
    figures: dict[str, list[Path]]
    seconds: float
    ran: int
    reused: int
    notes: list[str] = field(default_factory=list)

    def markdown(self) -> str:
        return section_markdown(self)


def histogram_section(out_dir: str | os.PathLike[str], store: str | os.PathLike[str], quick: bool = True,
                      progress: bool = False, device: str | None = "auto",
                      plan: HistogramPlan | None = None) -> HistogramSection:
    """Train (or read back) the restricted variants, their stability test and the sweep; write the figures
    ``histogram_attention``, ``histogram_curves``, ``histogram_sweep`` and ``histogram_scores`` (PNG + PDF)
    into ``out_dir``."""
    from attnphase.experiments.histogram.train import dataset
    from attnphase.plots.histogram import plot_attention, plot_curves, plot_scores, plot_sweep

    plan = plan or (QUICK if quick else FULL)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    restricted, s1 = train_histogram_summary(["positional", "semantic"], plan.restricted_n_train,
                                             plan.restricted_seeds, plan.schedule, store, device, 10, progress)
    stab = stability_histogram(restricted, store, epochs=plan.stability_epochs, device=device, progress=progress)
    sweep_runs, ran, reused = [], s1.ran, s1.reused
    for n in plan.sweep_n_train:
        runs, s = train_histogram_summary(["both"], n or None, plan.sweep_seeds, plan.sweep_schedule, store, device,
                                          10, progress)
        sweep_runs += runs
        ran, reused = ran + s.ran, reused + s.reused
    rows = sweep_table(sweep_runs)
    val = dataset(plan.schedule).val
    pos = next(r for r in restricted if r.variant == "positional")
    sem = next(r for r in restricted if r.variant == "semantic")
    figures = {"histogram_attention": plot_attention([pos, sem], val[:plan.example_sequences],
                                                     out / "histogram_attention"),
               "histogram_curves": plot_curves(restricted, out / "histogram_curves"),
               "histogram_sweep": plot_sweep(rows, out / "histogram_sweep"),
               "histogram_scores": plot_scores(sweep_runs, out / "histogram_scores")}
    return HistogramSection(plan=plan, restricted=[r.to_dict() for r in restricted],
                            stability=[s.to_dict() for s in stab], sweep=[r.to_dict() for r in rows],
                            figures=figures, seconds=time.perf_counter() - t0, ran=ran, reused=reused)


def _mean_sd(values: list[float]) -> str:
    import numpy as np

    a = np.asarray(values, dtype=float)
    return f"{a.mean():.5f} +- {a.std(ddof=1):.5f}" if len(a) > 1 else f"{a.mean():.5f}"


def section_markdown(sec: HistogramSection) -> str:
    p = sec.plan
    s = p.schedule
    lines = ["## Counting task: a real transformer (Section 2)\n",
             f"Plan {p.name}: {s.epochs} epochs, batch {s.batch_size}, {s.optimizer} lr {s.lr:g}, "
             f"n_train {p.restricted_n_train or 'all'}, seeds {list(p.restricted_seeds)}; {sec.ran} runs trained, "
             f"{sec.reused} read from the store, {sec.seconds:.1f} s. Mechanism score: docs/histogram.md "
             "(-1 positional, +1 semantic).\n",
             "| variant | runs | validation accuracy (mean +- sd) | study | mechanisms measured |", "|---|---|---|---|---|"]
    study = {"positional": "0.99885 +- 0.00045", "semantic": "0.99894 +- 0.00117"}
    for v in ("positional", "semantic"):
        sub = [r for r in sec.restricted if r["variant"] == v]
        mech = ", ".join(f"{m} x{sum(r['mechanism'] == m for r in sub)}" for m in LABELS
                         if any(r["mechanism"] == m for r in sub))
        lines.append(f"| {v} | {len(sub)} | {_mean_sd([r['val_accuracy'] for r in sub])} | {study[v]} | {mech} |")
    lines += ["", f"Stability ({p.stability_epochs} SGD epochs, lr 1e-3, noise 1e-3 on the embeddings and W_Q, W_K, "
              "unrestricted model; 'study' columns: the study's sum of per-tensor norms):\n",
              "| variant | seed | noise distance | distance moved | study distance | study, zero entries | "
              "init to trained (study) | accuracy before | after | mechanism after |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for r in sec.stability:
        lines.append(f"| {r['variant']} | {r['seed']} | {r['noise_distance']:.4f} | {r['distance']:.4f} | "
                     f"{r['study_distance']:.4f} | {r['study_distance_zeros']:.4f} | {r['init_distance']:.1f} | "
                     f"{r['val_accuracy_before']:.5f} | {r['val_accuracy_after']:.5f} | "
                     f"{r['mechanism_after']} ({r['mechanism_score_after']:+.2f}) |")
    lines += ["", "Data-size sweep of the unrestricted model (fractions with Wilson 95 % intervals):\n",
              "| n_train | runs | positional | semantic | mixed | mean accuracy |", "|---|---|---|---|---|---|"]
    for r in sec.sweep:
        cells = [f"{r[f'frac_{lab}']:.2f} [{r[f'{lab}_lo']:.2f}, {r[f'{lab}_hi']:.2f}]" for lab in LABELS]
        lines.append(f"| {r['n_train']} | {r['runs']} | {' | '.join(cells)} | {r['mean_accuracy']:.4f} |")
    lines.append("")
    for name, paths in sec.figures.items():
        lines.append(f"![{name}]({paths[0].name})\n")
    return "\n".join(lines) + "\n"
