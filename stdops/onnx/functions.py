"""Inlining ONNX functions: model-local FunctionProtos (ONNX IR "Functions"), and, for an operator no kernel
binds, the function body its schema defines (e.g. SwiGLU-28 = Swish(A) * B).

A call is replaced by the body's nodes with every internal value renamed under a unique prefix, formal
inputs/outputs mapped onto the call's actual names, and attribute references (``ref_attr_name``) resolved
from the call's attributes or the function's defaults. Each inlined node keeps the opset imports of its
function, which may differ from the model's.
"""

from __future__ import annotations

from collections.abc import Iterator

import onnx

from ..errors import ModelFormatError

#: how deep functions may call functions (a recursive definition is a model error, not a hang): the
#: default of ``stdops.limits.Limits.max_function_depth``; the number of nodes inlining may create is
#: bounded by ``max_graph_nodes``, charged per node as the bodies are expanded
MAX_DEPTH = 32


def schema_function(domain: str, op_type: str, opset: int) -> onnx.FunctionProto | None:
    """The function body the ONNX schema of ``op_type`` at ``opset`` defines, if any (context-free only)."""
    import onnx.defs

    try:
        s = onnx.defs.get_schema(op_type, opset, domain)
    except Exception:  # noqa: BLE001 - no such schema
        return None
    if not s.has_function:  # type: ignore[attr-defined]  # onnx's stubs lack it
        return None
    try:
        body = s.get_function_with_opset_version(opset) if hasattr(s, "get_function_with_opset_version") else None
    except Exception:  # noqa: BLE001
        body = None
    if body is None:
        body = s.function_body
    if isinstance(body, (bytes, str)):
        f = onnx.FunctionProto()
        f.ParseFromString(body if isinstance(body, bytes) else body.encode("latin-1"))
        body = f
    return body if body is not None and len(body.node) else None


def _rename_graph(g: onnx.GraphProto, rename: dict[str, str]) -> None:
    """Rename outer-scope references inside a subgraph (values the subgraph itself defines are kept)."""
    local = {vi.name for vi in g.input} | {t.name for t in g.initializer}
    for n in g.node:
        for i, name in enumerate(n.input):
            if name and name not in local and name in rename:
                n.input[i] = rename[name]
        local.update(n.output)
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                _rename_graph(a.g, {k: v for k, v in rename.items() if k not in local})
            elif a.type == onnx.AttributeProto.GRAPHS:
                for sub in a.graphs:
                    _rename_graph(sub, {k: v for k, v in rename.items() if k not in local})
    for vi in g.output:
        if vi.name not in local and vi.name in rename:
            vi.name = rename[vi.name]


def inline(
    call: onnx.NodeProto, f: onnx.FunctionProto, prefix: str, where: str, path: str | None
) -> Iterator[onnx.NodeProto]:
    """The body of ``f`` as nodes computing ``call``'s outputs from ``call``'s inputs."""
    if len(call.input) > len(f.input) or len(call.output) > len(f.output):
        raise ModelFormatError(
            path,
            where,
            f"function {f.name!r} takes {len(f.input)} inputs and "
            f"{len(f.output)} outputs; the call has {len(call.input)} and "
            f"{len(call.output)}",
        )
    rename: dict[str, str] = {}
    for k, formal in enumerate(f.input):
        rename[formal] = call.input[k] if k < len(call.input) else ""
    for k, formal in enumerate(f.output):
        rename[formal] = call.output[k] if k < len(call.output) else f"{prefix}/{formal}"
    actual_attrs = {a.name: a for a in call.attribute}
    defaults = {a.name: a for a in f.attribute_proto}
    for idx, n in enumerate(f.node):
        m = onnx.NodeProto()
        m.CopyFrom(n)
        m.name = f"{prefix}/{n.name or f'{n.op_type}_{idx}'}"
        for i, name in enumerate(m.input):
            if name:
                m.input[i] = rename.setdefault(name, f"{prefix}/{name}")
        for i, name in enumerate(m.output):
            if name:
                m.output[i] = rename.setdefault(name, f"{prefix}/{name}")
        kept = []
        for a in m.attribute:
            if a.ref_attr_name:
                src = actual_attrs.get(a.ref_attr_name) or defaults.get(a.ref_attr_name)
                if src is None:
                    continue  # an optional attribute the call leaves out
                b = onnx.AttributeProto()
                b.CopyFrom(src)
                b.name = a.name
                kept.append(b)
            else:
                if a.type == onnx.AttributeProto.GRAPH:
                    _rename_graph(a.g, rename)
                elif a.type == onnx.AttributeProto.GRAPHS:
                    for sub in a.graphs:
                        _rename_graph(sub, rename)
                kept.append(a)
        del m.attribute[:]
        m.attribute.extend(kept)
        yield m


def function_opsets(f: onnx.FunctionProto, model_opsets: dict[str, int]) -> dict[str, int]:
    ops = dict(model_opsets)
    for o in f.opset_import:
        ops["" if o.domain in ("", "ai.onnx") else o.domain] = int(o.version)
    return ops
