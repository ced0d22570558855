"""The `attnphase` command line: thin wrappers over the library.  Bad input (attnphase.errors.InputError /
InputTypeError, a file that cannot be used) is one line with exit code 2; any other exception is a bug and keeps
its traceback (exit code 1).

Documentation of every command, option and printed quantity: the project's docs/ (``make docs``).
"""

from __future__ import annotations

import argparse
import functools
import importlib
import os
import sqlite3
import sys
import traceback

from attnphase.cli.common import check_common_options, extra_for_module, require_extra
from attnphase.errors import InputError, InputTypeError

# One module per command, each defining register(subparsers); a subcommand's handler is stored as `func`.
_COMMAND_MODULES = ("theory", "baseline", "simulate", "compare", "sweep", "export", "transition", "phase_diagram",
                    "plot", "reproduce", "basins", "histogram", "bayes", "amp", "dynamics")

# Subcommands that run finite-d simulations need PyTorch: the 'experiments' extra.  Checked before any work,
# so that a light install (theory only) answers in one line instead of a traceback.
NEEDS_EXTRA = {"simulate": "experiments", "compare": "experiments", "sweep": "experiments",
               "basins": "experiments", "histogram": "experiments"}


# Commands that store each finished result as it comes (a rerun resumes), with the option naming where: only they keep
# anything when interrupted.
RESUMABLE = {"sweep": "--store", "basins": "--store", "histogram": "--store", "reproduce": "--out"}


def interrupted_message(args: argparse.Namespace) -> str:
    """What Ctrl-C leaves behind, truthfully: the finished results in the command's store, or nothing."""
    option = RESUMABLE.get(getattr(args, "command", None) or "")
    where = getattr(args, option[2:].replace("-", "_"), None) if option else None
    if where:
        return f"interrupted (finished results are kept in {option} {where}; rerun the command to resume)"
    return "interrupted (nothing was saved: this command keeps no partial results)"


class _OneLineParser(argparse.ArgumentParser):
    """Usage errors as one line (exit code 2), like every other input error of the CLI.  No abbreviations of
    long options: `--opt` must never be read as `--optimizer`."""

    def __init__(self, *args, **kwargs) -> None:  # noqa: ANN002, ANN003
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def common_parent() -> argparse.ArgumentParser:
    """Options every subcommand accepts (the parent parser of each of them)."""
    parent = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parent.add_argument("--quiet", action="store_true",
                        help="no progress bars and no informational notes on stderr (errors and warnings stay)")
    return parent


def _with_common_options(add_parser, parent: argparse.ArgumentParser):  # noqa: ANN001, ANN202
    @functools.wraps(add_parser)
    def add(name: str, **kwargs):  # noqa: ANN202
        kwargs["parents"] = [*kwargs.get("parents", []), parent]
        # A one-line description for every subcommand: its help line unless it has a longer one.
        if kwargs.get("description") is None and kwargs.get("help"):
            kwargs["description"] = kwargs["help"][0].upper() + kwargs["help"][1:] + "."
        return add_parser(name, **kwargs)

    return add


def build_parser() -> argparse.ArgumentParser:
    from attnphase import __version__

    parser = _OneLineParser(
        prog="attnphase",
        description="Positional vs semantic learning in a solvable model of dot-product attention. "
        "Documentation: the docs/ folder of the project (build it with `make docs`).",
    )
    parser.add_argument("--version", action="version", version=f"attnphase {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_OneLineParser)
    sub.add_parser = _with_common_options(sub.add_parser, common_parent())  # type: ignore[method-assign]
    for name in _COMMAND_MODULES:
        try:
            mod = importlib.import_module(f"attnphase.cli.{name}")
        except ModuleNotFoundError as exc:  # a subcommand module not written yet
            if exc.name == f"attnphase.cli.{name}":
                continue
            raise
        mod.register(sub)
    return parser


def _prepare(args: argparse.Namespace) -> None:
    """Checks shared by every command, before its handler does any work."""
    if getattr(args, "quiet", False):
        args.no_progress = True  # the commands' own --no-progress switch, where they have one
        os.environ["ATTNPHASE_QUIET"] = "1"  # the library's notices (a kernel compiling), in pool workers too
    elif not hasattr(args, "no_progress"):
        args.no_progress = False
    check_common_options(args)
    extra = NEEDS_EXTRA.get(args.command)
    # The sweep's hidden --task replaces the simulation (tests): it needs no PyTorch.
    if extra and not (args.command == "sweep" and getattr(args, "task", None)):
        require_extra(extra, "this command")


def _run_quietly(args: argparse.Namespace, prog: str) -> int:
    """Run the command with numerical warnings (overflow, invalid values, ...) collected instead of printed as they
    come: one summary line at the end, never a spray of RuntimeWarnings.  The statuses of the results say which
    numbers are affected."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RuntimeWarning)
        try:
            return int(args.func(args) or 0)
        finally:
            numeric = [w for w in caught if issubclass(w.category, RuntimeWarning)]
            for w in caught:
                if not issubclass(w.category, RuntimeWarning):
                    warnings.showwarning(w.message, w.category, w.filename, w.lineno)
            if numeric:
                first = numeric[0]
                where = f"{os.path.basename(first.filename)}:{first.lineno}"
                print(f"{prog}: warning: {len(numeric)} numerical warning(s) during the computation (first: "
                      f"{_one_line_text(first.message)} at {where}); see each result's status", file=sys.stderr)


def _one_line_text(message: object) -> str:
    text = str(message).strip()
    return text.splitlines()[0] if text else "warning"


def _one_line(exc: BaseException) -> str:
    text = str(exc)
    return text.splitlines()[0] if text else exc.__class__.__name__


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args, extra = parser.parse_known_args(argv)
        if extra:
            # Reported by the subcommand's parser, so that the line points to its help, not the top-level one.
            choices = parser._subparsers._group_actions[0].choices if parser._subparsers else {}  # noqa: SLF001
            owner = choices.get(getattr(args, "command", None), parser)
            owner.error(f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit as exc:  # argparse already printed its one-line usage error
        return int(exc.code or 0)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    prog = f"attnphase {args.command}"
    try:
        _prepare(args)
        return _run_quietly(args, prog)
    except ModuleNotFoundError as exc:
        extra = extra_for_module(exc.name)
        if extra is None:
            raise
        print(f"{prog}: error: this needs the '{extra}' extra: pip install 'attnphase[{extra}]'", file=sys.stderr)
        return 2
    except (InputError, InputTypeError, FileNotFoundError) as exc:
        print(f"{prog}: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except (OSError, sqlite3.Error) as exc:  # a path or a file that cannot be used as asked
        print(f"{prog}: error: {exc.__class__.__name__}: {_one_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{prog}: {interrupted_message(args)}", file=sys.stderr)
        return 130
    except Exception:
        # Not bad input: a bug.  Its traceback is what a report needs.
        traceback.print_exc()
        print(f"{prog}: internal error (a bug in attnphase, not in your input): please report the traceback above",
              file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
