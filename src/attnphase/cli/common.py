"""Helpers shared by the CLI subcommands: spec parsing, setting options, output formatting."""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from attnphase.errors import InputError
from attnphase.setting import POSITION_PRESETS, Setting

DEFAULT_A_TEXT = "0.6,0.4;0.4,0.6"


class CLIError(InputError):
    """A user error: printed as one line, exit code 2."""


# ------------------------------------------------------------------------------------------ numeric options
# One validator per kind of option.  Each is an argparse `type`, so a bad value is refused while the command
# line is parsed (one line, exit code 2), before any work starts, with the same rule in every subcommand.


def _number(text: str, kind: type) -> float | int:
    try:
        value = kind(text)
    except (TypeError, ValueError):
        raise argparse.ArgumentTypeError(f"expected {'an integer' if kind is int else 'a number'}, got {text!r}") from None
    if kind is float and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be finite, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """An integer >= 1 (workers, grid sizes, dimensions, sample counts, steps)."""
    value = int(_number(text, int))
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text!r}")
    return value


def nonnegative_int(text: str) -> int:
    """An integer >= 0 (seeds)."""
    value = int(_number(text, int))
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {text!r}")
    return value


def positive_float(text: str) -> float:
    """A finite number > 0 (tolerances, learning rates, alpha bounds)."""
    value = float(_number(text, float))
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text!r}")
    return value


def nonnegative_float(text: str) -> float:
    """A finite number >= 0 (gradient tolerances)."""
    value = float(_number(text, float))
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text!r}")
    return value


# Options whose meaning is the same in every subcommand, checked once more after parsing whatever `type` a
# subcommand gave them: `--workers 0` is refused by every command, not only by those that remember to.
_RULES: dict[str, tuple[str, Any]] = {
    "workers": ("an integer >= 1", lambda v: isinstance(v, int) and v >= 1),
    "xtol": ("a finite number > 0", lambda v: math.isfinite(v) and v > 0),
    "n_grid": ("an integer >= 3", lambda v: isinstance(v, int) and v >= 3),  # transition's own minimum
    "alpha_min": ("a finite number > 0", lambda v: math.isfinite(v) and v > 0),
    "alpha_max": ("a finite number > 0", lambda v: math.isfinite(v) and v > 0),
    "n_test": ("an integer >= 1", lambda v: isinstance(v, int) and v >= 1),
    "steps": ("an integer >= 1", lambda v: isinstance(v, int) and v >= 1),
    "lr": ("a finite number > 0", lambda v: math.isfinite(v) and v > 0),
    "gtol": ("a finite number >= 0", lambda v: math.isfinite(v) and v >= 0),
    "seed": ("an integer >= 0", lambda v: isinstance(v, int) and v >= 0),
    "d": ("an integer >= 1", lambda v: isinstance(v, int) and v >= 1),
}


def check_common_options(args: argparse.Namespace) -> None:
    """Apply the shared rules of ``_RULES`` to every parsed numeric option (strings are SPECs, parsed later)."""
    for dest, (rule, ok) in _RULES.items():
        value = getattr(args, dest, None)
        if value is None or isinstance(value, str | bool) or not isinstance(value, int | float):
            continue
        if not ok(value):
            raise CLIError(f"--{dest.replace('_', '-')} must be {rule}, got {value!r}")
    if getattr(args, "alpha_min", None) is not None and getattr(args, "alpha_max", None) is not None:
        if not isinstance(args.alpha_min, str) and args.alpha_min >= args.alpha_max:
            raise CLIError(f"--alpha-min ({args.alpha_min:g}) must be below --alpha-max ({args.alpha_max:g})")


# ----------------------------------------------------------------------------------------------- paths
# Writability is probed by creating (and removing) a file, not asked of os.access: for root os.access says
# yes to directories that refuse every write (read-only or virtual file systems).


def _dir_writable(directory: str) -> bool:
    import tempfile

    try:
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".attnphase-probe-"):
            pass
    except OSError:
        return False
    return True


def _file_writable(path: str) -> bool:
    try:
        with open(path, "ab"):  # opening for append writes nothing
            pass
    except OSError:
        return False
    return True



def same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """The two paths name one file (after resolving links; hard links too, when both exist)."""
    try:
        if os.path.exists(a) and os.path.exists(b):
            return os.path.samefile(a, b)
    except OSError:
        pass
    return os.path.realpath(a) == os.path.realpath(b)


def is_results_store(path: str | os.PathLike[str]) -> bool:
    """An existing file that starts like an SQLite database (an attnphase store or any other): never replaced by
    a CSV, a figure or a report."""
    try:
        with open(path, "rb") as fh:
            return fh.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False


def check_not_input(path: str | os.PathLike[str], option: str, inputs: Iterable[tuple[str, Any]] = (),
                    store: bool = False) -> None:
    """An output path is never one of the command's inputs (the same file after resolving links), and never an
    existing SQLite file (a results store: a CSV or a figure would destroy it)."""
    for in_option, in_path in inputs:
        if in_path is not None and in_path != "-" and same_file(path, in_path):
            raise CLIError(f"{option} {path}: is the same file as {in_option} {in_path}; refusing to overwrite an "
                           "input of this command")
    if not store and is_results_store(path):
        raise CLIError(f"{option} {path}: is an existing SQLite file (a results store); refusing to replace it")


def check_output_file(path: str, option: str, create_parents: bool = False,
                      inputs: Iterable[tuple[str, Any]] = (), store: bool = False) -> None:
    """A file the command will write: not a directory, writable, in an existing directory (or, with
    `create_parents`, in one the command may create), not one of `inputs` ((option, path) pairs) and, unless it
    is itself a `store`, not an existing results store."""
    if path == "-":
        return
    check_not_input(path, option, inputs, store=store)
    if os.path.isdir(path):
        raise CLIError(f"{option} {path}: is a directory, expected a file name")
    if str(path).endswith(("/", os.sep)):  # SQLite would quietly create the file without the slash
        raise CLIError(f"{option} {path}: ends with a path separator (a directory), expected a file name")
    if os.path.exists(path):
        if not _file_writable(path):
            raise CLIError(f"{option} {path}: file is not writable")
        return
    parent = os.path.dirname(os.path.abspath(path))
    if create_parents:
        check_output_dir(parent, option)
        return
    if not os.path.isdir(parent):
        raise CLIError(f"{option} {path}: directory {parent} does not exist")
    if not _dir_writable(parent):
        raise CLIError(f"{option} {path}: directory {parent} is not writable")


def check_store_path(path: str, option: str = "--store") -> None:
    """A results store the command writes into (created if missing): refused before any work when it is a
    directory, not writable, not SQLite, another program's database or damaged."""
    from attnphase.experiments.store import check_store_file

    check_output_file(path, option, store=True)
    try:
        check_store_file(path)
    except ValueError as exc:
        raise CLIError(f"{option} {exc}") from None


def check_input_store(path: str, option: str = "--store") -> None:
    """A results store the command only reads: it must exist, be one of ours and not be empty."""
    from attnphase.experiments.store import check_store_file

    check_input_file(path, option, what="store")
    try:
        state = check_store_file(path).state
    except ValueError as exc:
        raise CLIError(f"{option} {exc}") from None
    if state == "new":
        raise CLIError(f"{option} {path}: not an attnphase results store (empty)")


def check_output_dir(path: str, option: str) -> None:
    """A directory the command will create (with parents) or write into."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise CLIError(f"{option} {path}: is a file, expected a directory")
    probe = os.path.abspath(path)
    while not os.path.exists(probe):  # the nearest existing ancestor must let us create the rest
        probe = os.path.dirname(probe)
    if not os.path.isdir(probe):
        raise CLIError(f"{option} {path}: {probe} is a file, cannot create a directory under it")
    if not _dir_writable(probe):
        raise CLIError(f"{option} {path}: {probe} is not writable")


def check_input_file(path: str, option: str, what: str = "file") -> None:
    """A file the command reads (e.g. what="store": a results store given to plot or export)."""
    if os.path.isdir(path):
        raise CLIError(f"{option} {path}: is a directory, expected a {what} file")
    if not os.path.isfile(path):
        raise CLIError(f"{option} {path}: no such {what}")
    if not os.access(path, os.R_OK):
        raise CLIError(f"{option} {path}: file is not readable")


# ------------------------------------------------------------------------------------------------ extras

# The optional dependencies (pyproject extras) and the module that shows each is installed.
EXTRA_MODULES = {"experiments": "torch", "dask": "distributed", "docs": "mkdocs"}
MISSING_EXTRA_HINT = "{what} needs the '{extra}' extra: pip install 'attnphase[{extra}]'"


def require_extra(extra: str, what: str) -> None:
    """Refuse, in one line, a command whose optional dependencies are not installed (checked before work)."""
    import importlib.util

    module = EXTRA_MODULES[extra]
    if importlib.util.find_spec(module) is None:
        raise CLIError(MISSING_EXTRA_HINT.format(what=what, extra=extra))


def extra_for_module(name: str | None) -> str | None:
    """The extra that provides a missing top-level module, if it is one of ours."""
    top = (name or "").split(".")[0]
    aliases = {"torch": "experiments", "dask": "dask", "distributed": "dask", "mkdocs": "docs",
               "mkdocstrings": "docs"}
    return aliases.get(top)


# Values one SPEC may expand to (alphas, omegas, init scales): far above any figure's grid, far below a typo such as
# 1:2:100000000.  Integer SPECs (seeds, d) may expand to as many as a grid may hold.
MAX_SPEC_VALUES = 10_000
MAX_INT_SPEC_VALUES = 1_000_000


def parse_spec(spec: str, name: str = "value") -> list[float]:
    """A number, a comma list, or start:stop:num (inclusive linspace), at most MAX_SPEC_VALUES values."""
    text = str(spec).strip()
    if not text:
        raise InputError(f"{name}: empty specification")
    try:
        if ":" in text:
            parts = text.split(":")
            if len(parts) != 3:
                raise ValueError
            start, stop, num = float(parts[0]), float(parts[1]), int(parts[2])
            if num < 1:
                raise ValueError
            if num > MAX_SPEC_VALUES:
                raise InputError(f"{name}: {num:,} values asked for, at most {MAX_SPEC_VALUES:,} are accepted")
            # 12 significant digits: 0.15, not 0.15000000000000002, in tables and store keys.
            values = [float(f"{v:.12g}") for v in np.linspace(start, stop, num)]
        else:
            values = [float(v) for v in text.split(",") if v.strip()]
    except InputError:
        raise
    except ValueError:
        raise InputError(f"{name}: expected a number, a comma list or start:stop:num, got {spec!r}") from None
    if not values:
        raise InputError(f"{name}: empty specification")
    for v in values:
        if not math.isfinite(v):
            raise InputError(f"{name}: values must be finite, got {spec!r}")
    return values


def parse_int_spec(spec: str, name: str = "value") -> list[int]:
    """Integers: a number, a comma list, or start:stop (inclusive range) e.g. seeds 0:4."""
    text = str(spec).strip()
    try:
        if ":" in text:
            parts = text.split(":")
            if len(parts) != 2:
                raise ValueError
            a, b = int(parts[0]), int(parts[1])
            if b < a:
                raise ValueError
            if b - a + 1 > MAX_INT_SPEC_VALUES:
                raise InputError(f"{name}: {b - a + 1:,} values asked for, at most {MAX_INT_SPEC_VALUES:,} are "
                                 "accepted")
            return list(range(a, b + 1))
        out = [int(v) for v in text.split(",") if v.strip()]
    except InputError:
        raise
    except ValueError:
        raise InputError(f"{name}: expected an integer, a comma list or start:stop, got {spec!r}") from None
    if not out:
        raise InputError(f"{name}: empty specification")
    return out


def add_setting_args(p: argparse.ArgumentParser, omega: bool = True) -> None:
    if omega:
        p.add_argument("--omega", type=str, default="0.3", help="positional weight omega in [0, 1] (default 0.3)")
    p.add_argument("--sigma", type=float, default=0.5, help="token standard deviation (default 0.5)")
    p.add_argument("--lam", type=float, default=0.01, help="ridge lambda (default 0.01)")
    p.add_argument("--A", type=str, default=None,
                   help='positional attention matrix "a11,a12;a21,a22" or FILE (.npy, CSV or whitespace text); rows '
                        "must sum to 1 within 1e-6 and are renormalised (default: the study's "
                        f"{DEFAULT_A_TEXT} for L = 2, (1 - a) I + (a/L) 1 1^T with a = 0.8 for L > 2)")
    p.add_argument("--L", type=int, default=None, help="number of tokens (default 2, or the size of --A)")
    p.add_argument("--rank", type=int, default=1, help="student rank r (default 1)")
    p.add_argument("--teacher-rank", type=int, default=1, help="teacher rank r* (default 1)")
    p.add_argument("--positions", type=str, default=None,
                   help="positional encodings: antipodal (L = 2) | orthogonal | simplex | FILE (Gram matrix as "
                        ".npy, CSV or whitespace text) | \"g11,g12;g21,g22\" (default: antipodal for L = 2, simplex "
                        "otherwise)")


def add_allow_long(p: argparse.ArgumentParser) -> None:
    """--allow-long: run a theory job whose estimated time exceeds the bound (theory.cost.REFUSE_SECONDS)."""
    p.add_argument("--allow-long", action="store_true",
                   help="run even when the theory's time estimate exceeds a day (refused otherwise)")


def read_matrix_file(path: Path, option: str) -> np.ndarray:
    """A real matrix from a .npy file, a CSV or whitespace-separated text; one line on any problem (an empty file,
    ragged rows, complex or non-numeric entries), never a numpy warning."""
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # numpy's "empty input file" UserWarning, ComplexWarning: refusals here
            if path.suffix == ".npy":
                G = np.load(path, allow_pickle=False)
            else:
                raw = path.read_text()
                if not raw.strip():
                    raise CLIError(f"{option}: {str(path)!r} is empty")
                G = np.loadtxt(io.StringIO(raw), delimiter="," if "," in raw else None, ndmin=2)
    except CLIError:
        raise
    except (OSError, ValueError, UnicodeDecodeError, Warning) as exc:
        raise CLIError(f"{option}: cannot read a matrix from {str(path)!r}: {_one_line_text(exc)}") from None
    G = np.asarray(G)
    if G.dtype == bool or not np.issubdtype(G.dtype, np.number):
        raise CLIError(f"{option}: {str(path)!r} must hold numbers, got dtype {G.dtype}")
    if np.issubdtype(G.dtype, np.complexfloating):
        raise CLIError(f"{option}: {str(path)!r} must hold real numbers, got dtype {G.dtype}")
    if G.ndim != 2:
        raise CLIError(f"{option}: {str(path)!r} must hold a 2-d matrix, got shape {G.shape}")
    return np.asarray(G, dtype=float)


def _one_line_text(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else exc.__class__.__name__


def read_positions(value: str | None) -> Any:
    """A preset name, a matrix literal, or a file holding the Gram matrix (.npy, CSV or whitespace text)."""
    if value is None:
        return None
    text = value.strip()
    if text.lower() in POSITION_PRESETS:
        return text.lower()
    path = Path(text)
    if path.is_file():
        return read_matrix_file(path, "--positions")
    if any(c.isdigit() for c in text) and ("," in text or ";" in text):
        return text
    raise CLIError(f"--positions must be one of {', '.join(POSITION_PRESETS)}, an existing file or "
                   f"'g11,g12;g21,g22', got {value!r}")


def read_A(args: argparse.Namespace) -> Any:
    """--A as given: None (the default for --L), a matrix literal, or a file (.npy, CSV or whitespace text) the way
    --positions takes one.  The matrix itself is checked by Setting (with --L: the two must agree)."""
    value = getattr(args, "A", None)
    if value is None:
        return None
    text = str(value).strip()
    path = Path(text)
    if path.is_file():
        return read_matrix_file(path, "--A")
    if os.sep in text or text.endswith((".npy", ".csv", ".txt")):
        raise CLIError(f"--A {text}: no such file")
    from attnphase.setting import parse_matrix

    return parse_matrix(text, "--A")


def grid_A(args: argparse.Namespace) -> tuple[tuple[float, ...], ...]:
    """The positional matrix of a sweep or basins grid (the grids carry A, sigma, lambda only): --A, or the
    default for --L; options the grid does not carry are refused rather than ignored."""
    for opt, dest, default in (("--rank", "rank", 1), ("--teacher-rank", "teacher_rank", 1)):
        if getattr(args, dest, default) != default:
            raise CLIError(f"{opt}: the simulation grids of this command have r = r* = 1 (use `attnphase simulate` "
                           "for other ranks)")
    if getattr(args, "positions", None) not in (None, "antipodal", "simplex"):
        raise CLIError("--positions: the simulation grids of this command use the default positions (antipodal for "
                       "L = 2, simplex otherwise)")
    setting = Setting(A=read_A(args), L=getattr(args, "L", None))
    return setting.A


def setting_from_args(args: argparse.Namespace, omega: float | None = None) -> Setting:
    if omega is None:
        omega = float(args.omega)
    # --A not given: the default for L (the study's at L = 2); given, it must agree with --L whatever its spelling
    # (the study's "0.6,0.4;0.4,0.6" with --L 3 used to be replaced silently by the L = 3 default).
    return Setting(omega=omega, sigma=args.sigma, lam=args.lam, A=read_A(args), L=getattr(args, "L", None),
                   r=getattr(args, "rank", 1), r_star=getattr(args, "teacher_rank", 1),
                   positions=read_positions(getattr(args, "positions", None)))


def add_output_args(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("--json", action="store_true", help="print a JSON list of records")
    g.add_argument("--csv", action="store_true", help="print CSV")


def _clean(v: Any) -> Any:
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def emit(records: Sequence[dict[str, Any]], args: argparse.Namespace, columns: Iterable[str] | None = None,
         stream=None) -> None:
    """Print records as a table (default), JSON (--json) or CSV (--csv)."""
    stream = stream or sys.stdout
    records = [{k: _clean(v) for k, v in r.items()} for r in records]
    # Without columns: every key of every record, in order of appearance (rows may carry different records).
    cols = list(columns) if columns is not None else list(dict.fromkeys(k for r in records for k in r))
    if getattr(args, "json", False):
        stream.write(json.dumps(records, indent=2) + "\n")
        return
    if getattr(args, "csv", False):
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=cols, extrasaction="ignore")
        w.writeheader()
        for r in records:
            w.writerow(r)
        stream.write(buf.getvalue())
        return
    stream.write(format_table(records, cols) + "\n")


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "NO"
    if isinstance(v, float):
        if v == 0:
            return "0"
        if abs(v) >= 1e4 or abs(v) < 1e-3:
            return f"{v:.4e}"
        return f"{v:.6g}"
    return str(v)


def format_table(records: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    rows = [[_fmt(r.get(c)) for c in columns] for r in records]
    widths = [max([len(c)] + [len(row[i]) for row in rows]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.rjust(w) for c, w in zip(columns, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    for row in rows:
        lines.append("  ".join(v.rjust(w) for v, w in zip(row, widths, strict=True)))
    return "\n".join(lines)
