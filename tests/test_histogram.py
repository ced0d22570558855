"""The counting-task transformer of the study's Section 2 (attnphase.experiments.histogram): data, restriction
masks, the mechanism measure, batched-ensemble independence, the store's resume after kill -9, the CLI.

Everything runs on CPU with tiny schedules (a few epochs on a few hundred sequences): the whole file takes
well under a minute.
"""

from __future__ import annotations

import json
import math
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from attnphase.experiments.histogram.data import count_labels, make_counting_data, train_subset
from attnphase.experiments.histogram.mechanism import measure
from attnphase.experiments.histogram.sweep import wilson

torch = pytest.importorskip("torch")

from attnphase.cli import main  # noqa: E402
from attnphase.experiments.histogram.model import (  # noqa: E402
    embed,
    init_params,
    scores,
    stack_params,
    variant_masks,
)
from attnphase.experiments.histogram.train import Schedule  # noqa: E402

SRC = Path(__file__).resolve().parents[1] / "src"
TINY = Schedule(n_draws=1500, epochs=3)
DIMS = TINY.dims()


@pytest.fixture(autouse=True)
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# ------------------------------------------------------------------------------------------------ data


def test_labels_are_counts():
    data = make_counting_data(n_draws=500, seed=3)
    for seq in data.train[:50]:
        labels = count_labels(seq)
        assert list(labels) == [int((seq == t).sum()) for t in seq]
    assert count_labels(np.array([[1, 1, 2, 1]])).tolist() == [[3, 3, 1, 3]]


def test_duplicates_removed_and_split_seeded():
    # A tiny alphabet forces many duplicate draws: none may survive, in a split or across the two.
    data = make_counting_data(seq_len=3, alphabet=3, n_draws=2000, seed=1)
    both = np.concatenate([data.train, data.val])
    assert len(np.unique(both, axis=0)) == len(both) == 27  # every sequence of 3^3 drawn, each once
    assert len(data.train) == round(0.7 * 27)
    again = make_counting_data(seq_len=3, alphabet=3, n_draws=2000, seed=1)
    assert np.array_equal(data.train, again.train) and np.array_equal(data.val, again.val)
    other = make_counting_data(seq_len=3, alphabet=3, n_draws=2000, seed=2)
    assert not np.array_equal(np.sort(data.train, axis=0), np.sort(other.train, axis=0)) or not np.array_equal(
        data.train, other.train)
    full = make_counting_data()
    assert full.train.shape == (35000, 10) and full.val.shape == (15000, 10) and full.n_classes == 11
    sub = train_subset(full, 500, seed=4)
    assert len(np.unique(sub, axis=0)) == 500 and np.array_equal(sub, train_subset(full, 500, seed=4))


# -------------------------------------------------------------------------------------- restriction masks


def _scores(variant: str, tokens: np.ndarray, positions: np.ndarray) -> torch.Tensor:
    p = stack_params([init_params(7, variant, **DIMS)], torch.device("cpu"))
    m = variant_masks([variant], TINY.width)
    with torch.no_grad():
        x = embed(p, m, torch.as_tensor(tokens)[None], torch.as_tensor(positions)[None])
        return scores(p, m, x)[0]


def test_masks_positional_scores_ignore_tokens_semantic_ignore_positions():
    rng = np.random.default_rng(0)
    t1, t2 = rng.integers(0, 15, (2, 20, 10))
    p1 = np.broadcast_to(np.arange(10), (20, 10)).copy()
    p2 = rng.integers(0, 10, (20, 10))
    # positional: change every token, the scores stay; change the positions, they move
    assert torch.equal(_scores("positional", t1, p1), _scores("positional", t2, p1))
    assert not torch.allclose(_scores("positional", t1, p1), _scores("positional", t1, p2))
    # semantic: the converse
    assert torch.equal(_scores("semantic", t1, p1), _scores("semantic", t1, p2))
    assert not torch.allclose(_scores("semantic", t1, p1), _scores("semantic", t2, p1))
    # unrestricted: both matter
    assert not torch.allclose(_scores("both", t1, p1), _scores("both", t2, p1))
    assert not torch.allclose(_scores("both", t1, p1), _scores("both", t1, p2))
    # the two embeddings of a restricted model live on disjoint halves
    p = init_params(7, "positional", **DIMS)
    assert (p["tok"][:, 32:] == 0).all() and (p["pos"][:, :32] == 0).all() and (p["tok"][:, :32] != 0).all()


@pytest.mark.parametrize("variant", ["positional", "semantic", "both"])
def test_query_key_initialised_as_torch_linear_over_the_whole_width(variant):
    # The study draws W_Q, W_K as full width x width nn.Linear-style maps and masks their input; drawing them
    # over the half a restricted model reads (bound 1/sqrt(32)) left every semantic seed on a plateau near
    # 0.98 (docs/histogram.md).  Expected bound from torch's own formula, not from our code:
    # kaiming_uniform_(a=sqrt(5)) on fan-in = width.
    width = TINY.width
    bound = torch.nn.init.calculate_gain("leaky_relu", math.sqrt(5)) * math.sqrt(3.0 / width)
    assert bound == pytest.approx(1 / 8)
    read = variant_masks([variant], width)["qk"][0, :, 0].bool()
    for seed in range(3):
        p = init_params(seed, variant, **DIMS)
        for name in ("wq", "wk"):
            w = p[name]
            assert (w[~read] == 0).all()  # rows the variant may not read stay zero
            used = w[read].flatten()
            assert used.numel() == (64 if variant == "both" else 32) * width
            # >= 2048 uniform draws: the largest lies within 1 % of the bound, the sd within 5 % of bound/sqrt 3
            assert used.abs().max() <= bound and used.abs().max() > 0.99 * bound
            assert float(used.std()) == pytest.approx(bound / math.sqrt(3), rel=0.05)
        # the value map reads the whole width in every variant: same law
        assert p["wv"].abs().max() <= bound and float(p["wv"].std()) == pytest.approx(bound / math.sqrt(3), rel=0.05)


def test_restricted_keys_tagged_with_their_initialisation():
    # Restricted runs stored under the former initialisation must not be read back as current ones; the
    # unrestricted model's keys (and stored sweeps) did not change.
    from attnphase.experiments.histogram.store import run_key
    from attnphase.experiments.store import canon_options

    def old(v):
        return canon_options({"variant": v, "n_train": 300, "seed": 0, **TINY.as_dict()})

    assert run_key("both", 300, 0, TINY) == old("both")
    for v in ("positional", "semantic"):
        assert run_key(v, 300, 0, TINY) != old(v)


# -------------------------------------------------------------------------------------- mechanism measure

L = 10


def _softmax(s: np.ndarray) -> np.ndarray:
    s = np.exp(s - s.max(-1, keepdims=True))
    return s / s.sum(-1, keepdims=True)


def test_mechanism_on_hand_built_maps():
    rng = np.random.default_rng(1)
    tokens = rng.integers(0, 15, (300, L))
    R, E = rng.normal(size=(L, 4)) * 2, rng.normal(size=(15, 4)) * 2

    def positional(t, p):
        return _softmax(np.einsum("nid,njd->nij", R[p], R[p]))

    def self_attention(t, p):  # the counting task's positional solution: oneself, the rest evenly
        return _softmax(3.0 * (p[:, :, None] == p[:, None, :]))

    def semantic(t, p):
        return _softmax(np.einsum("nid,njd->nij", E[t], E[t]))

    def same_token(t, p):  # the semantic solution: every copy of one's own token
        return _softmax(3.0 * (t[:, :, None] == t[:, None, :]))

    def uniform(t, p):
        return np.full(t.shape + (L,), 1.0 / L)

    for fn in (positional, self_attention):
        (m,) = measure(fn, tokens, 15)
        assert m.label == "positional" and m.score == -1.0 and m.tok_dev == 0.0 and m.pos_dev > 0.1
    for fn in (semantic, same_token):
        (m,) = measure(fn, tokens, 15)
        assert m.label == "semantic" and m.score == 1.0 and m.pos_dev == 0.0 and m.tok_dev > 0.1
    (m,) = measure(lambda t, p: 0.5 * positional(t, p) + 0.5 * semantic(t, p), tokens, 15)
    assert m.label == "mixed" and abs(m.score) < 0.5
    (m,) = measure(uniform, tokens, 15)
    assert m.label == "mixed" and m.score == 0.0
    # several maps at once (an ensemble): one result per leading index, same values
    both = measure(lambda t, p: np.stack([positional(t, p), semantic(t, p)]), tokens, 15)
    assert [b.label for b in both] == ["positional", "semantic"]


def test_wilson_interval():
    assert wilson(0, 10) == pytest.approx((0.0, 0.27753), abs=1e-4)
    assert wilson(5, 10) == pytest.approx((0.23659, 0.76341), abs=1e-4)
    assert wilson(10, 10)[1] == 1.0 and wilson(0, 0) == (0.0, 1.0)


# ------------------------------------------------------------------------- training, ensembles, the store


def test_restricted_variants_measured_and_seed_independent_of_batch(tmp_path):
    from attnphase.experiments.histogram import train_histogram

    together = train_histogram(["positional", "semantic", "both"], n_train=300, seeds=[0, 1], schedule=TINY,
                               device="cpu")
    assert [r.mechanism for r in together[:4]] == ["positional"] * 2 + ["semantic"] * 2
    assert [r.mechanism_score for r in together[:4]] == [-1.0, -1.0, 1.0, 1.0]
    alone = train_histogram("semantic", n_train=300, seeds=[1], schedule=TINY, device="cpu")[0]
    mate = together[3]
    assert (mate.variant, mate.seed) == ("semantic", 1)
    # float32 rounding at most (documented): in practice bit-identical on CPU
    np.testing.assert_allclose(alone.params, mate.params, rtol=0, atol=1e-5)
    assert alone.val_accuracy == pytest.approx(mate.val_accuracy, abs=1e-3)
    # from the store: the same runs come back, nothing retrained
    store = tmp_path / "s.sqlite"
    first = train_histogram(["positional"], n_train=300, seeds=[0], schedule=TINY, device="cpu", store=store)
    again = train_histogram(["positional"], n_train=300, seeds=[0], schedule=TINY, device="cpu", store=store)
    assert again[0].val_accuracy == first[0].val_accuracy and np.array_equal(again[0].params, first[0].params)


def test_stability_and_section(tmp_path):
    from dataclasses import replace

    from attnphase.reproduce.histogram_section import QUICK, histogram_section

    plan = replace(QUICK, schedule=TINY, restricted_n_train=300, stability_epochs=1, sweep_schedule=TINY,
                   sweep_n_train=(100, 300), sweep_seeds=(0, 1))
    sec = histogram_section(tmp_path, tmp_path / "r.sqlite", plan=plan, device="cpu")
    assert {s["variant"] for s in sec.stability} == {"positional", "semantic"}
    for s in sec.stability:
        # noise 1e-3 on the 9792 entries of the embeddings and W_Q, W_K: |noise| ~ 1e-3 sqrt(9792) = 0.099
        assert 0.09 < s["noise_distance"] < 0.11 and s["distance"] >= 0.5 * s["noise_distance"]
    assert [r["n_train"] for r in sec.sweep] == [100, 300] and all(r["runs"] == 2 for r in sec.sweep)
    assert set(sec.figures) == {"histogram_attention", "histogram_curves", "histogram_sweep", "histogram_scores"}
    for paths in sec.figures.values():
        assert all(p.is_file() and p.stat().st_size > 0 for p in paths)
    assert "## Counting task" in sec.markdown()
    again = histogram_section(tmp_path, tmp_path / "r.sqlite", plan=plan, device="cpu")
    assert again.ran == 0 and again.reused == sec.ran + sec.reused


def test_stability_perturbs_and_measures_as_the_study():
    # The study perturbs only the embeddings and W_Q, W_K (noise 1e-3 per entry) and measures a sum of per-tensor
    # norms after zeroing the retrained embeddings' masked halves.  With a vanishing learning rate the retrained
    # model is the perturbed one, so each distance is the norm of the noise over known entry counts (width 64):
    # W_Q, W_K 4096 entries each, of which 2048 are masked rows; unmasked embedding halves 15 x 32 and 10 x 32.
    from attnphase.experiments.histogram.runs import train_histogram
    from attnphase.experiments.histogram.stability import stability_test, tensor_distance

    a = {"x": np.array([3.0, 0.0]), "y": np.array([[1.0, 1.0], [1.0, 1.0]])}
    b = {"x": np.array([0.0, 4.0]), "y": np.zeros((2, 2))}
    assert tensor_distance(a, b) == pytest.approx(5.0 + 2.0)
    assert tensor_distance(a, b, {"x": np.array([True, False]), "y": np.eye(2, dtype=bool)}) == pytest.approx(
        3.0 + math.sqrt(2.0))
    runs = train_histogram(["positional", "semantic"], n_train=300, seeds=[0], schedule=TINY, device="cpu")
    for s in stability_test(runs, lr=1e-12, epochs=1, device="cpu"):
        assert s.noise_distance == pytest.approx(1e-3 * math.sqrt(2 * 4096 + 15 * 64 + 10 * 64), rel=0.05)
        assert s.distance == pytest.approx(s.noise_distance, rel=1e-3)
        assert s.study_distance == pytest.approx(1e-3 * (64 + 64 + math.sqrt(15 * 32) + math.sqrt(10 * 32)), rel=0.05)
        assert s.study_distance_zeros == pytest.approx(1e-3 * 2 * math.sqrt(2048), rel=0.05)
        # initial -> trained: 3 Adam epochs move every entry, far beyond the noise
        assert s.init_distance > 10 * s.study_distance


def _cli_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(SRC), "OMP_NUM_THREADS": "1"}


def _rows(store: Path) -> list[tuple]:
    if not store.exists():
        return []
    try:
        with sqlite3.connect(store, timeout=30) as conn:
            return conn.execute("SELECT key, created FROM histogram_runs ORDER BY id").fetchall()
    except sqlite3.OperationalError:  # the table is not created yet
        return []


def test_store_resume_after_kill_9(tmp_path):
    store = tmp_path / "h.sqlite"
    cmd = [sys.executable, "-m", "attnphase", "histogram", "--variant", "both", "--seeds", "0:3", "--n-train",
           "200", "--n-draws", "1000", "--epochs", "40", "--batch-models", "1", "--store", str(store),
           "--quiet", "--device", "cpu"]
    proc = subprocess.Popen(cmd, env=_cli_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    while time.time() < deadline and len(_rows(store)) < 2 and proc.poll() is None:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = _rows(store)
    assert 1 <= len(before) < 4, "the run must be killed mid-way (4 runs of about a second each)"
    done = subprocess.run([*cmd[:-3], "--json", "--device", "cpu"], env=_cli_env(), capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    after = _rows(store)
    assert len(after) == 4 and len({k for k, _ in after}) == 4
    assert after[:len(before)] == before  # finished rows kept as they were, never rewritten
    assert [r["seed"] for r in json.loads(done.stdout)] == [0, 1, 2, 3]


# ------------------------------------------------------------------------------------------------ CLI

BASE = ["histogram", "--n-draws", "1000", "--epochs", "2", "--n-train", "100", "--no-progress", "--device", "cpu"]


@pytest.mark.parametrize("extra", [
    ["--variant", "lateral"], ["--variant", ""], ["--n-train", "0"], ["--n-train", "701"], ["--epochs", "0"],
    ["--width", "7"], ["--lr", "-1"], ["--lr", "nan"], ["--seeds", "3:1"], ["--seq-len", "1"],
    ["--device", "tpu"], ["--width", "4096", "--hidden", "16384", "--seeds", "0:999", "--batch-models", "1000"],
    ["--n-draws", "999999999"], ["--seed", "-1"], ["--optimizer", "lbfgs"],
])
def test_cli_bad_input_one_line_exit_2(extra, capsys, tmp_path):
    store = tmp_path / "never.sqlite"
    rc = main([*BASE, "--store", str(store), *extra])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "error" in err
    assert not store.exists()  # refused before any work


def test_cli_refuses_foreign_store(capsys, tmp_path):
    foreign = tmp_path / "notes.txt"
    foreign.write_text("not a database")
    assert main([*BASE, "--store", str(foreign)]) == 2
    assert capsys.readouterr().err.count("\n") == 1 and foreign.read_text() == "not a database"


def test_cli_json_fields(capsys):
    assert main([*BASE, "--variant", "positional,semantic", "--seed", "3", "--json", "--quiet"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["variant"], r["seed"]) for r in rows] == [("positional", 3), ("semantic", 3)]
    for r in rows:
        assert {"variant", "n_train", "seed", "val_accuracy", "mechanism", "mechanism_score"} <= set(r)
        assert r["n_train"] == 100 and 0 <= r["val_accuracy"] <= 1 and -1 <= r["mechanism_score"] <= 1
    assert [r["mechanism"] for r in rows] == ["positional", "semantic"]
    assert main([*BASE, "--variant", "both", "--seeds", "0:1", "--summary", "--csv", "--quiet"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("n_train,runs,frac_positional") and out[1].startswith("100,2,")
