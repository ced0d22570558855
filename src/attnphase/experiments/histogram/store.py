"""Histogram runs in the project's results store: one small extra table in the same SQLite file.

Why a separate table opened here rather than a change to attnphase.store: the file is first opened by
:class:`attnphase.store.ResultStore`, which checks that it is an attnphase store (application_id, schema
version, integrity) and creates or migrates its own tables; only then is ``histogram_runs`` added with
``CREATE TABLE IF NOT EXISTS``.  An extra table is invisible to the rest of the code (it reads its own tables
by name), so the schema version need not change and older attnphase versions still open the file.

Rows follow the store's rules: one row per key (every input that changes the result, as canonical JSON), each
committed in its own transaction in WAL mode, ``INSERT OR IGNORE`` so that a rerun after a crash (kill -9
included) only fills in the keys that are missing.  A row holds the run's record as JSON and its trained
parameters as float32 bytes (about 95 KB at the study's sizes), so the figures and the stability test reuse
stored models instead of retraining them.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import sqlite3
from typing import Any

import numpy as np

from attnphase.errors import InputError
from attnphase.experiments.store import ResultStore, canon_options

_DDL = """
CREATE TABLE IF NOT EXISTS histogram_runs (
    id INTEGER PRIMARY KEY,
    kind TEXT NOT NULL, key TEXT NOT NULL,
    variant TEXT NOT NULL, n_train INTEGER NOT NULL, seed INTEGER NOT NULL,
    record TEXT NOT NULL, params BLOB,
    created TEXT NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS histogram_runs_key ON histogram_runs (kind, key);
"""


# Restricted runs stored before W_Q and W_K took the whole width as their fan-in started from another
# initialisation (bound 1/sqrt(width/2)); this tag in their key keeps them from being read back as current.
# Unrestricted runs never changed, so their keys (and stored sweeps) stay valid.
RESTRICTED_INIT = "qk-fan-in-width"


def run_key(variant: str, n_train: int, seed: int, schedule: Any, **extra: Any) -> str:
    """Canonical identity of a run: variant, n_train, seed, the whole schedule and any further inputs."""
    tag = {} if variant == "both" else {"init": RESTRICTED_INIT}
    return canon_options({"variant": variant, "n_train": int(n_train), "seed": int(seed),
                          **schedule.as_dict(), **tag, **extra})


class HistogramStore:
    """Read/write the ``histogram_runs`` table of an attnphase results store (created if missing)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        ResultStore(self.path).close()  # the guarded opener: refuses foreign or damaged files, creates ours
        self._conn = sqlite3.connect(self.path, timeout=60.0, isolation_level=None)
        try:
            self._conn.execute("PRAGMA busy_timeout=60000")
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("BEGIN IMMEDIATE")
            for stmt in _DDL.split(";"):
                if stmt.strip():
                    self._conn.execute(stmt)
            self._conn.execute("COMMIT")
        except sqlite3.Error as exc:
            self._conn.close()
            raise InputError(f"{self.path}: not a usable results store ({exc})") from None

    def put(self, kind: str, key: str, record: dict[str, Any], params: np.ndarray | None = None) -> bool:
        """Insert one finished run; False (nothing changed) if the key is already stored."""
        blob = None if params is None else np.asarray(params, dtype="<f4").tobytes()
        cur = self._conn.execute(
            "INSERT OR IGNORE INTO histogram_runs (kind, key, variant, n_train, seed, record, params, created) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (kind, key, str(record["variant"]), int(record["n_train"]), int(record["seed"]),
             json.dumps(record, allow_nan=True), blob, _dt.datetime.now(_dt.UTC).isoformat(timespec="milliseconds")))
        return cur.rowcount == 1

    def get(self, kind: str, key: str) -> tuple[dict[str, Any], np.ndarray | None] | None:
        row = self._conn.execute("SELECT record, params FROM histogram_runs WHERE kind = ? AND key = ?",
                                 (kind, key)).fetchone()
        if row is None:
            return None
        params = None if row[1] is None else np.frombuffer(row[1], dtype="<f4").copy()
        return json.loads(row[0]), params

    def keys(self, kind: str) -> set[str]:
        return {r[0] for r in self._conn.execute("SELECT key FROM histogram_runs WHERE kind = ?", (kind,))}

    def rows(self, kind: str) -> list[dict[str, Any]]:
        """Every stored record of one kind ("train" or "stability"), oldest first, with its ``created``."""
        out = []
        for rec, created in self._conn.execute(
                "SELECT record, created FROM histogram_runs WHERE kind = ? ORDER BY id", (kind,)):
            d = json.loads(rec)
            d["created"] = created
            out.append(d)
        return out

    def count(self, kind: str | None = None) -> int:
        if kind is None:
            return int(self._conn.execute("SELECT COUNT(*) FROM histogram_runs").fetchone()[0])
        return int(self._conn.execute("SELECT COUNT(*) FROM histogram_runs WHERE kind = ?", (kind,)).fetchone()[0])

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> HistogramStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
