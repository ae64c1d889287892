"""The ONNX front end: ``load(model) -> Model`` and the conformance backend ``run(model, inputs)``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .model import Model, ValueInfo  # noqa: F401  (re-exported lazily by __getattr__)


def __getattr__(name: str) -> Any:
    # the loader imports the onnx package and every kernel: only when a model is loaded (see proto.py)
    if name in ("Model", "ValueInfo"):
        from . import model

        return getattr(model, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def load(model: Any, base_dir: Any = None) -> Model:
    """Load a path, bytes or ``onnx.ModelProto`` into a compiled :class:`Model`. External tensor data is
    read from the model file's folder; a model given as bytes or a proto reads it from ``base_dir``
    (without one, such a model with external data is refused)."""
    from .model import Model

    return Model(model, base_dir=base_dir)


_last: tuple[Any, Model] | None = None


def run(model: Any, inputs: list) -> list:
    """Run ``model`` with ``inputs`` in graph-input order; returns the outputs in graph-output order
    (a sequence is a list, an empty optional is None). The backend callable of the shared ONNX
    conformance harness; a ModelProto passed again is not recompiled."""
    global _last
    if _last is not None and _last[0] is model:
        m = _last[1]
    else:
        m = load(model)
        _last = (model, m)
    names = [vi.name for vi in m.proto.graph.input]
    if len(inputs) > len(names):
        raise ValueError(f"{len(inputs)} inputs given, the graph has {len(names)}")
    feeds = dict(zip(names, inputs))
    out = m.run(feeds)
    return [out[n] for n in m.output_names]
