"""The ai.onnx.preview.training Gradient operator: reverse-mode differentiation prepared at load time.

``Gradient(xs..., zs...) -> dy/dx...`` (attributes ``xs``, ``zs``, ``y``): the gradient of the sum of
``y`` (the vector-Jacobian product with ones) with respect to each tensor named in ``xs``, evaluated at
the values the node receives (xs then zs, in that order).

At load time the adapter

1. takes the nodes of the enclosing graph before the Gradient node (``BindContext.earlier_nodes``) that
   lie on a path from xs/zs to y (xs and zs are cut points: their producers are not part of it);
2. builds a GraphProto with inputs xs+zs whose outputs are y and every intermediate (renamed, so the
   names cannot clash with the enclosing scope) and compiles it like a control-flow body: values of
   the enclosing scope it reads (initializers, other tensors) become extra trailing step inputs
   (``outer_inputs``);
3. binds a vector-Jacobian rule to every node that lies on a path from xs to y (a missing rule is a
   load-time error naming the node).

A run executes the forward plan once (recording every intermediate), then walks the differentiable
nodes in reverse: each rule maps the output gradients to input gradients, which are summed over all
uses of a value and summed over broadcast axes back to the value's shape.
"""

from __future__ import annotations

import numpy as np

from .._lazy import LazyModule
from .gradient_rules import NON_DIFFERENTIABLE, RULES, SELECTION, _counter, _node_attrs, _selection, _unbroadcast
from .opset import BindContext, adapter, reads_outer

helper = LazyModule("onnx.helper")  # the onnx package only when a Gradient node is built


# ---------------------------------------------------------------------------------------- the adapter
def _strings(ctx: BindContext, name: str, required: bool) -> list[str]:
    v = ctx.attrs.pop(name, None)
    if v is None:
        if required:
            raise ctx.error(f"missing required attribute {name}")
        return []
    if isinstance(v, str):
        return [v]
    return list(v)


@adapter("Gradient", 1, domain="ai.onnx.preview.training")
def _gradient(ctx: BindContext):
    """Gradient(xs..., zs...) -> d(sum y)/dx for each x of ``xs`` (each output optional)."""
    xs = _strings(ctx, "xs", True)
    zs = _strings(ctx, "zs", False)
    y = ctx.attrs.pop("y", None)
    if not isinstance(y, str) or not y:
        raise ctx.error("missing required attribute y")
    if ctx.attrs:
        raise ctx.error(f"unknown attribute(s) {', '.join(sorted(ctx.attrs))}")
    if not xs:
        raise ctx.error("attribute xs names no tensor")
    if ctx.n_inputs != len(xs) + len(zs):
        raise ctx.error(f"the node has {ctx.n_inputs} inputs, xs and zs name {len(xs) + len(zs)}")
    if ctx.n_outputs > len(xs):
        raise ctx.error(f"the node declares {ctx.n_outputs} outputs, xs names {len(xs)}")
    if ctx.compile_graph is None:
        raise ctx.error("Gradient needs the enclosing graph (not available here)")
    free = xs + zs
    if len(set(free)) != len(free):
        raise ctx.error("a name appears twice in xs and zs")
    cut = set(free)

    # 1. the nodes on the paths from xs/zs to y
    earlier = list(ctx.earlier_nodes)
    reach = set(cut)
    down: list[int] = []
    for k, n in enumerate(earlier):
        outs = [o for o in n.output if o]
        if cut.intersection(outs):
            continue  # a producer of an independent input is not differentiated through
        if any(i in reach for i in n.input if i):
            down.append(k)
            reach.update(outs)
    wanted = {y}
    path: list[int] = []
    for k in reversed(down):
        n = earlier[k]
        if wanted.intersection(o for o in n.output if o):
            path.append(k)
            wanted.update(i for i in n.input if i)
    path.reverse()
    path_nodes = [earlier[k] for k in path]

    # 2. the values that depend on xs, and the nodes the backward pass walks
    diff = set(xs)
    back: list[int] = []  # indices into path_nodes
    for j, n in enumerate(path_nodes):
        if n.op_type in NON_DIFFERENTIABLE or not any(i in diff for i in n.input if i):
            continue
        if n.domain not in ("", "ai.onnx"):
            raise ctx.error(f"Gradient: no derivative for {n.domain}:{n.op_type} (node {n.name or n.op_type!r})")
        if n.op_type not in RULES and n.op_type not in SELECTION:
            raise ctx.error(f"Gradient: no derivative for {n.op_type} (node {n.name or n.op_type!r})")
        if n.op_type == "Cast":
            to = _node_attrs(n).get("to")
            if to is not None and to not in (1, 10, 11, 16):  # FLOAT, FLOAT16, DOUBLE, BFLOAT16
                continue
        back.append(j)
        diff.update(o for o in n.output if o)

    # 3. the forward graph: inputs xs + zs, outputs y and every intermediate (renamed)
    prefix = f"__gradient{next(_counter)}__/"
    renamed = {o: prefix + o for n in path_nodes for o in n.output if o}

    def rn(name: str) -> str:
        return renamed.get(name, name) if name else ""

    fwd_nodes = []
    for j, n in enumerate(path_nodes):
        m = type(n)()
        m.CopyFrom(n)
        del m.input[:]
        m.input.extend(rn(i) for i in n.input)
        del m.output[:]
        m.output.extend(rn(o) for o in n.output)
        if n.op_type == "Dropout" and j in back:  # record the mask its backward rule needs
            while len(m.output) < 2:
                m.output.append("")
            if not m.output[1]:
                m.output[1] = renamed[f"#mask{j}"] = f"{prefix}#mask{j}"
        fwd_nodes.append(m)
    out_names = [rn(y)] + [v for v in renamed.values() if v != rn(y)]
    g = helper.make_graph(
        fwd_nodes,
        f"{ctx.node_name}/forward",
        [helper.make_empty_tensor_value_info(nm) for nm in free],
        [helper.make_empty_tensor_value_info(nm) for nm in out_names],
    )
    plan = ctx.compile_graph(g)
    outer = list(plan.outer_names)
    n_free = len(free)

    # 4. bind the rules
    dom_opset = ctx.opsets.get("", 1)
    kernels = {tuple(nd.outputs): nd.fn for nd in plan.nodes}
    steps = []
    for j in back:
        n = path_nodes[j]
        ins = [rn(i) for i in n.input]
        outs = list(fwd_nodes[j].output)
        if n.op_type in SELECTION:
            bw = _selection(kernels[tuple(outs)], SELECTION[n.op_type])
        else:
            bw = RULES[n.op_type](_node_attrs(n), dom_opset)
        need = [bool(i) and i in diff for i in n.input]
        steps.append((bw, ins, outs, need, n))
    y_name = rn(y)
    want_out = [i < len(ctx.output_present) and ctx.output_present[i] for i in range(len(xs))]
    n_out = max(ctx.n_outputs, 1)

    def run_gradient(*args):
        env = dict(zip(free, args[:n_free]))
        env.update(zip(outer, args[n_free:]))
        vals = dict(env)
        vals.update(plan.run(env, out_names))
        yv = np.asarray(vals[y_name])
        grads: dict[str, np.ndarray] = {y_name: np.ones(yv.shape, yv.dtype)}
        for bw, ins, outs, need, _node in reversed(steps):
            gouts = [grads.get(o) if o else None for o in outs]
            if all(gg is None for gg in gouts):
                continue
            ovals = [vals.get(o) if o else None for o in outs]
            gouts = [np.zeros_like(ov) if gg is None and ov is not None else gg for gg, ov in zip(gouts, ovals)]
            ivals = [vals[i] if i else None for i in ins]
            gins = bw(ivals, ovals, gouts, need)
            for name, nd, gi, iv in zip(ins, need, gins, ivals):
                if not nd or gi is None:
                    continue
                gi = _unbroadcast(gi, np.shape(iv))
                prev = grads.get(name)
                grads[name] = gi if prev is None else prev + gi
        result = []
        for i, x in enumerate(xs[:n_out]):
            if not want_out[i]:
                result.append(None)
                continue
            xv = np.asarray(env[x])
            gx = grads.get(x)
            result.append(np.zeros_like(xv) if gx is None else np.array(gx, dtype=xv.dtype))
        return tuple(result)

    return reads_outer(run_gradient, outer)
