"""The optimizer's working copy of a plan: its nodes (a removed one becomes None, so that positions keep the
plan's order), its constants, who reads each value, and the rules every pass shares."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ..graph import Node, Plan


class Work:
    """A plan being rewritten. Passes replace ``nodes[k]`` (keeping the order), drop nodes (None) and add
    constants; :meth:`plan` compiles the result."""

    def __init__(self, plan: Plan, shapes: dict[str, tuple[int, ...]]):
        self.source = plan
        self.nodes: list[Node | None] = list(plan.nodes)
        self.consts: dict[str, Any] = plan.constants()
        self.inputs = list(plan.input_names)
        self.outputs = list(plan.output_names)
        self.outer = list(plan.outer_names)
        #: values no pass may remove or rename: the graph's outputs
        self.kept = set(self.outputs)
        #: initializers a feed may override: not constants for the optimizer
        self.overridable = set(self.inputs) & set(self.consts)
        self.shapes = {k: tuple(int(d) for d in v) for k, v in shapes.items()}
        self.changed = False
        self._readers: dict[str, dict[int, None]] = {}  # name -> positions of its readers (an ordered set)
        self._producers: dict[str, int] = {}
        for k, n in enumerate(self.nodes):
            self._index(k, n, +1)
        self._n_new = 0

    def _index(self, k: int, n: Node | None, sign: int) -> None:
        """Add (+1) or remove (-1) node k's entries in the reader and producer maps."""
        if n is None:
            return
        for i in dict.fromkeys(n.inputs):
            if not i:
                continue
            if sign > 0:
                self._readers.setdefault(i, {})[k] = None
            else:
                del self._readers[i][k]
        for o in n.outputs:
            if o:
                if sign > 0:
                    self._producers[o] = k
                elif self._producers.get(o) == k:
                    del self._producers[o]

    # ------------------------------------------------------------------ queries
    def const(self, name: str) -> Any:
        """The load-time value of ``name``, or None (not a constant, or a feed may override it)."""
        if not name or name in self.overridable:
            return None
        return self.consts.get(name)

    def is_const(self, name: str) -> bool:
        return bool(name) and name in self.consts and name not in self.overridable

    def readers(self, name: str) -> list[int]:
        """Positions of the nodes that read ``name`` (once per node)."""
        return list(self._readers.get(name, ()))

    def only_reader(self, name: str) -> int | None:
        """The position of the one node reading ``name``, when exactly one does and it is not a graph output."""
        if name in self.kept or name in self.overridable:
            return None
        r = self._readers.get(name, {})
        return next(iter(r)) if len(r) == 1 else None

    def producer_index(self) -> dict[str, int]:
        return self._producers

    def producer(self, name: str) -> Node | None:
        k = self._producers.get(name)
        return None if k is None else self.nodes[k]

    # ------------------------------------------------------------------ edits
    def replace(self, k: int, node: Node | None) -> None:
        self._index(k, self.nodes[k], -1)
        self.nodes[k] = node
        self._index(k, node, +1)
        self.changed = True

    def new_const(self, hint: str, value: Any) -> str:
        """Add a constant under a fresh name (derived from ``hint``) and return the name."""
        while True:
            self._n_new += 1
            name = f"{hint}#opt{self._n_new}"
            if name not in self.consts:
                break
        self.consts[name] = value
        self.changed = True
        return name

    def rename_uses(self, old: str, new: str) -> None:
        """Every node reading ``old`` reads ``new`` instead (``old`` must not be a graph output)."""
        for k in list(self._readers.get(old, ())):
            n = self.nodes[k]
            assert n is not None
            self.replace(k, dataclasses.replace(n, inputs=[new if i == old else i for i in n.inputs]))

    # ------------------------------------------------------------------ result
    def plan(self) -> Plan:
        nodes = [n for n in self.nodes if n is not None]
        used = {i for n in nodes for i in n.inputs if i} | set(self.outputs) | set(self.inputs)
        consts = {k: v for k, v in self.consts.items() if k in used}
        p = Plan(nodes, self.inputs, self.outputs, consts, self.source.path, outer=self.outer)
        return p


def kernel_name(node: Node | None) -> str | None:
    """The kernel of a node that is exactly one bound kernel on its inputs, else None."""
    if node is None or node.bound is None or node.fn is not node.bound.fn:
        return None
    return node.bound.kernel.name


def float_const(value: Any) -> bool:
    return isinstance(value, np.ndarray) and value.dtype.kind == "f"
