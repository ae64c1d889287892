"""Bisect a model that fails (disagrees with a peer runtime, raises, or fails a user's check) down to a
small sub-model that still fails, written in the model's own format with its inputs frozen.

The candidates are cuts of the model (``stdops.tools.cut``), judged by a :class:`Judge`:

1. the end: the shortest prefix of the nodes (in execution order) whose frontier values (those read by
   later nodes or reported by the graph) fail; bisection on the prefix length, as a wrong value stays wrong
   downstream. The last node of that prefix is where the failure appears;
2. the start: that node alone, its inputs frozen to what the whole model's run produced, when that fails
   already; else its outputs computed from the latest possible start, bisected among its ancestors;
3. each node still in the cut but the last is dropped in turn (its outputs frozen) while the cut fails.

A judge of a peer runtime counts a candidate as failing when it fails the way the whole model does: stdops
raises, the peer raises, or an output is outside ``max|ours - theirs| <= atol + rtol * max|theirs|``.
A ``--check`` command fails when it exits non-zero. A model that does not fail is refused before any cut.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..errors import StdopsError
from . import runtimes
from .cut import CutError, Source


class NothingToReduce(StdopsError):
    """The whole model does not fail: there is nothing to bisect."""


@dataclasses.dataclass
class Outcome:
    failing: bool
    kind: str  # "agree", "disagree", "stdops raises", "peer raises", "check failed", "check passed", "no cut"
    detail: str = ""


class Judge:
    """Says whether a written candidate fails: against a peer runtime, or by a user's check command."""

    def __init__(
        self,
        against: str | None = None,
        check: str | None = None,
        atol: float = 1e-4,
        rtol: float = 1e-4,
        check_timeout: float = 300.0,
    ):
        if (against is None) == (check is None):
            raise StdopsError("give a peer runtime (--against) or a check command (--check), one of them")
        self.against, self.check, self.atol, self.rtol, self.check_timeout = against, check, atol, rtol, check_timeout
        self.target: str | None = None  # the kind of failure the whole model shows

    def outcome(self, files: dict[str, Any]) -> Outcome:
        if self.check is not None:
            return self._run_check(files)
        assert self.against is not None  # __init__ takes exactly one of the two
        return self._against_peer(files, self.against)

    def failing(self, files: dict[str, Any]) -> Outcome:
        out = self.outcome(files)
        if self.target is None:  # the whole model: what every cut must reproduce
            self.target = out.kind if out.failing else None
            return out
        return dataclasses.replace(out, failing=out.failing and out.kind == self.target)

    def _feeds(self, files: dict[str, Any]) -> dict[str, np.ndarray]:
        return {name: np.load(p, allow_pickle=False) for name, p in files["inputs"].items()}

    def _against_peer(self, files: dict[str, Any], peer: str) -> Outcome:
        from ..compare import _diff

        feeds = self._feeds(files)
        model, weights = files["model"], files["weights"]
        try:
            ours = runtimes.run("stdops", model, feeds, weights=weights)
        except runtimes.PeerError:
            raise
        except StdopsError as e:
            return Outcome(True, "stdops raises", str(e))
        try:
            theirs = runtimes.run(peer, model, feeds, outputs=list(ours), weights=weights)
        except StdopsError as e:
            return Outcome(True, "peer raises", str(e))
        for name, v in ours.items():
            d = _diff("", "", name, v, theirs[name])
            if not d.ok(self.atol, self.rtol):
                return Outcome(True, "disagree", f"{name}: {d.note or f'max |diff| {d.max_abs:.3g}'}")
        return Outcome(False, "agree")

    def command(self, files: dict[str, Any]) -> list[str]:
        """The check command with ``{model}``, ``{weights}`` and ``{inputs}`` (-i NAME=FILE ...) filled in;
        without ``{model}`` the model path is appended."""
        words = shlex.split(self.check or "")
        out: list[str] = []
        placed = False
        for w in words:
            if w == "{inputs}":
                for name, p in files["inputs"].items():
                    out += ["-i", f"{name}={p}"]
                continue
            if "{model}" in w:
                placed = True
            out.append(w.replace("{model}", files["model"]).replace("{weights}", files["weights"] or ""))
        return out if placed else [*out, files["model"]]

    def _run_check(self, files: dict[str, Any]) -> Outcome:
        argv = self.command(files)
        try:
            r = subprocess.run(argv, capture_output=True, text=True, timeout=self.check_timeout)
        except FileNotFoundError:
            raise StdopsError(f"--check: no such command {argv[0]!r}") from None
        except subprocess.TimeoutExpired:
            raise StdopsError(f"--check: {argv[0]} did not finish in {self.check_timeout:g} s") from None
        if r.returncode != 0:
            tail = (r.stdout.strip().splitlines() + r.stderr.strip().splitlines() or [""])[-1]
            return Outcome(True, "check failed", f"exit status {r.returncode}: {tail}")
        return Outcome(False, "check passed")


@dataclasses.dataclass
class Result:
    nodes: list[int]  # indices into source.nodes
    outputs: list[str]
    inputs: list[str]
    evaluations: int
    seconds: float
    outcome: Outcome
    files: dict[str, Any]  # the written candidate (in the work folder)


class Reducer:
    def __init__(self, source: Source, judge: Judge, work: str, log: Callable[[str], None] = lambda s: None):
        self.source, self.judge, self.work, self.log = source, judge, work, log
        self.evaluations = 0
        self._cache: dict[tuple, tuple[Outcome, dict[str, Any] | None]] = {}

    # ------------------------------------------------------------------ one candidate
    def evaluate(self, nodes: Sequence[int], outputs: Sequence[str], what: str) -> tuple[Outcome, dict | None]:
        nodes = self.source.closure(nodes)
        key = (tuple(nodes), tuple(outputs))
        if key in self._cache:
            return self._cache[key]
        self.evaluations += 1
        folder = os.path.join(self.work, f"c{self.evaluations:03d}")
        os.makedirs(folder)
        try:
            files = self.source.write(nodes, outputs, folder, "cut")
        except CutError as e:
            res: tuple[Outcome, dict | None] = (Outcome(False, "no cut", str(e)), None)
        else:
            res = (self.judge.failing(files), files)
        out = res[0]
        self.log(
            f"  {what}: {len(nodes)} node(s) -> {'FAILS' if out.failing else 'passes'} ({out.kind}"
            + (f": {out.detail}" if out.detail and out.failing else "")
            + ")"
        )
        self._cache[key] = res
        return res

    def frontier(self, last: int) -> list[str]:
        """Values produced by nodes 0..last that later nodes read or the graph reports."""
        later = {i for n in self.source.nodes[last + 1 :] for i in n.inputs}
        outs = set(self.source.graph_outputs)
        return [o for n in self.source.nodes[: last + 1] for o in n.outputs if o in later or o in outs]

    def ancestors(self, outputs: Sequence[str]) -> list[int]:
        prod = self.source.producers()
        need, stack = set(), [prod[o] for o in outputs if o in prod]
        while stack:
            k = stack.pop()
            if k in need:
                continue
            need.add(k)
            stack += [prod[i] for i in self.source.nodes[k].inputs if i in prod]
        return sorted(need)

    # ------------------------------------------------------------------ the search
    def run(self) -> Result:
        t0 = time.perf_counter()
        src = self.source
        n = len(src.nodes)
        if n == 0:
            raise NothingToReduce(f"{getattr(src, 'path', 'model')}: the model has no nodes")
        whole = list(range(n))
        out, files = self.evaluate(whole, src.graph_outputs, "the whole model")
        if not out.failing:
            why = "the check passes" if self.judge.check else f"it agrees with {self.judge.against}"
            raise NothingToReduce(
                f"{getattr(src, 'path', 'model')}: the whole model does not fail ({why}"
                + (f"; {out.detail}" if out.kind == "no cut" else "")
                + "): nothing to reduce"
            )
        # 1. the shortest failing prefix
        lo, hi = 0, n - 1
        while lo < hi:
            mid = (lo + hi) // 2
            if self.evaluate(range(mid + 1), self.frontier(mid), f"prefix of {mid + 1}")[0].failing:
                hi = mid
            else:
                lo = mid + 1
        last = lo
        outputs = list(src.nodes[last].outputs)
        self.log(f"the failure appears at node {src.nodes[last].name!r} ({src.nodes[last].op})")
        # 2. the latest start from which that node's outputs still fail
        anc = self.ancestors(outputs)
        if self.evaluate([last], outputs, "the node alone")[0].failing:  # the usual case: one node is enough
            anc = [last]
        if len(anc) == 1:
            best = anc
        elif not self.evaluate(anc, outputs, "its ancestors")[0].failing:
            # the prefix fails only with a later value (a failure spread over several outputs): keep the prefix
            best = list(range(last + 1))
            outputs = self.frontier(last)
        else:
            lo, hi = 0, len(anc) - 1
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if self.evaluate(self.ancestors_from(anc, mid, outputs), outputs, f"from node {anc[mid]}")[0].failing:
                    lo = mid
                else:
                    hi = mid - 1
            best = self.ancestors_from(anc, lo, outputs)
        # 3. drop nodes one at a time (their outputs frozen) while it still fails
        changed = True
        while changed and len(best) > 1:
            changed = False
            for k in [k for k in best if k != last]:
                trial = [j for j in best if j != k]
                trial = [j for j in trial if j in set(self._needed(trial, outputs))]
                if self.evaluate(trial, outputs, f"without node {src.nodes[k].name!r}")[0].failing:
                    best, changed = trial, True
                    break
        out, files = self.evaluate(best, outputs, "the result")
        nodes = src.closure(best)
        return Result(
            nodes, outputs, src.cut_inputs(nodes), self.evaluations, time.perf_counter() - t0, out, files or {}
        )

    def ancestors_from(self, anc: list[int], start: int, outputs: Sequence[str]) -> list[int]:
        """The ancestors of ``outputs`` at positions >= start of ``anc`` that the outputs still need."""
        allowed = anc[start:]
        return self._needed(allowed, outputs)

    def _needed(self, allowed: Sequence[int], outputs: Sequence[str]) -> list[int]:
        allowed_set = set(allowed)
        prod = {o: k for k in allowed for o in self.source.nodes[k].outputs}
        need, stack = set(), [prod[o] for o in outputs if o in prod]
        while stack:
            k = stack.pop()
            if k in need or k not in allowed_set:
                continue
            need.add(k)
            stack += [prod[i] for i in self.source.nodes[k].inputs if i in prod]
        return sorted(need)


def reduce_model(
    source: Source, feeds: dict[str, Any], judge: Judge, log: Callable[[str], None] = lambda s: None
) -> tuple[Result, tempfile.TemporaryDirectory]:
    """Freeze every value with one stdops run on ``feeds``, then bisect. The caller keeps the returned work
    folder alive until it has copied ``result.files`` (and cleans it up)."""
    source.freeze(feeds)
    if source.run_error is not None:
        log(f"stdops raised on the whole model: {source.run_error}")
    work = tempfile.TemporaryDirectory(prefix="stdops-reduce-")
    try:
        return Reducer(source, judge, work.name, log).run(), work
    except BaseException:
        work.cleanup()
        raise
