"""The MDF v0.4 schema as pydantic models.

Serialized MDF is ``{model_id: {...}}`` and every child collection is a dict keyed by id; here the
collections stay dicts keyed by id (``graph.nodes["A"]``) and each child also carries its ``id``.
Older spellings are accepted and normalized: string shapes (``"(1,)"``), conditions written with
``args`` instead of ``kwargs``, functions written as ``{name: {arg: expr}}``, parameter conditions
written as a dict keyed by id. Fields the schema does not know are kept (so a round trip loses
nothing) and reported as warnings by :func:`stdops.mdf.io.load`.
"""

from __future__ import annotations

import ast
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

MDF_FORMAT = "ModECI MDF v0.4"

#: ``reduce`` values an input port accepts
REDUCE_MODES = ("overwrite", "add", "multiply")


class MdfBase(BaseModel):
    """Common base: unknown fields are kept (and warned about at load), ``metadata`` is free-form."""

    model_config = ConfigDict(extra="allow", validate_assignment=False, arbitrary_types_allowed=True)

    metadata: dict[str, Any] | None = None


def _with_ids(children: Any) -> Any:
    """A dict keyed by id -> the same dict whose values carry their id; a list of dicts with ids
    (the Python API's form) -> a dict keyed by id."""
    if children is None:
        return {}
    if isinstance(children, list):
        out = {}
        for c in children:
            cid = c.get("id") if isinstance(c, dict) else getattr(c, "id", None)
            if cid is None or not isinstance(cid, (str, int)):
                raise ValueError("a list entry has no id")
            out[str(cid)] = c
        return out
    if isinstance(children, dict):
        out = {}
        for k, v in children.items():
            if isinstance(v, dict) and "id" not in v:
                v = {"id": str(k), **v}
            elif v is None:
                v = {"id": str(k)}
            out[str(k)] = v
        return out
    return children


def _shape(v: Any) -> Any:
    if isinstance(v, str):
        try:
            v = ast.literal_eval(v.strip())  # a literal, never code: "(1,)" / "[2, 3]" / "3"
        except (ValueError, SyntaxError, MemoryError, RecursionError):  # the last two: nesting too deep to parse
            raise ValueError(f"shape {v!r} is not a tuple of integers") from None
    if isinstance(v, int) and not isinstance(v, bool):
        if v < 0:
            raise ValueError(f"shape {v!r} is negative")
        return (v,)
    if isinstance(v, (list, tuple)):
        if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in v):
            raise ValueError(f"shape {list(v)!r} is not a tuple of non-negative integers")
        return tuple(v)
    if v is None:
        return None
    raise ValueError(f"shape {v!r} is not a tuple of integers")


class InputPort(MdfBase):
    id: str
    shape: tuple | None = None
    type: str | None = None
    default_value: Any = None
    reduce: str | None = "overwrite"

    @field_validator("shape", mode="before")
    @classmethod
    def _norm_shape(cls, v: Any) -> Any:
        return _shape(v)

    @field_validator("reduce")
    @classmethod
    def _reduce(cls, v: str | None) -> str | None:
        if v is not None and v not in REDUCE_MODES:
            raise ValueError(f"reduce must be one of {', '.join(REDUCE_MODES)}, not {v!r}")
        return v


class OutputPort(MdfBase):
    id: str
    value: Any = None
    shape: tuple | None = None
    type: str | None = None

    @field_validator("shape", mode="before")
    @classmethod
    def _norm_shape(cls, v: Any) -> Any:
        return _shape(v)


class Function(MdfBase):
    id: str
    function: str | dict[str, Any] | None = None
    args: dict[str, Any] | None = None
    value: Any = None

    @model_validator(mode="before")
    @classmethod
    def _function_dict(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("function"), dict):
            f = data["function"]
            if len(f) != 1:
                raise ValueError("function written as a dict must have exactly one entry {name: {args}}")
            ((name, args),) = f.items()
            if args is not None and not isinstance(args, dict):
                raise ValueError(f"function {{{name}: ...}} must map to a dict of arguments")
            data = dict(data)
            if data.get("args") is not None and not isinstance(data["args"], dict):
                raise ValueError("args must be a mapping")
            merged = dict(data.get("args") or {})
            merged.update(args or {})
            data["function"], data["args"] = name, merged
        return data


class ParameterCondition(MdfBase):
    id: str
    test: Any = None
    value: Any = None


class Parameter(MdfBase):
    id: str
    value: Any = None
    default_initial_value: Any = None
    time_derivative: Any = None
    function: str | dict[str, Any] | None = None
    args: dict[str, Any] | None = None
    conditions: list[ParameterCondition] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _normalize(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if isinstance(data.get("function"), dict):
            if len(data["function"]) != 1:
                raise ValueError("function written as a dict must have exactly one entry {name: {args}}")
            ((name, args),) = data["function"].items()
            if (args is not None and not isinstance(args, dict)) or (
                data.get("args") is not None and not isinstance(data["args"], dict)
            ):
                raise ValueError("function arguments must be a mapping")
            merged = dict(data.get("args") or {})
            merged.update(args or {})
            data["function"], data["args"] = name, merged
        conds = data.get("conditions")
        if isinstance(conds, dict):
            if not all(isinstance(v, dict) or v is None for v in conds.values()):
                raise ValueError("each parameter condition must be a mapping with test and value")
            data["conditions"] = [{"id": str(k), **(v or {})} for k, v in conds.items()]
        elif conds is None:
            data["conditions"] = []
        return data

    def is_stateful(self) -> bool:
        """A time derivative, an initial value, or a value expression that reads the parameter itself."""
        if self.time_derivative is not None or self.default_initial_value is not None:
            return True
        if isinstance(self.value, str):
            from .expr import referenced_names

            try:
                return self.id in referenced_names(self.value)
            except Exception:  # noqa: BLE001 - a refused expression is reported by the compiler
                return False
        return False


class Node(MdfBase):
    """A node. ``graphs`` (an extension of MDF v0.4) nests whole graphs in the node: they run when
    the node runs, fed from the node's input ports of the same ids, and their output ports are
    visible to the node's expressions as ``<node>.<port>``."""

    id: str
    input_ports: dict[str, InputPort] = Field(default_factory=dict)
    functions: dict[str, Function] = Field(default_factory=dict)
    parameters: dict[str, Parameter] = Field(default_factory=dict)
    output_ports: dict[str, OutputPort] = Field(default_factory=dict)
    graphs: dict[str, Graph] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _ids(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = dict(data)
            for k in ("input_ports", "functions", "parameters", "output_ports", "graphs"):
                if k in data:
                    data[k] = _with_ids(data[k])
        return data


class Edge(MdfBase):
    id: str
    sender: str
    receiver: str
    sender_port: str
    receiver_port: str
    parameters: dict[str, Any] | None = None


class Condition(MdfBase):
    """A graph-scheduler condition: ``type`` and its keyword arguments (node ids, numbers, nested
    conditions, lists of conditions)."""

    type: str
    kwargs: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _args(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = dict(data)
            if "args" in data:  # older spelling
                args = data.pop("args") or {}
                if not isinstance(args, dict):
                    raise ValueError("condition args must be a mapping")
                kw = dict(data.get("kwargs") or {})
                kw.update(args)
                data["kwargs"] = kw
            if data.get("kwargs") is None:
                data["kwargs"] = {}
            if not isinstance(data["kwargs"], dict):
                raise ValueError("condition kwargs must be a mapping")
            data["kwargs"] = {k: _nested_condition(v) for k, v in data["kwargs"].items()}
        return data


def _nested_condition(v: Any) -> Any:
    if isinstance(v, dict) and "type" in v and isinstance(v["type"], str):
        return Condition.model_validate(v)
    if isinstance(v, list):
        return [_nested_condition(x) for x in v]
    return v


class ConditionSet(MdfBase):
    node_specific: dict[str, Condition] | None = None
    termination: dict[str, Condition] | None = None


class Graph(MdfBase):
    id: str
    nodes: dict[str, Node] = Field(default_factory=dict)
    edges: dict[str, Edge] = Field(default_factory=dict)
    parameters: dict[str, Any] | None = None
    conditions: ConditionSet | None = None

    @model_validator(mode="before")
    @classmethod
    def _ids(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = dict(data)
            for k in ("nodes", "edges"):
                if k in data:
                    data[k] = _with_ids(data[k])
        return data

    def get_node(self, node_id: str) -> Node | None:
        return self.nodes.get(node_id)


Node.model_rebuild()


class Model(MdfBase):
    id: str
    format: str | None = MDF_FORMAT
    generating_application: str | None = None
    onnx_opset_version: int | str | None = None
    graphs: dict[str, Graph] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _ids(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = dict(data)
            if "graphs" in data:
                data["graphs"] = _with_ids(data["graphs"])
        return data

    #: the file this model was loaded from (not serialized)
    _path: str | None = None

    @property
    def path(self) -> str | None:
        return self._path

    def graph(self, graph_id: str | None = None) -> Graph:
        if graph_id is None:
            if not self.graphs:
                from ..errors import ValidationError

                raise ValidationError(self._path, "graphs", "the model has no graph")
            return next(iter(self.graphs.values()))
        try:
            return self.graphs[graph_id]
        except KeyError:
            from ..errors import ValidationError

            raise ValidationError(
                self._path, "graphs", f"no graph {graph_id!r} (graphs: {', '.join(self.graphs)})"
            ) from None


def graph_from_value(value: Any) -> Graph | None:
    """A nested graph written as a value: ``{"graph_<id>": {...}}``, ``{"id":..., "nodes":...}`` or a
    Graph; else None."""
    from pydantic import ValidationError as PydValidationError

    try:
        return _graph_from_value(value)
    except PydValidationError as e:
        err = e.errors()[0]
        raise ValueError(f"nested graph: {'.'.join(map(str, err.get('loc', ())))}: {err.get('msg')}") from None


def _graph_from_value(value: Any) -> Graph | None:
    if isinstance(value, Graph):
        return value
    if isinstance(value, dict):
        if "nodes" in value:
            return Graph.model_validate({"id": value.get("id", "graph"), **value})
        if len(value) == 1:
            ((k, v),) = value.items()
            if isinstance(v, dict) and "nodes" in v:
                return Graph.model_validate({"id": v.get("id", k), **v})
    return None
