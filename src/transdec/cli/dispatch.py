"""The ``transdec`` parser, made of the command modules' parsers, and the run of the command it parses: its
malloc setting, its warnings as one-line messages, Ctrl-C as one line and exit code 130."""

from __future__ import annotations

import argparse
import contextlib
import sys
import warnings
from collections.abc import Iterator
from types import ModuleType

from transdec import __version__
from transdec.cli import average, boost, evaluate, export, inspect, lm, serve, stream, train, transcribe
from transdec.runtime import configure_malloc

#: Each command's module, with its ``add_parser(subparsers)`` and ``run(args) -> exit code | None``, in the
#: order ``transdec --help`` lists them.
COMMANDS: dict[str, ModuleType] = {
    "train": train, "average": average, "transcribe": transcribe, "evaluate": evaluate, "stream": stream,
    "serve": serve, "lm": lm, "boost": boost, "export": export, "inspect": inspect,
}


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line, like every other error of the command line."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _parser() -> argparse.ArgumentParser:
    """``transdec``'s parser; the commands' parsers are made by it, so that their errors are one line too."""
    parser = _Parser(prog="transdec", description="Fast, exact Transducer speech recognition.")
    parser.add_argument("--version", action="version", version=f"transdec {__version__}")
    subparsers = parser.add_subparsers(dest="command")
    for module in COMMANDS.values():
        module.add_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run ``transdec ARGV`` (the process's arguments by default) and return its exit code."""
    command = "transdec"
    try:
        parser = _parser()
        args = parser.parse_args(argv)
        if args.command is None:  # bare `transdec`: what it can do, as argparse answers a missing argument (exit 2)
            parser.print_help(sys.stderr)
            return 2
        command = f"transdec {args.command}"
        # Training trades some memory for 1.3x faster steps; batch transcription keeps glibc's defaults.
        configure_malloc("keep" if args.command == "train" else "default")
        with _one_line_warnings(command):
            return COMMANDS[args.command].run(args) or 0
    except KeyboardInterrupt:
        print(f"{command}: interrupted", file=sys.stderr)
        return 130


@contextlib.contextmanager
def _one_line_warnings(command: str) -> Iterator[None]:
    """Warnings as the command's other messages are: one line, starting with its name."""
    def show(message, category, filename, lineno, file=None, line=None) -> None:
        print(f"{command}: warning: {message}", file=file or sys.stderr)

    previous = warnings.showwarning
    warnings.showwarning = show
    try:
        yield
    finally:
        warnings.showwarning = previous
