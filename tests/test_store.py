"""The SQLite results store: keys, idempotent inserts, reading back, aggregation."""

from __future__ import annotations

import hashlib
import json
import math
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnphase.cli.common import parse_spec
from attnphase.experiments.store import (
    APPLICATION_ID,
    KEY_FIELDS,
    SCHEMA_VERSION,
    ResultStore,
    TheoryKey,
    aggregate,
    canon_float,
    canon_matrix,
    canon_options,
    canonical_key,
    check_store_file,
    load_results,
)


def record(**over):
    """A record shaped like simulate(...).to_dict() plus the sweep's extra key fields."""
    rec = {
        "d": 8, "n": 8, "alpha": 1.0, "omega": 0.3, "sigma": 0.5, "lam": 0.01, "init": "positional",
        "optimizer": "gd", "seed": 0, "q": 0.1, "m": 0.2, "theta": 0.0, "train_loss": 0.05,
        "test_error": 0.07, "test_error_linear": 0.002, "converged": True, "seconds": 0.5,
        "grad_norm": 1e-7, "steps": 100, "A": [[0.6, 0.4], [0.4, 0.6]], "n_test": 100, "options": {},
    }
    rec.update(over)
    return rec


# -- canonicalisation ------------------------------------------------------------------------------------

def test_canon_float_folds_last_ulp_differences():
    assert canon_float(0.1 + 0.2) == canon_float(0.3) == 0.3
    assert canon_float(-0.0) == 0.0 and math.copysign(1.0, canon_float(-0.0)) == 1.0
    assert canon_float(1 / 3) == 0.333333333333
    with pytest.raises(ValueError):
        canon_float(float("nan"))
    with pytest.raises(ValueError):
        canon_float("abc")


@settings(max_examples=200, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e300, max_value=1e300))
def test_canon_float_idempotent_and_close(x):
    c = canon_float(x)
    assert canon_float(c) == c
    assert abs(c - x) <= 1e-11 * abs(x)


def test_same_spec_typed_differently_gives_same_keys():
    # linspace yields 0.30000000000000004 where the typed list has 0.3: the keys must agree.
    from_linspace = np.linspace(0.1, 1.0, 10).tolist()
    typed = parse_spec("0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,1.0")
    assert from_linspace != typed  # the raw floats really differ (otherwise this test proves nothing)
    keys_a = {canonical_key(record(alpha=a)) for a in from_linspace}
    keys_b = {canonical_key(record(alpha=a)) for a in typed}
    assert keys_a == keys_b and len(keys_a) == 10


def test_key_covers_every_identity_field():
    base = canonical_key(record())
    assert len(base) == len(KEY_FIELDS)
    variants = [
        record(d=16), record(alpha=2.0), record(omega=0.4), record(sigma=0.6), record(lam=0.02),
        record(A=[[0.3, 0.7], [0.8, 0.2]]), record(optimizer="adam"), record(n_test=200),
        record(init="semantic"), record(seed=1), record(options={"steps": 10}),
    ]
    keys = {canonical_key(v) for v in variants}
    assert base not in keys and len(keys) == len(variants)
    # Non-identity fields (results) do not enter the key.
    assert canonical_key(record(q=99.0, seconds=3.0)) == base


def test_matrix_and_options_canonical_text():
    assert canon_matrix("0.6,0.4;0.4,0.6") == canon_matrix([[0.6, 0.4], [0.4, 0.6]]) == "0.6,0.4;0.4,0.6"
    assert canon_matrix([[0.1 + 0.2, 0.7], [0.5, 0.5]]) == "0.3,0.7;0.5,0.5"
    assert canon_options({"b": 1, "a": 0.1 + 0.2}) == canon_options('{"a": 0.3, "b": 1}') == '{"a":0.3,"b":1}'
    assert canon_options(None) == canon_options({}) == "{}"
    with pytest.raises(ValueError):
        canon_options("[1, 2]")


def test_key_rejects_bad_records():
    rec = record()
    del rec["seed"]
    with pytest.raises(ValueError, match="seed"):
        canonical_key(rec)
    with pytest.raises(ValueError, match="d must be an integer"):
        canonical_key(record(d=8.5))


# -- writing and reading ---------------------------------------------------------------------------------

def test_add_skip_no_duplicate(tmp_path):
    path = tmp_path / "s.sqlite"
    with ResultStore(path) as store:
        assert store.add(record()) is True
        assert store.add(record(q=123.0)) is False  # same key: ignored, first result kept
        assert store.add(record(alpha=0.1 + 0.2)) is True
        assert store.add(record(alpha=0.3)) is False  # canonicalised alpha hits the same key
        assert len(store) == 2
        assert store.done_keys() == {canonical_key(record()), canonical_key(record(alpha=0.3))}
    # A fresh connection sees the same rows, and the first q won.
    df = load_results(path)
    assert len(df) == 2
    assert df.loc[df["alpha"] == 1.0, "q"].tolist() == [0.1]
    con = sqlite3.connect(path)
    try:
        assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        # The UNIQUE index is what guarantees no duplicates even for a raw INSERT.
        with pytest.raises(sqlite3.IntegrityError):
            con.execute(
                f"INSERT INTO results ({', '.join(KEY_FIELDS)}, record, created) "
                f"SELECT {', '.join(KEY_FIELDS)}, record, created FROM results LIMIT 1"
            )
    finally:
        con.close()


def test_to_frame_columns_and_values(tmp_path):
    path = tmp_path / "s.sqlite"
    with ResultStore(path) as store:
        store.add(record(extra_field="kept", q=float("nan")))
        df = store.to_frame()
    assert list(df.columns[:11]) == ["d", "n", "alpha", "omega", "sigma", "lam", "A", "init", "optimizer",
                                     "seed", "n_test"]
    for col in ("q", "m", "theta", "train_loss", "test_error", "test_error_linear", "converged", "seconds",
                "created", "extra_field", "options", "grad_norm", "steps"):
        assert col in df.columns
    row = df.iloc[0]
    assert row["d"] == 8 and row["alpha"] == 1.0 and row["A"] == "0.6,0.4;0.4,0.6"
    assert row["options"] == "{}" and row["extra_field"] == "kept"
    assert bool(row["converged"]) is True
    assert np.isnan(row["q"])  # NaN survives the JSON round trip as a missing value


def test_failures_table(tmp_path):
    with ResultStore(tmp_path / "s.sqlite") as store:
        key = canonical_key(record())
        store.add_failure(key, "RuntimeError: boom")
        store.add_failure(key, "RuntimeError: boom again")
        f = store.failures()
        assert len(f) == 2 and f["error"].tolist()[1] == "RuntimeError: boom again"
        assert len(store) == 0 and store.done_keys() == set()  # a failure is not a result


def test_load_results_missing_or_junk_file(tmp_path):
    missing = tmp_path / "nope.sqlite"
    with pytest.raises(FileNotFoundError):
        load_results(missing)
    assert not missing.exists()  # reading must never create a store
    junk = tmp_path / "junk.sqlite"
    junk.write_text("this is not a database\n" * 100)
    before = _sha(junk)
    with pytest.raises(ValueError, match="not an SQLite file"):
        load_results(junk)
    with pytest.raises(ValueError, match="not an SQLite file"):
        ResultStore(junk)
    assert _sha(junk) == before
    with pytest.raises(ValueError, match="is a directory"):
        ResultStore(tmp_path)


# -- guarding the file -----------------------------------------------------------------------------------

def _sha(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _foreign(path) -> None:
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
    con.executemany("INSERT INTO customers (name) VALUES (?)", [(f"c{i}",) for i in range(50)])
    con.commit()
    con.close()


def test_foreign_sqlite_file_is_refused_and_left_unchanged(tmp_path):
    other = tmp_path / "other.sqlite"
    _foreign(other)
    before, files_before = _sha(other), sorted(p.name for p in tmp_path.iterdir())
    for opener in (lambda: ResultStore(other), lambda: load_results(other)):
        with pytest.raises(ValueError, match="not an attnphase results store"):
            opener()
    assert _sha(other) == before  # not a byte written: no tables added, no WAL switch
    assert sorted(p.name for p in tmp_path.iterdir()) == files_before  # no -wal / -shm left beside it
    con = sqlite3.connect(other)
    try:
        assert con.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    finally:
        con.close()


def test_sqlite_file_with_another_application_id_is_refused(tmp_path):
    other = tmp_path / "app.sqlite"
    con = sqlite3.connect(other)
    con.execute("PRAGMA application_id=1234")
    con.execute("CREATE TABLE results (x)")  # even with a table of the same name
    con.execute("CREATE TABLE failures (x)")
    con.commit()
    con.close()
    before = _sha(other)
    with pytest.raises(ValueError, match="application_id"):
        ResultStore(other)
    assert _sha(other) == before


def test_new_store_is_marked(tmp_path):
    path = tmp_path / "s.sqlite"
    ResultStore(path).close()
    con = sqlite3.connect(path)
    try:
        assert con.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
        assert con.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    finally:
        con.close()
    assert check_store_file(str(path)).state == "current"


def test_newer_schema_is_refused(tmp_path):
    path = tmp_path / "s.sqlite"
    with ResultStore(path) as store:
        store.add(record())
    con = sqlite3.connect(path)
    con.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    con.close()
    before = _sha(path)
    for opener in (lambda: ResultStore(path), lambda: load_results(path)):
        with pytest.raises(ValueError, match="newer"):
            opener()
    assert _sha(path) == before


_V1_SCHEMA = f"""
CREATE TABLE results (id INTEGER PRIMARY KEY, d INTEGER NOT NULL, alpha REAL NOT NULL, omega REAL NOT NULL,
    sigma REAL NOT NULL, lam REAL NOT NULL, A TEXT NOT NULL, optimizer TEXT NOT NULL, n_test INTEGER NOT NULL,
    init TEXT NOT NULL, seed INTEGER NOT NULL, options TEXT NOT NULL, record TEXT NOT NULL, created TEXT NOT NULL);
CREATE UNIQUE INDEX results_key ON results ({", ".join(KEY_FIELDS)});
CREATE TABLE failures (id INTEGER PRIMARY KEY, d INTEGER NOT NULL, alpha REAL NOT NULL, omega REAL NOT NULL,
    sigma REAL NOT NULL, lam REAL NOT NULL, A TEXT NOT NULL, optimizer TEXT NOT NULL, n_test INTEGER NOT NULL,
    init TEXT NOT NULL, seed INTEGER NOT NULL, options TEXT NOT NULL, error TEXT NOT NULL, created TEXT NOT NULL);
PRAGMA user_version=1;
"""


def test_first_schema_store_is_read_and_migrated(tmp_path):
    """A store written by the first schema (no application_id, no theory table) keeps its rows."""
    path = tmp_path / "v1.sqlite"
    con = sqlite3.connect(path)
    con.executescript(_V1_SCHEMA)
    key = canonical_key(record())
    con.execute(f"INSERT INTO results ({', '.join(KEY_FIELDS)}, record, created) VALUES "
                f"({', '.join('?' * (len(KEY_FIELDS) + 2))})", (*key, json.dumps(record(q=0.25)), "2026-01-01"))
    con.commit()
    con.close()
    before = _sha(path)
    assert load_results(path)["q"].tolist() == [0.25]  # reading does not migrate
    assert _sha(path) == before
    with ResultStore(path) as store:
        assert store.done_keys() == {key}
        assert store.put_theory(TheoryKey("fixed_point", {"omega": 0.3}, alpha=1.0), {"x": 1})
    con = sqlite3.connect(path)
    try:
        assert con.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
        assert con.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    finally:
        con.close()


def _corrupt_middle(path: Path) -> None:
    """Overwrite one page in the middle of the file with garbage (not the header page)."""
    con = sqlite3.connect(path)
    page = con.execute("PRAGMA page_size").fetchone()[0]
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    n_pages = path.stat().st_size // page
    assert n_pages >= 4, "the test store is too small to corrupt a middle page"
    rng = np.random.default_rng(0)
    with open(path, "r+b") as fh:
        fh.seek((n_pages // 2) * page)
        fh.write(rng.integers(0, 256, size=page, dtype=np.uint8).tobytes())


def test_damaged_store_is_refused(tmp_path):
    path = tmp_path / "s.sqlite"
    with ResultStore(path) as store:
        for seed in range(300):
            store.add(record(seed=seed, note="x" * 200))
    _corrupt_middle(path)
    for opener in (lambda: ResultStore(path), lambda: load_results(path)):
        with pytest.raises(ValueError, match="damaged"):
            opener()


def test_theory_results_round_trip(tmp_path):
    path = tmp_path / "s.sqlite"
    setting = {"omega": 0.1 + 0.2, "sigma": 0.5, "A": [[0.6, 0.4], [0.4, 0.6]]}
    key = TheoryKey("fixed_point", setting, alpha=1.5, branch="semantic", precision="fast", seed=3)
    with ResultStore(path) as store:
        assert store.get_theory(key) is None
        assert store.put_theory(key, {"q": 0.5, "errors": {"q": float("nan")}}) is True
        assert store.put_theory(key, {"q": 9.0}) is False  # first result kept
        same = TheoryKey("fixed_point", {**setting, "omega": 0.3}, alpha=1.5, branch="semantic",
                         precision="fast", seed=3)
        assert store.get_theory(same)["q"] == 0.5  # canonical floats: the same key
        for other in (TheoryKey("fixed_point", setting, alpha=1.5, branch="semantic", precision="fast", seed=4),
                      TheoryKey("fixed_point", setting, alpha=1.5, branch="positional", precision="fast", seed=3),
                      TheoryKey("fixed_point", setting, alpha=1.5, branch="semantic", precision="high", seed=3),
                      TheoryKey("transition", setting, alpha=1.5, branch="semantic", precision="fast", seed=3)):
            assert store.get_theory(other) is None
        assert store.theory_count() == 1
        assert len(store) == 0  # theory results are not simulation results
    with ResultStore(path, readonly=True) as ro:
        assert math.isnan(ro.get_theory(key)["errors"]["q"])


def test_empty_store_frame_has_header(tmp_path):
    path = tmp_path / "s.sqlite"
    ResultStore(path).close()
    df = load_results(path)
    assert df.empty and {"alpha", "omega", "q", "test_error", "d", "seed"} <= set(df.columns)
    agg = aggregate(df)
    assert agg.empty and "test_error_mean" in agg.columns


# -- aggregation -----------------------------------------------------------------------------------------

def test_aggregate_mean_and_sem(tmp_path):
    path = tmp_path / "s.sqlite"
    errs = [0.10, 0.12, 0.17]
    with ResultStore(path) as store:
        for seed, e in enumerate(errs):
            store.add(record(seed=seed, test_error=e, q=0.1 * (seed + 1)))
        store.add(record(init="semantic", test_error=0.05))  # single seed
        store.add(record(sigma=0.6, test_error=0.9))  # another setting: never averaged in
    agg = aggregate(load_results(path))
    assert len(agg) == 3
    for col in ("d", "alpha", "omega", "init", "optimizer", "n_seeds"):
        assert col in agg.columns
    for name in ("q", "m", "theta", "train_loss", "test_error", "test_error_linear"):
        assert f"{name}_mean" in agg.columns and f"{name}_sem" in agg.columns
    pos = agg[(agg["init"] == "positional") & (agg["sigma"] == 0.5)].iloc[0]
    assert pos["n_seeds"] == 3
    assert pos["test_error_mean"] == pytest.approx(np.mean(errs), rel=1e-12)
    assert pos["test_error_sem"] == pytest.approx(np.std(errs, ddof=1) / np.sqrt(3), rel=1e-12)
    assert pos["q_mean"] == pytest.approx(0.2, rel=1e-12)
    assert pos["m_sem"] == pytest.approx(0.0, abs=1e-15)
    sem = agg[agg["init"] == "semantic"].iloc[0]
    assert sem["n_seeds"] == 1 and sem["test_error_mean"] == 0.05 and np.isnan(sem["test_error_sem"])
    other = agg[agg["sigma"] == 0.6].iloc[0]
    assert other["test_error_mean"] == 0.9


def test_aggregate_requires_grouping_columns():
    with pytest.raises(ValueError, match="lack"):
        aggregate(pd.DataFrame({"alpha": [1.0], "q": [0.1]}))


def test_parse_spec_linspace_values_are_clean():
    assert parse_spec("0.1:1:10") == parse_spec("0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,1.0")
