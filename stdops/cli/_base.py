"""What every subcommand shares: the argument parser that turns usage mistakes into one line, the checks
made before long work starts (paths, extras, values), and plain tables that never cut a name short."""

from __future__ import annotations

import argparse
import difflib
import importlib.util
import math
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

from ..errors import StdopsError


class UsageError(StdopsError):
    """A mistake on the command line (exit status 2, like every StdopsError)."""


class Parser(argparse.ArgumentParser):
    """argparse, with usage errors raised as one-line UsageErrors (argparse prints usage and a second line)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)  # a misspelt option is an error, never a silent prefix match
        super().__init__(*args, **kwargs)
        #: the subcommands' parsers by name (filled by build_parser; argparse keeps them in private fields)
        self.commands: dict[str, Parser] = {}

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message} (see '{self.prog} --help')")

    def option_strings(self) -> list[str]:
        return [s for a in self._actions for s in a.option_strings]


def did_you_mean(word: str, choices: Sequence[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


def add_lenient(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--lenient",
        action="store_true",
        help="MDF: an unknown (misspelt) field is a warning, not an error",
    )


def add_debug(p: argparse.ArgumentParser) -> None:
    # accepted before and after the subcommand (both set the same flag)
    p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks for errors")


#: the resource limits a user may raise or lower from the command line (stdops.limits; STDOPS_* variables)
LIMIT_OPTIONS = {
    "--max-elements": ("max_elements", "elements in one value (default 2**31)"),
    "--max-bytes": ("max_bytes", "bytes in one value, strings counted by size (default 2G)"),
    "--max-loop-iterations": ("max_loop_iterations", "Loop/Scan iterations in a run, across nesting (default 1M)"),
    "--max-graph-nodes": ("max_graph_nodes", "nodes in a loaded graph, functions expanded (default 1M)"),
    "--max-work": ("max_work", "operations an MDF evaluation may perform (default 2**30)"),
}


def size(text: str) -> int:
    """A positive count with an optional K/M/G/T suffix (powers of 1024) or a power like 2**31."""
    t = text.strip().upper()
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}.get(t[-1:], 1)
    body = t[:-1] if scale > 1 else t
    try:
        if "**" in body:
            base, _, exp = body.partition("**")
            v = int(base) ** int(exp) if len(exp) <= 3 else -1
        else:
            v = int(float(body)) if body.replace(".", "", 1).isdigit() else int(body)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a count like 1000000, 4G or 2**31, got {text!r}") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text!r}")
    return v * scale


def add_limits(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("resource limits (stdops.limits; also STDOPS_MAX_* environment variables)")
    for flag, (_, what) in LIMIT_OPTIONS.items():
        g.add_argument(flag, type=size, default=argparse.SUPPRESS, metavar="N", help=what)


def apply_limits(a: argparse.Namespace) -> None:
    from .. import limits

    given = {key: getattr(a, key) for key, _ in LIMIT_OPTIONS.values() if hasattr(a, key)}
    if given:
        limits.configure(**given)


# --------------------------------------------------------------------------- values checked up front
def positive_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not (math.isfinite(v) and v > 0):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}")
    return v


def nonnegative_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not (math.isfinite(v) and v >= 0):
        raise argparse.ArgumentTypeError(f"must be a number >= 0, got {text!r}")
    return v


def positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive whole number, got {text!r}")
    return v


def existing_file(text: str) -> Path:
    p = Path(text)
    if not p.exists():
        raise argparse.ArgumentTypeError(f"no such file: {text}")
    if p.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a folder, expected a file")
    return p


def output_file(path: Path, option: str, suffixes: Sequence[str] = ()) -> Path:
    """A file a command will write: its folder must exist, it must not be a folder, its suffix must fit."""
    if suffixes and not str(path).lower().endswith(tuple(suffixes)):
        raise UsageError(f"{option} {path}: expected a {' or '.join(suffixes)} file")
    if path.is_dir():
        raise UsageError(f"{option} {path}: is a folder, expected a file")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise UsageError(f"{option} {path}: the folder {parent} does not exist")
    return path


def output_folder(path: Path, option: str) -> Path:
    """A folder a command will fill (created if missing): it must not be a file, its parent must exist."""
    if path.exists() and not path.is_dir():
        raise UsageError(f"{option} {path}: is an existing file, expected a folder")
    parent = path.parent if str(path.parent) else Path(".")
    if not path.exists() and not parent.is_dir():
        raise UsageError(f"{option} {path}: the folder {parent} does not exist")
    return path


def require_module(module: str, feature: str, extra: str) -> None:
    """An optional extra must import before work starts (matplotlib for plots, dask for sweeps); the
    command imports it next anyway, and a broken install is caught here too."""
    try:
        importlib.import_module(module)
    except ImportError as e:
        raise UsageError(
            f"{feature} needs {module}, which cannot be imported ({e}): pip install 'stdops[{extra}]'"
        ) from None


def parse_inputs(items: Sequence[str]) -> dict[str, Any]:
    """-i NAME=FILE.npy (repeatable) -> {name: array}."""
    import numpy as np

    feeds: dict[str, Any] = {}
    for item in items:
        name, sep, file = item.partition("=")
        if not sep or not name or not file:
            raise UsageError(f"--input {item!r}: expected NAME=FILE.npy")
        try:
            feeds[name] = np.load(file, allow_pickle=False)
        except (OSError, ValueError) as e:
            raise UsageError(f"--input {item!r}: cannot read {file}: {e}") from None
    return feeds


def not_for(kind: str, given: Mapping[str, Any], allowed_kinds: Mapping[str, Sequence[str]]) -> None:
    """Refuse options that do not apply to this kind of model (instead of ignoring them)."""
    for option, value in given.items():
        if value in (None, False, [], ()):
            continue
        kinds = allowed_kinds[option]
        if kind not in kinds:
            raise UsageError(f"{option} applies to {' and '.join(k.upper() for k in kinds)} models, not {kind.upper()}")


# --------------------------------------------------------------------------- output
def print_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]], marks: Sequence[bool] = ()) -> None:
    """Aligned plain-text columns; cells are never cut or wrapped, whatever the terminal width (a name is
    what a user copies into the next command). ``marks`` flags rows with '!' (and red on a terminal)."""
    cells = [[str(c) for c in r] for r in rows]
    flag = bool(marks)
    head = ["", *columns] if flag else list(columns)
    body = [([("!" if marks[i] else " "), *r] if flag else r) for i, r in enumerate(cells)]
    widths = [max([len(head[j])] + [len(r[j]) for r in body]) for j in range(len(head))]
    red = sys.stdout.isatty() and os.environ.get("NO_COLOR") is None
    out = [title] if title else []
    out.append("  ".join(h.ljust(w) for h, w in zip(head, widths)).rstrip())
    out.append("  ".join("-" * w for w in widths))
    for i, r in enumerate(body):
        line = "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()
        out.append(f"\033[31m{line}\033[0m" if red and flag and marks[i] else line)
    print("\n".join(out))


Handler = Callable[[argparse.Namespace], int | None]
