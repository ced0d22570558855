"""A crash-safe SQLite store of finite-d simulation results, one row per grid point.

Why SQLite: a sweep can be killed at any moment (kill -9 included) and rerun.  Each finished result is
committed in its own transaction in WAL mode, so a crash loses at most the point being computed and never
leaves a half-written row; a UNIQUE index over the grid-point identity makes `INSERT OR IGNORE` the
resume mechanism (a rerun simply skips keys that are already present).

Grid-point identity (``KEY_FIELDS``): every input that changes the result -- the setting (omega, sigma,
lam, A), the optimizer and its options, n_test, d, alpha, init and seed.  Floats are canonicalised to 12
significant digits before they reach the database, so ``0.1:1:10`` typed twice (or ``0.30000000000000004``
vs ``0.3``) hits the same key.  The full record returned by the experiment is kept verbatim as JSON.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import sqlite3
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from attnphase.setting import STUDY_A

SCHEMA_VERSION = 1

KEY_FIELDS: tuple[str, ...] = (
    "d", "alpha", "omega", "sigma", "lam", "A", "optimizer", "n_test", "init", "seed", "options",
)
"""Columns of the UNIQUE grid-point key, in key-tuple order."""

# Defaults used when a record handed to ResultStore.add lacks a key field that simulate's to_dict does not
# carry (A, n_test, options); the sweep always fills them in explicitly.
_KEY_DEFAULTS: dict[str, Any] = {"A": STUDY_A, "n_test": 10000, "options": {}}

METRICS: tuple[str, ...] = ("q", "m", "theta", "train_loss", "test_error", "test_error_linear")
"""Quantities averaged over seeds by :func:`aggregate` (MODEL.md section 2 names)."""

# Column order of load_results / export: MODEL.md section 6 names first, then provenance.
EXPORT_COLUMNS: tuple[str, ...] = (
    "d", "n", "alpha", "omega", "sigma", "lam", "A", "init", "optimizer", "seed", "n_test",
    "q", "m", "theta", "V", "train_loss", "test_error", "test_error_linear",
    "converged", "seconds", "grad_norm", "steps", "options", "created",
)

_FLOAT_COLUMNS = ("q", "m", "theta", "V", "train_loss", "test_error", "test_error_linear", "seconds",
                  "grad_norm")

_SIG_DIGITS = 12

Key = tuple[Any, ...]


def canon_float(x: Any, name: str = "value") -> float:
    """Round to 12 significant digits so that the same SPEC always produces bit-identical keys.

    linspace and decimal parsing can differ in the last ulp between runs/platforms; 12 digits is far
    coarser than that yet far finer than any grid anyone would type.  -0.0 is folded into 0.0.
    """
    try:
        v = float(x)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {x!r}") from None
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite, got {x!r}")
    if v == 0.0:
        return 0.0
    return float(f"{v:.{_SIG_DIGITS}g}")


def canon_matrix(A: Any) -> str:
    """A as text "a11,a12;a21,a22" with canonical floats (a text column keeps the UNIQUE index simple)."""
    if isinstance(A, str):
        from attnphase.setting import parse_matrix

        A = parse_matrix(A)
    try:
        rows = [[canon_float(v, "A") for v in row] for row in A]
    except TypeError:
        raise ValueError(f"A must be a matrix of numbers, got {A!r}") from None
    return ";".join(",".join(f"{v:.{_SIG_DIGITS}g}" for v in row) for row in rows)


def _canon_json_value(v: Any) -> Any:
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return v
    if isinstance(v, int):
        return int(v)
    if isinstance(v, float):
        return canon_float(v, "option")
    if isinstance(v, Mapping):
        return {str(k): _canon_json_value(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_canon_json_value(x) for x in v]
    if hasattr(v, "item"):  # numpy scalar
        return _canon_json_value(v.item())
    raise ValueError(f"option values must be numbers, strings, booleans or lists, got {v!r}")


def canon_options(options: Mapping[str, Any] | str | None) -> str:
    """Optimizer options as sorted, compact JSON: the same options always give the same key text."""
    if options is None:
        options = {}
    if isinstance(options, str):
        try:
            options = json.loads(options) if options.strip() else {}
        except json.JSONDecodeError:
            raise ValueError(f"options must be a JSON object, got {options!r}") from None
    if not isinstance(options, Mapping):
        raise ValueError(f"options must be a mapping, got {options!r}")
    return json.dumps(_canon_json_value(options), sort_keys=True, separators=(",", ":"))


def _canon_int(x: Any, name: str) -> int:
    if isinstance(x, bool):
        raise ValueError(f"{name} must be an integer, got {x!r}")
    try:
        f = float(x)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be an integer, got {x!r}") from None
    if not f.is_integer():
        raise ValueError(f"{name} must be an integer, got {x!r}")
    return int(f)


def canonical_key(fields: Mapping[str, Any]) -> Key:
    """The canonical key tuple (order ``KEY_FIELDS``) of a record or grid point."""
    get = {**_KEY_DEFAULTS, **fields}
    missing = [k for k in KEY_FIELDS if k not in get]
    if missing:
        raise ValueError(f"record lacks grid-key field(s): {', '.join(missing)}")
    return (
        _canon_int(get["d"], "d"),
        canon_float(get["alpha"], "alpha"),
        canon_float(get["omega"], "omega"),
        canon_float(get["sigma"], "sigma"),
        canon_float(get["lam"], "lam"),
        canon_matrix(get["A"]),
        str(get["optimizer"]),
        _canon_int(get["n_test"], "n_test"),
        str(get["init"]),
        _canon_int(get["seed"], "seed"),
        canon_options(get["options"]),
    )


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="milliseconds")


def _jsonable(v: Any) -> Any:
    if hasattr(v, "tolist"):
        return v.tolist()
    if isinstance(v, float) and not math.isfinite(v):
        return None  # JSON has no NaN; None reads back as NaN in pandas
    return v


_KEY_DDL = """
    d INTEGER NOT NULL, alpha REAL NOT NULL, omega REAL NOT NULL, sigma REAL NOT NULL, lam REAL NOT NULL,
    A TEXT NOT NULL, optimizer TEXT NOT NULL, n_test INTEGER NOT NULL, init TEXT NOT NULL,
    seed INTEGER NOT NULL, options TEXT NOT NULL
"""

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS results (
    id INTEGER PRIMARY KEY,
    {_KEY_DDL},
    record TEXT NOT NULL,
    created TEXT NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS results_key ON results ({", ".join(KEY_FIELDS)});
CREATE TABLE IF NOT EXISTS failures (
    id INTEGER PRIMARY KEY,
    {_KEY_DDL},
    error TEXT NOT NULL,
    created TEXT NOT NULL
);
"""


@dataclass
class ResultStore:
    """Read/write access to a results store (created on first use).

    Only one process should write (the sweep's parent); readers may open it concurrently (WAL mode).
    """

    path: str

    def __post_init__(self) -> None:
        self.path = os.fspath(self.path)
        # autocommit (isolation_level=None): each INSERT is its own transaction, committed before add()
        # returns, so a kill between points never loses or half-writes a row.
        self._conn = sqlite3.connect(self.path, timeout=60.0, isolation_level=None)
        try:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA busy_timeout=60000")
            self._conn.executescript(_SCHEMA)
            version = self._conn.execute("PRAGMA user_version").fetchone()[0]
            if version == 0:
                self._conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            elif version != SCHEMA_VERSION:
                raise ValueError(f"{self.path}: store schema version {version}, expected {SCHEMA_VERSION}")
        except sqlite3.DatabaseError as exc:
            self._conn.close()
            raise ValueError(f"{self.path}: not a usable results store ({exc})") from None

    # -- writing ---------------------------------------------------------------------------------------
    def add(self, record: Mapping[str, Any], key: Key | None = None) -> bool:
        """Insert one finished result; returns False (and changes nothing) if its key is already stored.

        The key is taken from `key` if given, else from the record's own fields (A, n_test and options
        default to the study's values / no options).  The full record is stored as JSON.
        """
        key = canonical_key(record) if key is None else key
        payload = json.dumps({k: _jsonable(v) for k, v in record.items()})
        cur = self._conn.execute(
            f"INSERT OR IGNORE INTO results ({', '.join(KEY_FIELDS)}, record, created) "
            f"VALUES ({', '.join('?' * (len(KEY_FIELDS) + 2))})",
            (*key, payload, _now()),
        )
        return cur.rowcount == 1

    def add_failure(self, key: Key, error: str) -> None:
        """Log a grid point whose task raised.  Not a result: the point is retried on the next run."""
        self._conn.execute(
            f"INSERT INTO failures ({', '.join(KEY_FIELDS)}, error, created) "
            f"VALUES ({', '.join('?' * (len(KEY_FIELDS) + 2))})",
            (*key, str(error), _now()),
        )

    # -- reading ---------------------------------------------------------------------------------------
    def done_keys(self) -> set[Key]:
        """Canonical keys of all stored results (compare with :func:`canonical_key`)."""
        rows = self._conn.execute(f"SELECT {', '.join(KEY_FIELDS)} FROM results").fetchall()
        return {tuple(r) for r in rows}

    def __len__(self) -> int:
        return int(self._conn.execute("SELECT COUNT(*) FROM results").fetchone()[0])

    def to_frame(self) -> pd.DataFrame:
        """All results, one row per grid point, columns ``EXPORT_COLUMNS`` first then any extra keys."""
        rows = self._conn.execute(
            f"SELECT {', '.join(KEY_FIELDS)}, record, created FROM results ORDER BY id"
        ).fetchall()
        out = []
        for row in rows:
            rec = json.loads(row[len(KEY_FIELDS)])
            # The canonical key columns win over the task's own echo of them (e.g. alpha) so that
            # grouping by them matches the grid exactly.
            rec.update(zip(KEY_FIELDS, row[: len(KEY_FIELDS)], strict=True))
            rec["created"] = row[-1]
            out.append(rec)
        return _ordered_frame(out, EXPORT_COLUMNS)

    def failures(self) -> pd.DataFrame:
        """The failure log (one row per failed attempt)."""
        rows = self._conn.execute(
            f"SELECT {', '.join(KEY_FIELDS)}, error, created FROM failures ORDER BY id"
        ).fetchall()
        return pd.DataFrame(rows, columns=[*KEY_FIELDS, "error", "created"])

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> ResultStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _ordered_frame(rows: list[dict[str, Any]], preferred: Iterable[str]) -> pd.DataFrame:
    df = pd.DataFrame(rows)
    preferred = list(preferred)
    if df.empty:
        # An empty store still exports the documented header (V only exists in theory records).
        return pd.DataFrame(columns=[c for c in preferred if c != "V"])
    cols = [c for c in preferred if c in df.columns] + [c for c in df.columns if c not in preferred]
    df = df[cols].copy()
    # NaN is stored as JSON null; a column of only nulls would come back as object dtype.
    for c in _FLOAT_COLUMNS:
        if c in df.columns and df[c].dtype == object:
            try:
                df[c] = pd.to_numeric(df[c]).astype(float)
            except (TypeError, ValueError):  # e.g. matrix-valued overlaps (r > 1): leave as they are
                pass
    return df


def load_results(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Read a store into a DataFrame (see :meth:`ResultStore.to_frame`).

    Raises FileNotFoundError for a missing file (never creates one) and ValueError for a file that is
    not a results store.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no such store: {path}")
    try:
        conn = sqlite3.connect(path, timeout=60.0)
        try:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        raise ValueError(f"{path}: not a results store ({exc})") from None
    if "results" not in tables:
        raise ValueError(f"{path}: not a results store (no results table)")
    with ResultStore(path) as store:
        return store.to_frame()


def aggregate(df: pd.DataFrame) -> pd.DataFrame:
    """Mean and standard error over seeds for each experiment (d, alpha, omega, init, optimizer, ...).

    Grouping also keeps every other identity column that is present (sigma, lam, A, n_test, options) so
    that results of different settings are never averaged together.  Output columns: the group columns,
    n_seeds, and ``<name>_mean`` / ``<name>_sem`` for each of q, m, theta, train_loss, test_error,
    test_error_linear (sem = sample std / sqrt(n_seeds); NaN when n_seeds = 1, since one seed says
    nothing about the spread).
    """
    primary = ["d", "alpha", "omega", "init", "optimizer"]
    missing = [c for c in primary if c not in df.columns]
    if missing:
        raise ValueError(f"aggregate: results lack column(s) {', '.join(missing)}")
    extra = [c for c in ("sigma", "lam", "A", "n_test", "options") if c in df.columns]
    group = primary + extra
    stat_cols = [f"{m}_{s}" for m in METRICS for s in ("mean", "sem")]
    if df.empty:
        return pd.DataFrame(columns=[*group, "n_seeds", *stat_cols])
    rows = []
    for keys, sub in df.groupby(group, sort=True, dropna=False):
        row = dict(zip(group, keys, strict=True))
        n = len(sub)
        row["n_seeds"] = n
        for name in METRICS:
            vals = pd.to_numeric(sub[name], errors="coerce") if name in sub else pd.Series([float("nan")] * n)
            row[f"{name}_mean"] = float(vals.mean())
            row[f"{name}_sem"] = float(vals.std(ddof=1) / math.sqrt(n)) if n > 1 else float("nan")
        rows.append(row)
    return pd.DataFrame(rows, columns=[*group, "n_seeds", *stat_cols])
