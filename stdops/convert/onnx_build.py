"""Building an ONNX graph node by node: unique value names, initializers, and the finished, checked model.

The converters emit standard ONNX ops only (the default domain); every constant is an initializer, and a
model is handed back only after ``onnx.checker.check_model(full_check=True)`` (which runs strict shape
inference) has passed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

#: the opset the converters write (DeformConv 19, Col2Im 18, GridSample-20 for 5-D, Gelu 20); newer
#: opsets re-version ops that onnxruntime has kernels for only in their older versions (MaxRoiPool, RoiAlign)
DEFAULT_OPSET = 20

#: ONNX attributes by name, as ``GraphBuilder.op`` and ``helper.make_node`` take them (ints, floats, strings,
#: lists of them, tensors); no ONNX schema names an attribute ``outputs`` or ``name``, op's own parameters
Attrs = dict[str, Any]


def onnx_dtype(dtype: Any) -> int:
    """The TensorProto element type of a numpy dtype (bfloat16 from ml_dtypes included)."""
    from onnx import helper

    d = np.dtype(dtype)
    if d.name == "bfloat16":
        from onnx import TensorProto

        return TensorProto.BFLOAT16
    return helper.np_dtype_to_tensor_dtype(d)


class GraphBuilder:
    """Nodes, initializers and value names of one ONNX graph under construction.

    ``reserve(names)`` keeps names (the source model's blob names) away from generated ones;
    ``op(...)`` appends a node and returns its output name(s); ``const(array)`` adds an initializer.
    """

    def __init__(self, opset: int = DEFAULT_OPSET):
        self.opset = opset
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self.value_info: dict[str, tuple[int, tuple[int, ...]]] = {}
        self._used: set[str] = set()
        self._small: dict[tuple, str] = {}
        self._node_names: set[str] = set()
        self.prefix = ""

    # ------------------------------------------------------------------ names
    def reserve(self, names: Iterable[str]) -> None:
        self._used.update(names)

    def fresh(self, stem: str) -> str:
        """A value name not used yet, ``<prefix><stem>`` or with a counter."""
        base = f"{self.prefix}{stem}"
        name, k = base, 1
        while name in self._used:
            name = f"{base}_{k}"
            k += 1
        self._used.add(name)
        return name

    @property
    def used(self) -> set[str]:
        return self._used

    def initializer_named(self, name: str) -> tuple[np.dtype, np.ndarray] | None:
        """(dtype, values) of the initializer of that name, if there is one."""
        from onnx import numpy_helper

        for t in self.initializers:
            if t.name == name:
                a = numpy_helper.to_array(t)
                return a.dtype, a
        return None

    # ------------------------------------------------------------------ constants
    def const(self, value: Any, dtype: Any = None, stem: str = "const", name: str | None = None) -> str:
        """An initializer holding ``value`` (small unnamed ones are shared by content); ``name`` gives it
        that exact name."""
        from onnx import numpy_helper

        a = np.asarray(value) if dtype is None else np.asarray(value, dtype=dtype)
        if a.dtype == np.float64 and dtype is None:
            a = a.astype(np.float32)
        if name is not None:
            self._used.add(name)
            self.initializers.append(numpy_helper.from_array(np.ascontiguousarray(a), name))
            return name
        key = None
        if a.size <= 16:
            key = (a.dtype.str, a.shape, a.tobytes())
            hit = self._small.get(key)
            if hit is not None:
                return hit
        name = self.fresh(stem)
        self.initializers.append(numpy_helper.from_array(np.ascontiguousarray(a), name))
        if key is not None:
            self._small[key] = name
        return name

    def ints(self, values: Sequence[int], stem: str = "ints") -> str:
        return self.const(np.asarray(list(values), np.int64), stem=stem)

    def scalar(self, v: float, dtype: Any = np.float32, stem: str = "k") -> str:
        return self.const(np.asarray(v, dtype=dtype), dtype=dtype, stem=stem)

    # ------------------------------------------------------------------ nodes
    def op(
        self,
        op_type: str,
        inputs: Sequence[str],
        outputs: int | Sequence[str] = 1,
        name: str | None = None,
        **attrs: Any,
    ) -> Any:
        """Append ``op_type(inputs)``; returns the output name (one output) or the list of names.
        ``outputs`` is a count (names are generated) or the names to use."""
        from onnx import helper

        if isinstance(outputs, int):
            outs = [self.fresh(op_type.lower()) for _ in range(outputs)]
        else:
            outs = list(outputs)
            self._used.update(outs)
        if name:  # an exact node name (unique), without the prefix
            node_name, k = name, 1
            while node_name in self._node_names:
                node_name, k = f"{name}_{k}", k + 1
        else:
            node_name = self.fresh(f"{op_type}")
        self._node_names.add(node_name)
        attrs = {k: v for k, v in attrs.items() if v is not None}
        self.nodes.append(helper.make_node(op_type, list(inputs), outs, name=node_name, **attrs))
        return outs[0] if len(outs) == 1 else outs

    def rename_output(self, old: str, new: str, since: int = 0) -> bool:
        """Give the value ``old`` (produced by a node appended at index >= ``since``) the name ``new``,
        in its producer and in every later reader. False when no such node produces it."""
        for k in range(len(self.nodes) - 1, since - 1, -1):
            node = self.nodes[k]
            if old in node.output:
                for i, o in enumerate(node.output):
                    if o == old:
                        node.output[i] = new
                for later in self.nodes[k + 1 :]:
                    for i, v in enumerate(later.input):
                        if v == old:
                            later.input[i] = new
                self._used.add(new)
                return True
        return False

    # ------------------------------------------------------------------ common patterns
    def reshape(self, x: str, shape: Sequence[int], out: str | None = None) -> str:
        return self.op("Reshape", [x, self.ints(shape, "shape")], [out] if out else 1)

    def slice(self, x: str, starts, ends, axes, steps=None) -> str:
        ins = [x, self.ints(starts, "starts"), self.ints(ends, "ends"), self.ints(axes, "axes")]
        if steps is not None:
            ins.append(self.ints(steps, "steps"))
        return self.op("Slice", ins)

    def cast(self, x: str, to: Any) -> str:
        return self.op("Cast", [x], to=onnx_dtype(to))

    # ------------------------------------------------------------------ the model
    def model(
        self,
        inputs: Sequence[tuple[str, Any, Sequence[int] | None]],
        outputs: Sequence[tuple[str, Any, Sequence[int] | None]],
        graph_name: str = "graph",
        producer: str = "stdops convert",
        doc: str = "",
        metadata: dict[str, str] | None = None,
    ):
        """The ModelProto (inputs/outputs as (name, numpy dtype, shape)); not yet checked."""
        from onnx import helper

        def info(name, dtype, shape):
            return helper.make_tensor_value_info(name, onnx_dtype(dtype), None if shape is None else list(shape))

        vi = [
            helper.make_tensor_value_info(n, t, list(s))
            for n, (t, s) in self.value_info.items()
            if n not in {i[0] for i in inputs} | {o[0] for o in outputs}
        ]
        graph = helper.make_graph(
            self.nodes,
            graph_name,
            [info(*i) for i in inputs],
            [info(*o) for o in outputs],
            self.initializers,
            doc_string=doc,
            value_info=vi,
        )
        opsets = [helper.make_opsetid("", self.opset)]
        m = helper.make_model(graph, opset_imports=opsets, producer_name=producer)
        m.ir_version = helper.find_min_ir_version_for(opsets)
        for k, v in (metadata or {}).items():
            e = m.metadata_props.add()
            e.key, e.value = k, v
        return m


def check(model, path: str | None, what: str) -> Any:
    """Run the ONNX checker with full checking (strict shape inference); a failure is a StdopsError
    naming the converted model (it is a converter bug or an input the converter misread)."""
    import onnx

    from ..errors import ModelFormatError

    try:
        onnx.checker.check_model(model, full_check=True)
        return onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    except Exception as e:  # noqa: BLE001 - onnx raises ValidationError / InferenceError
        msg = " ".join(str(e).split())[:600]
        raise ModelFormatError(path, what, f"the converted model fails the ONNX checker: {msg}") from None
