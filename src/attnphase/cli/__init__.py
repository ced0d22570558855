"""The `attnphase` command line: thin wrappers over the library (errors: one line, exit code 2).

Documentation of every command, option and printed quantity: the project's docs/ (``make docs``).
"""

from __future__ import annotations

import argparse
import functools
import importlib
import sqlite3
import sys

from attnphase.cli.common import CLIError, check_common_options, extra_for_module, require_extra

# Each module defines register(subparsers); a subcommand's handler is stored as `func`.
_COMMAND_MODULES = ("theory", "simulate", "sweep", "transition", "plot", "basins", "histogram")

# Subcommands that run finite-d simulations need PyTorch: the 'experiments' extra.  Checked before any work,
# so that a light install (theory only) answers in one line instead of a traceback.
NEEDS_EXTRA = {"simulate": "experiments", "compare": "experiments", "sweep": "experiments",
               "basins": "experiments", "histogram": "experiments"}


class _OneLineParser(argparse.ArgumentParser):
    """Usage errors as one line (exit code 2), like every other input error of the CLI."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def common_parent() -> argparse.ArgumentParser:
    """Options every subcommand accepts (the parent parser of each of them)."""
    parent = argparse.ArgumentParser(add_help=False)
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
    elif not hasattr(args, "no_progress"):
        args.no_progress = False
    check_common_options(args)
    extra = NEEDS_EXTRA.get(args.command)
    # The sweep's hidden --task replaces the simulation (tests): it needs no PyTorch.
    if extra and not (args.command == "sweep" and getattr(args, "task", None)):
        require_extra(extra, "this command")


def _one_line(exc: BaseException) -> str:
    text = str(exc)
    return text.splitlines()[0] if text else exc.__class__.__name__


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse already printed its one-line usage error
        return int(exc.code or 0)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    prog = f"attnphase {args.command}"
    try:
        _prepare(args)
        return int(args.func(args) or 0)
    except ModuleNotFoundError as exc:
        extra = extra_for_module(exc.name)
        if extra is None:
            raise
        print(f"{prog}: error: this needs the '{extra}' extra: pip install 'attnphase[{extra}]'", file=sys.stderr)
        return 2
    except (CLIError, ValueError, TypeError, FileNotFoundError) as exc:
        print(f"{prog}: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except (OSError, sqlite3.Error) as exc:  # a path or a file that cannot be used as asked
        print(f"{prog}: error: {exc.__class__.__name__}: {_one_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{prog}: interrupted (finished results are kept)", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
