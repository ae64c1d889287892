"""Scaled dot-product attention as exporters write it, one step (stdops/ops/attention.py ``attention_heads``).

After ``fuse`` (the Softmax is a ``softmax_rows`` step, its scale already moved into it):

    [Transpose] A, [Transpose] B -> MatMul -> softmax_rows -> MatMul with [Transpose] V -> [Transpose]

each value between two of these nodes read only by the next one and no graph output; a Transpose is taken in
(its permutation becomes a view inside the step) when the MatMul is its only reader, and the Transpose after
the second MatMul when it is that MatMul's only reader. The scores and the probabilities (the step's
scratch) and the transposed copies then never exist: a plain run keeps a head's scores in cache between
its two products, and the heads split across the BLAS helper threads. A run with a hook runs the plan as
written (every one of these values observable).
"""

from __future__ import annotations

from ..graph import Node
from ..ops import attention as attention_ops
from ..ops._registry import record_use
from ..ops.bind import bind
from ._work import Work, kernel_name

record_use(attention_ops.attention_heads, "optimize", "Transpose + MatMul + Softmax + MatMul + Transpose")


def _only(work: Work, name: str, kernel: str, reader: int, n_inputs: int = 1) -> tuple[int, Node] | None:
    """(position, node) of the producer of ``name`` when it runs ``kernel`` with ``n_inputs`` inputs and one
    output and the node at ``reader`` is the only reader of ``name``."""
    k = work.producer_index().get(name)
    node = None if k is None else work.nodes[k]
    if k is None or node is None or kernel_name(node) != kernel or work.only_reader(name) != reader:
        return None
    if len(node.inputs) != n_inputs or len([o for o in node.outputs if o]) != 1 or node.outputs[0] != name:
        return None
    return k, node


def _perm(node: Node) -> tuple[int, ...] | None:
    p = node.bound.attrs.get("perm")
    return None if p is None else tuple(int(i) for i in p)


def _fuse(work: Work, k: int, sm: Node) -> None:
    p = sm.outputs[0]
    scores = _only(work, sm.inputs[0], "mat_mul", k, 2) if len(sm.inputs) == 1 else None
    j2 = work.only_reader(p)
    pv = None if j2 is None else work.nodes[j2]
    if scores is None or j2 is None or pv is None or kernel_name(pv) != "mat_mul":
        return
    if len(pv.inputs) != 2 or pv.inputs[0] != p:
        return
    j, qk = scores
    if p == pv.inputs[1] or len([o for o in pv.outputs if o]) != 1:
        return
    removed: list[int] = [j, k, j2]
    inputs: list[str] = []
    perms: dict[str, tuple[int, ...]] = {}
    for name, reader, key in ((qk.inputs[0], j, "a_perm"), (qk.inputs[1], j, "b_perm"), (pv.inputs[1], j2, "v_perm")):
        t = _only(work, name, "transpose", reader) if qk.inputs[0] != qk.inputs[1] else None
        perm = None if t is None else _perm(t[1])
        if t is not None and perm is not None and t[0] not in removed:
            removed.append(t[0])
            inputs.append(t[1].inputs[0])
            perms[key] = perm
        else:
            inputs.append(name)
    out = pv.outputs[0]
    kt = work.only_reader(out)
    tn = None if kt is None else work.nodes[kt]
    if (
        kt is not None
        and tn is not None
        and kernel_name(tn) == "transpose"
        and tn.inputs == [out]
        and len([o for o in tn.outputs if o]) == 1
    ):
        perm = _perm(tn)
        if perm is not None:
            removed.append(kt)
            perms["out_perm"] = perm
            out = tn.outputs[0]
    attrs = dict(perms, axis=sm.bound.attrs.get("axis", -1), scale=float(sm.bound.attrs.get("scale", 1.0)))
    bound = bind(attention_ops.attention_heads, attrs, (None, None, None))
    node = Node(qk.name, qk.op, bound.fn, inputs, [out], qk.where, bound, ("attention_heads",))
    last = max(removed)
    for r in removed:
        work.replace(r, None)
    work.replace(last, node)


def run(work: Work) -> None:
    for k in range(len(work.nodes)):
        node = work.nodes[k]
        if kernel_name(node) == "softmax_rows" and node is not None and len(node.outputs) == 1 and node.outputs[0]:
            if node.outputs[0] not in work.kept and node.inputs and node.inputs[0] not in work.kept:
                _fuse(work, k, node)
