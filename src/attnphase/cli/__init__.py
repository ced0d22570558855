"""The `attnphase` command line: thin wrappers over the library (errors: one line, exit code 2)."""

from __future__ import annotations

import argparse
import importlib
import sys

# Each module defines register(subparsers); a subcommand's handler is stored as `func`.
_COMMAND_MODULES = ("theory", "simulate", "sweep", "transition", "plot", "basins")


class _OneLineParser(argparse.ArgumentParser):
    """Usage errors as one line (exit code 2), like every other input error of the CLI."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    from attnphase import __version__

    parser = _OneLineParser(
        prog="attnphase",
        description="Positional vs semantic learning in a solvable model of dot-product attention.",
    )
    parser.add_argument("--version", action="version", version=f"attnphase {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_OneLineParser)
    for name in _COMMAND_MODULES:
        try:
            mod = importlib.import_module(f"attnphase.cli.{name}")
        except ModuleNotFoundError as exc:  # a subcommand module not written yet
            if exc.name == f"attnphase.cli.{name}":
                continue
            raise
        mod.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse already printed its one-line usage error
        return int(exc.code or 0)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except (ValueError, FileNotFoundError) as exc:
        msg = str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__
        print(f"attnphase {args.command}: error: {msg}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"attnphase {args.command}: interrupted (finished results are kept)", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
