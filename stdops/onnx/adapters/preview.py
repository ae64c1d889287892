"""ONNX adapters for the ai.onnx.preview kernels: FlexAttention's modifier subgraphs are compiled
once, at load time, into callables (values of enclosing scopes become extra node inputs)."""

from __future__ import annotations

from ..opset import adapter, reads_outer


@adapter("FlexAttention", 1, domain="ai.onnx.preview")
def _flex_attention(ctx):
    """softmax_precision is a TensorProto enum; score_mod / prob_mod are GRAPH attributes with one
    input and one output."""
    ctx.dtype_attr("softmax_precision", None)
    plans = {}
    for name in ("score_mod", "prob_mod"):
        g = ctx.attrs.pop(name, None)
        if g is None:
            continue
        if ctx.compile_graph is None:
            raise ctx.error("subgraphs are not supported here")
        plan = ctx.compile_graph(g)
        if len(plan.input_names) != 1 or len(plan.output_names) != 1:
            raise ctx.error(
                f"{name} must take one input and produce one output, it has "
                f"{len(plan.input_names)} and {len(plan.output_names)}"
            )
        plans[name] = plan
    fn = ctx.bind()
    outer: list[str] = []
    for p in plans.values():
        outer += [n for n in p.outer_names if n not in outer]
    if not plans:
        return fn

    def flex_attention(q, k, v, *outer_vals):
        env = dict(zip(outer, outer_vals))
        mods = {}
        for name, p in plans.items():

            def mod(t, _p=p):
                feeds = {n: env[n] for n in _p.outer_names}
                feeds[_p.input_names[0]] = t
                return _p.run(feeds)[_p.output_names[0]]

            mods[name] = mod
        return fn(q, k, v, **mods)

    return reads_outer(flex_attention, outer)
