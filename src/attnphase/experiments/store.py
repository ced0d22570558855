"""A crash-safe SQLite store of finite-d simulation results, one row per grid point.

Why SQLite: a sweep can be killed at any moment (kill -9 included) and rerun.  Each finished result is
committed in its own transaction in WAL mode, so a crash loses at most the point being computed and never
leaves a half-written row; a UNIQUE index over the grid-point identity makes `INSERT OR IGNORE` the
resume mechanism (a rerun simply skips keys that are already present).

Grid-point identity (``KEY_FIELDS``): every input that changes the result -- the setting (omega, sigma,
lam, A), the optimizer and its options, n_test, d, alpha, init and seed.  Floats are canonicalised to 12
significant digits before they reach the database, so ``0.1:1:10`` typed twice (or ``0.30000000000000004``
vs ``0.3``) hits the same key.  The full record returned by the experiment is kept verbatim as JSON.

Theory results live in the same file (table ``theory``), keyed by kind, canonical setting, alpha, branch,
precision, seed and any further parameters, so that one store is the one place a reproduction resumes from.

Guarding the file: an attnphase store is marked with SQLite's ``application_id`` (:data:`APPLICATION_ID`) and
its schema version in ``user_version``.  Opening a path checks, before a single byte is written, that it is
an SQLite file, that it is ours (or a store of the first schema, recognised by its tables, which is then
migrated), that its schema is not newer than this code, and that SQLite's quick integrity check passes; any
other file is refused with one line (ValueError) and left exactly as it was.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import sqlite3
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from attnphase.errors import InputError, InputTypeError
from attnphase.setting import STUDY_A

APPLICATION_ID = 0x41545048  # "ATPH": PRAGMA application_id of every attnphase store
SCHEMA_VERSION = 2
"""1: results + failures (no application_id); 2: marked with APPLICATION_ID, adds the theory table."""

_SQLITE_MAGIC = b"SQLite format 3\x00"

KEY_FIELDS: tuple[str, ...] = (
    "d", "alpha", "omega", "sigma", "lam", "A", "optimizer", "n_test", "init", "seed", "options",
)
"""Columns of the UNIQUE grid-point key, in key-tuple order."""

# Defaults used when a record handed to ResultStore.add lacks a key field that simulate's to_dict does not
# carry (A, n_test, options); the sweep always fills them in explicitly.
_KEY_DEFAULTS: dict[str, Any] = {"A": STUDY_A, "n_test": 10000, "options": {}}

METRICS: tuple[str, ...] = ("q", "m", "theta", "train_loss", "test_error", "test_error_linear")
"""Quantities averaged over seeds by :func:`aggregate` (the documented names of the reported quantities)."""

# Column order of load_results / export: the documented result names first, then provenance.
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
        raise InputError(f"{name} must be a number, got {x!r}") from None
    if not math.isfinite(v):
        raise InputError(f"{name} must be finite, got {x!r}")
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
        raise InputError(f"A must be a matrix of numbers, got {A!r}") from None
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
    raise InputError(f"option values must be numbers, strings, booleans or lists, got {v!r}")


def canon_options(options: Mapping[str, Any] | str | None) -> str:
    """Optimizer options as sorted, compact JSON: the same options always give the same key text."""
    if options is None:
        options = {}
    if isinstance(options, str):
        try:
            options = json.loads(options) if options.strip() else {}
        except json.JSONDecodeError:
            raise InputError(f"options must be a JSON object, got {options!r}") from None
    if not isinstance(options, Mapping):
        raise InputError(f"options must be a mapping, got {options!r}")
    return json.dumps(_canon_json_value(options), sort_keys=True, separators=(",", ":"))


def _canon_int(x: Any, name: str) -> int:
    if isinstance(x, bool):
        raise InputError(f"{name} must be an integer, got {x!r}")
    try:
        f = float(x)
    except (TypeError, ValueError):
        raise InputError(f"{name} must be an integer, got {x!r}") from None
    if not f.is_integer():
        raise InputError(f"{name} must be an integer, got {x!r}")
    return int(f)


def canonical_key(fields: Mapping[str, Any]) -> Key:
    """The canonical key tuple (order ``KEY_FIELDS``) of a record or grid point."""
    get = {**_KEY_DEFAULTS, **fields}
    missing = [k for k in KEY_FIELDS if k not in get]
    if missing:
        raise InputError(f"record lacks grid-key field(s): {', '.join(missing)}")
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
CREATE TABLE IF NOT EXISTS theory (
    id INTEGER PRIMARY KEY,
    kind TEXT NOT NULL, setting TEXT NOT NULL, alpha REAL NOT NULL, branch TEXT NOT NULL,
    precision TEXT NOT NULL, seed INTEGER NOT NULL, params TEXT NOT NULL,
    value TEXT NOT NULL,
    created TEXT NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS theory_key ON theory (kind, setting, alpha, branch, precision, seed, params);
"""

_V1_TABLES = {"results", "failures"}
_OUR_TABLES = {"results", "failures", "theory"}


def _ro_uri(path: str) -> str:
    from urllib.parse import quote

    return f"file:{quote(os.path.abspath(path))}?mode=ro"


def _is_wal(path: str) -> bool:
    """The SQLite header says WAL mode (file format read/write versions 2 at bytes 18-19)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(20)
    except OSError:
        return False
    return head[:16] == _SQLITE_MAGIC and head[18:20] == b"\x02\x02"


def _read_connection(path: str, **kwargs: Any) -> sqlite3.Connection:
    """A connection that only reads and leaves nothing beside the file.  mode=ro creates nothing for a rollback-
    journal database, but on a WAL database it creates -wal and -shm files it cannot remove.  So a WAL database that
    no one has open (no -wal beside it) is opened read-write with query_only: SQLite itself removes the files when
    this, the last connection, closes (and coordinates with any writer that joins meanwhile)."""
    if _is_wal(path) and not os.path.exists(path + "-wal") and os.access(path, os.W_OK):
        conn = sqlite3.connect(_ro_uri(path).replace("mode=ro", "mode=rw"), uri=True, **kwargs)
        conn.execute("PRAGMA query_only = 1")
        return conn
    return sqlite3.connect(_ro_uri(path), uri=True, **kwargs)


@dataclass(frozen=True)
class StoreCheck:
    """What :func:`check_store_file` found: ``state`` is "new" (missing or empty file), "current" or "v1"
    (a store of the first schema, to be migrated)."""

    state: str
    version: int


def check_store_file(path: str) -> StoreCheck:
    """Decide whether `path` may be used as a results store, reading only (never writes a byte).

    Raises ValueError, in one line, for a directory, a file that is not SQLite, another program's SQLite
    file, a store of a newer schema, or a damaged store (SQLite's quick_check).
    """
    if os.path.isdir(path):
        raise InputError(f"{path}: is a directory, expected a results store file")
    if not os.path.exists(path):
        return StoreCheck("new", 0)
    try:
        with open(path, "rb") as fh:
            head = fh.read(len(_SQLITE_MAGIC))
    except OSError as exc:
        raise InputError(f"{path}: cannot read the store ({exc.strerror})") from None
    if not head:
        return StoreCheck("new", 0)  # an empty file (e.g. from mktemp): SQLite treats it as a new database
    if head != _SQLITE_MAGIC:
        raise InputError(f"{path}: not an attnphase results store (not an SQLite file)")
    try:
        conn = _read_connection(path, timeout=60.0)
    except sqlite3.Error as exc:
        raise InputError(f"{path}: cannot open the store ({exc})") from None
    try:
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if app_id == APPLICATION_ID:
            if version > SCHEMA_VERSION:
                raise InputError(f"{path}: store schema version {version} is newer than this attnphase "
                                 f"understands ({SCHEMA_VERSION}); upgrade attnphase")
            state = "current" if version == SCHEMA_VERSION else "v1"
        elif app_id == 0 and not tables:
            state = "new"
        elif app_id == 0 and _V1_TABLES <= tables <= _OUR_TABLES and version in (0, 1):
            state = "v1"
        else:
            what = f"application_id {app_id:#x}" if app_id else f"tables {', '.join(sorted(tables))}"
            raise InputError(f"{path}: not an attnphase results store ({what}); refusing to modify it")
        problems = [r[0] for r in conn.execute("PRAGMA quick_check")]
    except sqlite3.DatabaseError as exc:
        raise InputError(f"{path}: damaged results store ({exc}); restore it from a copy") from None
    finally:
        conn.close()
    if problems != ["ok"]:
        raise InputError(f"{path}: damaged results store (integrity check: {problems[0]}); restore it from a copy")
    return StoreCheck(state, version)


@dataclass
class ResultStore:
    """Read/write access to a results store (created on first use unless ``create`` is false).

    The file is checked first (:func:`check_store_file`); a store of the first schema is migrated.  With
    ``readonly`` nothing is ever written (no migration either: both schemas read the same).  Only one process
    should write (the sweep's parent); readers may open it concurrently (WAL mode).
    """

    path: str
    create: bool = True
    readonly: bool = False

    def __post_init__(self) -> None:
        self.path = os.fspath(self.path)
        if not os.path.exists(self.path):
            if not self.create or self.readonly:
                raise FileNotFoundError(f"no such store: {self.path}")
            parent = os.path.dirname(os.path.abspath(self.path))
            if not os.path.isdir(parent):
                raise InputError(f"{self.path}: directory {parent} does not exist")
        elif not self.readonly and not os.access(self.path, os.W_OK):
            raise InputError(f"{self.path}: store file is not writable")
        check = check_store_file(self.path)
        if self.readonly:
            self._conn = _read_connection(self.path, timeout=60.0, isolation_level=None)
            return
        # autocommit (isolation_level=None): each INSERT is its own transaction, committed before add()
        # returns, so a kill between points never loses or half-writes a row.
        try:
            self._conn = sqlite3.connect(self.path, timeout=60.0, isolation_level=None)
        except sqlite3.Error as exc:
            raise InputError(f"{self.path}: cannot open or create the store ({exc})") from None
        try:
            self._conn.execute("PRAGMA busy_timeout=60000")
            if check.state != "current":
                self._initialise()
            self._conn.execute("PRAGMA journal_mode=WAL")
        except sqlite3.Error as exc:
            self._conn.close()
            raise InputError(f"{self.path}: not a usable results store ({exc})") from None

    def _initialise(self) -> None:
        """Create the tables of a new store or migrate a first-schema one (v1 -> 2 adds the theory table),
        in one transaction so that two sweeps starting together cannot half-create it."""
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            for stmt in _SCHEMA.split(";"):
                if stmt.strip():
                    self._conn.execute(stmt)
            self._conn.execute(f"PRAGMA application_id={APPLICATION_ID}")
            self._conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            self._conn.execute("COMMIT")
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise

    def _read(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        # A page damaged after the check at open time must fail loudly: unreadable rows are never "done".
        try:
            return self._conn.execute(sql, params).fetchall()
        except sqlite3.DatabaseError as exc:
            raise InputError(f"{self.path}: damaged results store ({exc}); restore it from a copy") from None

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
        rows = self._read(f"SELECT {', '.join(KEY_FIELDS)} FROM results")
        return {tuple(r) for r in rows}

    def __len__(self) -> int:
        return int(self._read("SELECT COUNT(*) FROM results")[0][0])

    def to_frame(self) -> pd.DataFrame:
        """All results, one row per grid point, columns ``EXPORT_COLUMNS`` first then any extra keys."""
        rows = self._read(f"SELECT {', '.join(KEY_FIELDS)}, record, created FROM results ORDER BY id")
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
        rows = self._read(f"SELECT {', '.join(KEY_FIELDS)}, error, created FROM failures ORDER BY id")
        return pd.DataFrame(rows, columns=[*KEY_FIELDS, "error", "created"])

    # -- theory results --------------------------------------------------------------------------------
    def put_theory(self, key: TheoryKey, value: Any) -> bool:
        """Store one theory result (any JSON-serialisable value); False if the key is already present."""
        cur = self._conn.execute(
            "INSERT OR IGNORE INTO theory (kind, setting, alpha, branch, precision, seed, params, value, created) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (*key.row(), json.dumps(value, default=_json_default, allow_nan=True), _now()),
        )
        return cur.rowcount == 1

    def get_theory(self, key: TheoryKey) -> Any | None:
        """The stored value for `key`, or None."""
        if not self._has_theory_table():
            return None  # a first-schema store opened read-only
        rows = self._read(
            "SELECT value FROM theory WHERE kind = ? AND setting = ? AND alpha = ? AND branch = ? "
            "AND precision = ? AND seed = ? AND params = ?", key.row())
        return json.loads(rows[0][0]) if rows else None

    def find_theory(self, kind: str, setting: Mapping[str, Any], precision: str, branch: str | None = None
                    ) -> list[tuple[dict[str, Any], Any]]:
        """Every stored (params, value) of one kind of result for a setting and precision (any alpha, any
        parameters; `branch` narrows it): how a reader finds results whose grid it does not know beforehand."""
        if not self._has_theory_table():
            return []
        sql = "SELECT params, value FROM theory WHERE kind = ? AND setting = ? AND precision = ?"
        args: tuple[Any, ...] = (str(kind), canon_options(dict(setting)), str(precision))
        if branch is not None:
            sql += " AND branch = ?"
            args += (str(branch),)
        return [(json.loads(p), json.loads(v)) for p, v in self._read(sql + " ORDER BY id", args)]

    def theory_count(self) -> int:
        return int(self._read("SELECT COUNT(*) FROM theory")[0][0]) if self._has_theory_table() else 0

    def _has_theory_table(self) -> bool:
        return bool(self._read("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'theory'"))

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> ResultStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _json_default(v: Any) -> Any:
    if hasattr(v, "tolist"):  # numpy scalars and arrays from the theory's results
        return v.tolist()
    if hasattr(v, "value") and isinstance(v.value, str | int):  # an Enum (e.g. a status)
        return v.value
    raise InputTypeError(f"cannot store a {type(v).__name__}")


@dataclass(frozen=True)
class TheoryKey:
    """Identity of a theory result: what was computed (kind: "fixed_point", "transition", ...), for which
    setting, alpha, branch, precision and seed, with any further parameters (e.g. the continuation path of a
    curve, a transition's grid).  Floats are canonical, so the same computation always has the same key."""

    kind: str
    setting: Mapping[str, Any]
    alpha: float = 0.0
    branch: str = ""
    precision: str = "default"
    seed: int = 0
    params: Mapping[str, Any] = field(default_factory=dict)

    def row(self) -> tuple[Any, ...]:
        return (str(self.kind), canon_options(dict(self.setting)), canon_float(self.alpha, "alpha"),
                str(self.branch), str(self.precision), _canon_int(self.seed, "seed"), canon_options(self.params))


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
    if os.path.isdir(path):
        raise InputError(f"{path}: is a directory, expected a results store file")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no such store: {path}")
    if check_store_file(path).state == "new":
        raise InputError(f"{path}: not an attnphase results store (empty)")
    with ResultStore(path, create=False, readonly=True) as store:
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
        raise InputError(f"aggregate: results lack column(s) {', '.join(missing)}")
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
