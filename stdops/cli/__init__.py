"""The ``stdops`` command line.

The contract (tests/test_cli.py checks each point against the installed console script):

- a mistake on the command line (no command, an unknown command or option, a bad value, a missing
  argument) and every ``StdopsError`` print ONE line on stderr and exit with status 2; ``--debug``
  (before or after the subcommand) or ``STDOPS_DEBUG=1`` shows the traceback instead;
- paths, option values and optional extras are checked before any long work starts;
- an option that does not apply to the model's kind is refused, never ignored;
- ``-o/--output`` is where a command writes its result, in every subcommand;
- ``stdops compare`` exits 0 when every value agrees and 1 when one does not.

argparse (not typer): typer vendors its own click, whose exceptions moved between releases and turned every
usage error into a traceback; argparse is stable and starts in milliseconds.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from .. import __version__
from ..errors import StdopsError
from . import compare, convert, demo, info, ops, plot, profile, reduce, run, sweep
from ._base import Parser, UsageError, add_debug, add_limits, apply_limits, did_you_mean

#: subcommand modules, in the order `stdops --help` lists them; each has HELP, register(sub) and main(args)
COMMANDS = (run, info, compare, convert, reduce, profile, plot, ops, demo, sweep)


def build_parser() -> Parser:
    parser = Parser(
        prog="stdops",
        description="stdops: run ONNX, ncnn and MDF models on one exact NumPy operator library.",
        epilog="Exit status: 0 success, 1 a comparison found a disagreement, 2 a usage or model error.",
    )
    parser.add_argument("--version", action="version", version=f"stdops {__version__}")
    add_debug(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for module in COMMANDS:
        p = module.register(sub)
        add_debug(p)
        if getattr(module, "LOADS_MODELS", True):
            add_limits(p)
    parser.commands = sub.choices
    return parser


def _check_command(parser: Parser, args: Sequence[str]) -> None:
    """An unknown subcommand gets a did-you-mean (argparse lists every choice in one long line)."""
    names = [m.__name__.rsplit(".", 1)[-1] for m in COMMANDS]
    for word in args:
        if word.startswith("-"):
            continue
        if word not in names:
            raise UsageError(
                f"stdops: unknown command {word!r}{did_you_mean(word, names)}; commands: {', '.join(names)}"
            )
        return
    raise UsageError(f"stdops: no command given; commands: {', '.join(names)} (see 'stdops --help')")


def _unknown_options(parser: Parser, a: argparse.Namespace, extra: Sequence[str]) -> None:
    sub = parser.commands[a.command]
    word = extra[0]
    if word.startswith("-"):
        name = word.split("=", 1)[0]
        raise UsageError(
            f"stdops {a.command}: unknown option {name}{did_you_mean(name, sub.option_strings())}"
            f" (see 'stdops {a.command} --help')"
        )
    raise UsageError(f"stdops {a.command}: unexpected argument {word!r} (see 'stdops {a.command} --help')")


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point. Returns the exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args or os.environ.get("STDOPS_DEBUG") == "1"
    parser = build_parser()
    try:
        if not (args and args[0] in ("-h", "--help", "--version")):
            _check_command(parser, [a for a in args if a != "--debug"])
        a, extra = parser.parse_known_args(args)
        if extra:
            _unknown_options(parser, a, extra)
        from ..perf import tune_allocator

        tune_allocator()
        apply_limits(a)
        return int(a.func(a) or 0)
    except StdopsError as e:
        if debug:
            raise
        print("error: " + " ".join(str(e).split()), file=sys.stderr)  # one line, never wrapped
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `stdops ops | head`: the reader left; say nothing more
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    except SystemExit as e:  # --help and --version exit 0 through argparse
        return int(e.code or 0) if isinstance(e.code, int) or e.code is None else 2
