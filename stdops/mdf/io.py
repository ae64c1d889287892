"""Reading and writing MDF files (JSON and YAML).

``load(path)`` parses the file, validates it against the schema (errors name the JSON path, e.g.
``graphs.g1.nodes.A.parameters.rate.value``), warns about fields the schema does not know, and
checks that every reference and expression compiles (see :mod:`stdops.mdf.engine`). ``save`` writes
the same ``{model_id: {...}}`` form back; ``load(save(m))`` gives an equal model.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

import numpy as np

from .. import limits
from ..errors import ModelFormatError, StdopsError, ValidationError
from .schema import Condition, MdfBase, Model

MAX_FILE_BYTES = 512 * 1024 * 1024


class MdfWarning(UserWarning):
    """Something in an MDF file that stdops accepts but reports (an unknown field)."""


def _read_text(path: str) -> str:
    try:
        size = os.path.getsize(path)
        if size > MAX_FILE_BYTES:
            raise ModelFormatError(path, None, f"file of {size} bytes is larger than the {MAX_FILE_BYTES} byte limit")
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ModelFormatError(path, None, f"cannot read: {e.strerror or e}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ModelFormatError(path, f"byte {e.start}", "not UTF-8 text (not an MDF JSON/YAML file)") from None


def parse_text(text: str, path: str | None = None, fmt: str | None = None) -> Any:
    """JSON or YAML text -> plain data (YAML with the safe loader: no tags, no objects)."""
    if fmt is None:
        ext = os.path.splitext(path or "")[1].lower()
        fmt = "yaml" if ext in (".yaml", ".yml") else "json" if ext == ".json" else None
    if fmt in (None, "json"):
        try:
            return json.loads(text)
        except json.JSONDecodeError as e:
            if fmt == "json":
                raise ModelFormatError(path, f"line {e.lineno} column {e.colno}", f"malformed JSON: {e.msg}") from None
        except RecursionError:
            raise ModelFormatError(path, None, "JSON nested too deeply") from None
        except ValueError as e:  # an integer beyond Python's int-from-text bound (4300 digits)
            raise ModelFormatError(path, _long_number_at(text), f"a number that cannot be read: {e}") from None
    import yaml

    try:
        data = yaml.load(text, Loader=_yaml_loader())  # noqa: S506 - a SafeLoader subclass
    except RecursionError:
        raise ModelFormatError(path, None, "YAML nested too deeply") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1} column {mark.column + 1}" if mark is not None else None
        raise ModelFormatError(path, where, f"malformed YAML: {getattr(e, 'problem', None) or e}") from None
    except Exception as e:  # noqa: BLE001 - a tag the text does not fit (!!int abc, !!timestamp x), a huge int
        raise ModelFormatError(
            path, _long_number_at(text), f"a YAML value cannot be read: {type(e).__name__}: {e}"
        ) from None
    cap = limits.get().max_yaml_nodes
    if _expanded_size(data, {}, path) > cap:
        raise ModelFormatError(
            path,
            None,
            f"YAML aliases expand to more than {cap} values (raise the limit with "
            f"stdops.limits.configure(max_yaml_nodes=...) or {limits.ENV['max_yaml_nodes']})",
        )
    return data


def _long_number_at(text: str) -> str | None:
    """'line L column C' of the first run of more than 4300 digits (what Python refuses to read), if any."""
    m = re.search(r"\d{4301}", text)
    if m is None:
        return None
    line = text.count("\n", 0, m.start()) + 1
    return f"line {line} column {m.start() - (text.rfind(chr(10), 0, m.start()) + 1) + 1}"


MAX_YAML_ALIASES = 1000


def _expanded_size(obj, memo: dict, path: str | None = None) -> int:
    """How many values ``obj`` holds once every alias is expanded (linear time via memo; a value that
    contains itself, ``&a [*a]``, is refused: it would expand for ever)."""
    if not isinstance(obj, (list, dict)):
        return 1
    k = id(obj)
    if k in memo:
        if memo[k] is None:
            raise ModelFormatError(path, None, "a YAML alias refers to a value that contains it (a cycle)")
        return memo[k]
    memo[k] = None  # on the path being measured
    items = obj.values() if isinstance(obj, dict) else obj
    n = 1 + sum(_expanded_size(v, memo, path) for v in items)
    memo[k] = n
    return n


def _yaml_loader():
    """A safe YAML loader (libyaml's when available). Alias bombs are refused after loading by
    ``_expanded_size``; the pure-Python loader also stops after MAX_YAML_ALIASES aliases."""
    import yaml

    if getattr(yaml, "__with_libyaml__", False):
        return yaml.CSafeLoader

    class Loader(yaml.SafeLoader):
        _aliases = 0

        def compose_node(self, parent, index):
            if self.check_event(yaml.AliasEvent):
                self._aliases += 1
                if self._aliases > MAX_YAML_ALIASES:
                    raise yaml.YAMLError(f"more than {MAX_YAML_ALIASES} YAML aliases")
            return super().compose_node(parent, index)

    return Loader


def _loc_to_path(loc: tuple) -> str:
    parts = []
    for p in loc:
        if isinstance(p, str) and (p.startswith("function-") or p in ("function-after", "function-before")):
            continue
        parts.append(str(p))
    return ".".join(parts)


def model_from_data(data: Any, path: str | None = None, *, warn: bool = True, strict: bool = True) -> Model:
    """``{model_id: {...}}`` (or a dict with an ``id``) -> a validated Model. A field the schema does not
    know is an error naming the closest real one (``strict``), or a warning (``strict=False``)."""
    from pydantic import ValidationError as PydValidationError

    if not isinstance(data, dict) or not data:
        raise ModelFormatError(path, None, "not an MDF model: expected a mapping {model_id: {...}}")
    if "graphs" in data and "id" in data:
        body = data
    else:
        if len(data) != 1:
            raise ModelFormatError(
                path, None, f"not an MDF model: expected one top-level entry {{model_id: {{...}}}}, found {len(data)}"
            )
        ((mid, body),) = data.items()
        if not isinstance(body, dict):
            raise ValidationError(path, str(mid), "expected a mapping with the model's fields")
        body = {"id": str(mid), **body}
    try:
        model = Model.model_validate(body)
    except PydValidationError as e:
        err = e.errors()[0]
        where = _loc_to_path(tuple(err.get("loc", ())))
        n = len(e.errors())
        more = f" (and {n - 1} more error{'s' if n > 2 else ''})" if n > 1 else ""
        raise ValidationError(path, where or "(model)", f"{err.get('msg')}{more}") from None
    except (ValueError, TypeError, AttributeError) as e:
        raise ValidationError(path, "(model)", f"{type(e).__name__}: {e}") from None
    except (RecursionError, MemoryError):  # a validator's parser giving up on deep nesting
        raise ModelFormatError(path, None, "model nested too deeply") from None
    model._path = path
    if warn:
        from .schema import check_fields

        check_fields(model, path, strict=strict)
    return model


def unknown_fields(obj: Any, where: str = "") -> list[tuple[str, list[str]]]:
    """(json path, [field names]) for every field the schema does not define."""
    out: list[tuple[str, list[str]]] = []
    if isinstance(obj, MdfBase):
        extra = obj.model_extra or {}
        if extra:
            out.append((where or "(model)", sorted(extra)))
        for name in type(obj).model_fields:
            out.extend(unknown_fields(getattr(obj, name), f"{where}.{name}" if where else name))
    elif isinstance(obj, dict):
        for k, v in obj.items():
            if isinstance(v, (MdfBase, dict, list)):
                out.extend(unknown_fields(v, f"{where}.{k}"))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            vid = getattr(v, "id", i)
            out.extend(unknown_fields(v, f"{where}.{vid}"))
    return out


def load(path: Any, *, check: bool = True, strict: bool = True) -> Model:
    """Read an MDF model from a .json or .yaml/.yml file; with ``check``, compile every graph so
    bad references and refused expressions are reported now, naming the file and the field. With
    ``strict`` (the default) an unknown (misspelt) field is an error; ``strict=False`` warns and keeps it."""
    p = os.fspath(path)
    if not os.path.exists(p):
        raise ModelFormatError(p, None, "no such file")
    with limits.budget("load"):
        data = parse_text(_read_text(p), p)
        model = model_from_data(data, p, strict=strict)
        if check:
            from .engine import check_model

            check_model(model)
    return model


def loads(text: str, fmt: str = "json", *, check: bool = True, strict: bool = True) -> Model:
    with limits.budget("load"):
        model = model_from_data(parse_text(text, None, fmt), strict=strict)
        if check:
            from .engine import check_model

            check_model(model)
    return model


def _plain(v: Any) -> Any:
    if isinstance(v, MdfBase):
        return to_data_body(v)
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, tuple):
        return [_plain(x) for x in v]
    if isinstance(v, list):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    return v


#: fields written even when they hold their default
_ALWAYS = {"format", "generating_application"}


def to_data_body(obj: MdfBase) -> dict:
    out: dict[str, Any] = {}
    fields = type(obj).model_fields
    for name in fields:
        if name == "id":
            continue
        v = getattr(obj, name)
        if v is None or (isinstance(v, (dict, list)) and not v and name not in ("kwargs",)):
            continue
        if name == "reduce" and v == "overwrite":
            continue
        if (
            name in ("nodes", "edges", "graphs", "input_ports", "functions", "parameters", "output_ports")
            and isinstance(v, dict)
            and v
            and all(isinstance(x, MdfBase) for x in v.values())
        ):
            out[name] = {k: to_data_body(x) for k, x in v.items()}
        elif name == "conditions" and isinstance(v, list):
            out[name] = {c.id: to_data_body(c) for c in v}
        elif name in ("node_specific", "termination") and isinstance(v, dict):
            out[name] = {k: to_data_body(c) for k, c in v.items()}
        else:
            out[name] = _plain(v)
    for k, v in (obj.model_extra or {}).items():
        out[k] = _plain(v)
    if isinstance(obj, Condition):
        out["kwargs"] = _plain(obj.kwargs)
    return out


def to_data(model: Model) -> dict:
    """A Model -> ``{model_id: {...}}`` plain data (JSON/YAML-ready)."""
    return {model.id: to_data_body(model)}


def save(model: Model, path: Any, fmt: str | None = None) -> None:
    """Write ``model`` as JSON (``.json``) or YAML (``.yaml``/``.yml``)."""
    p = os.fspath(path)
    if fmt is None:
        fmt = "yaml" if os.path.splitext(p)[1].lower() in (".yaml", ".yml") else "json"
    text = dumps(model, fmt)
    try:
        with open(p, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        raise StdopsError(f"{p}: cannot write: {e.strerror or e}") from None


def dumps(model: Model, fmt: str = "json") -> str:
    data = to_data(model)
    if fmt == "json":
        return json.dumps(data, indent=4) + "\n"
    import yaml

    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False)
