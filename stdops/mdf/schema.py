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

    notes: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _ids(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = dict(data)
            if "nodes" in data:
                data = _graph_node(data)
            for k in ("input_ports", "functions", "parameters", "output_ports", "graphs"):
                if k in data:
                    data[k] = _with_ids(data[k])
            if isinstance(data.get("parameters"), dict):
                data["parameters"] = {k: _plain_parameter(k, v) for k, v in data["parameters"].items()}
        return data


def _graph_node(data: dict) -> dict:
    """A node written as PsyNeuLink writes a nested composition (the node holds ``nodes``, ``edges``,
    ``conditions`` and graph ``parameters`` of its own) -> a node whose ``graphs`` holds that graph."""
    nid = str(data.get("id", "graph"))
    graph = {"id": nid}
    for k in ("nodes", "edges", "conditions", "notes"):
        if k in data:
            graph[k] = data.pop(k)
    ports = ("input_ports", "functions", "output_ports")
    if "parameters" in data and not any(data.get(k) for k in ports):
        graph["parameters"] = data.pop("parameters")  # the composition's own (graph) parameters
    graphs = dict(_with_ids(data.get("graphs")) or {})
    graphs[nid] = graph
    data["graphs"] = graphs
    return data


def _plain_parameter(pid: str, v: Any) -> Any:
    """MDF v0.1-v0.3 wrote parameters as plain values (``"rate": 1.5``): a value that is not a mapping
    becomes ``{value: ...}``. A mapping stays a Parameter (see Model._legacy for old files' dict values)."""
    if isinstance(v, (dict, Parameter)):
        return v
    return {"id": pid, "value": v}


class Edge(MdfBase):
    id: str
    name: str | None = None  # NeuroML exports name their edges
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
            if "args" in data:  # older spelling: keyword arguments, or a list of positional ones
                args = data.pop("args")
                kw = dict(data.get("kwargs") or {})
                if isinstance(args, (list, tuple)):
                    kw["args"] = list(args)
                elif isinstance(args, dict):
                    kw.update(args)
                elif args is not None:
                    raise ValueError("condition args must be a mapping or a list")
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
    notes: str | None = None
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
                if format_version(data.get("format")) < (0, 4):
                    data["graphs"] = {k: _legacy_graph(g) for k, g in data["graphs"].items()}
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


def format_version(fmt: Any) -> tuple[int, int]:
    """``"ModECI MDF v0.4.13"`` -> (0, 4); a file that does not say is taken as current."""
    import re

    m = re.search(r"v(\d+)\.(\d+)", fmt) if isinstance(fmt, str) else None
    return (int(m.group(1)), int(m.group(2))) if m else (0, 4)


def _legacy_graph(g: Any) -> Any:
    """MDF v0.1-v0.3: a parameter written as a mapping that has none of Parameter's fields is a plain
    (dict) value, e.g. an ACT-R chunk."""
    if not isinstance(g, dict) or not isinstance(g.get("nodes"), dict):
        return g
    fields = set(Parameter.model_fields) - {"id", "metadata"}
    nodes = {}
    for nid, n in g["nodes"].items():
        if isinstance(n, dict):
            n = dict(n)
            if isinstance(n.get("parameters"), dict):
                n["parameters"] = {
                    k: {"value": v} if isinstance(v, dict) and not set(v) & fields else v
                    for k, v in n["parameters"].items()
                }
            if "nodes" in n:
                n = _legacy_graph(n)
        nodes[nid] = n
    return {**g, "nodes": nodes}


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


def unknown_field_report(obj: Any, where: str = "") -> list[tuple[str, str, list[str]]]:
    """(json path of the object, unknown field, the object's real fields) for every field the MDF 0.4 schema
    does not define, anywhere in ``obj``."""
    out: list[tuple[str, str, list[str]]] = []
    if isinstance(obj, MdfBase):
        known = sorted(type(obj).model_fields)
        for name in sorted(obj.model_extra or {}):
            out.append((where or "(model)", name, known))
        for name in type(obj).model_fields:
            out.extend(unknown_field_report(getattr(obj, name), f"{where}.{name}" if where else name))
    elif isinstance(obj, dict):
        for k, v in obj.items():
            if isinstance(v, (MdfBase, dict, list)):
                out.extend(unknown_field_report(v, f"{where}.{k}"))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out.extend(unknown_field_report(v, f"{where}.{getattr(v, 'id', i)}"))
    return out


def closest_field(name: str, fields: list[str]) -> str | None:
    import difflib

    hits = difflib.get_close_matches(name, fields, n=1, cutoff=0.6)
    return hits[0] if hits else None


def check_fields(model: Model, path: str | None = None, *, strict: bool = True) -> None:
    """Fields the schema does not know. A misspelt one (a real field is close to it: ``time_derivativ``,
    ``output_port``) is an error naming it and the closest real field ("did you mean time_derivative?"),
    unless ``strict`` is False; every other unknown field (a producer's own key, YAML anchors kept under a
    key of their own) is a warning (MdfWarning) and is kept."""
    import warnings

    report = unknown_field_report(model)
    if not report:
        return
    if strict:
        from ..errors import ValidationError

        misspelt = [(w, n, closest_field(n, [k for k in known if k != "id"])) for w, n, known in report]
        misspelt = [m for m in misspelt if m[2] is not None]
        if misspelt:
            where, name, best = misspelt[0]
            more = f" ({len(misspelt) - 1} more misspelt field(s))" if len(misspelt) > 1 else ""
            raise ValidationError(
                path,
                f"{where}.{name}" if where != "(model)" else name,
                f"unknown field {name!r}: did you mean {best}?{more} (load(..., strict=False) keeps unknown "
                f"fields with a warning)",
            )
    from .io import MdfWarning

    by_place: dict[str, list[str]] = {}
    for where, name, _ in report:
        by_place.setdefault(where, []).append(name)
    for where, names in by_place.items():
        warnings.warn(
            f"{path + ': ' if path else ''}{where}: unknown field(s) {', '.join(names)} (kept)",
            MdfWarning,
            stacklevel=4,
        )
