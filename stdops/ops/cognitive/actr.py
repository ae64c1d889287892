"""ACT-R functions of the MDF standard (chunks, patterns, productions as plain dicts).

A chunk ``{"name": n, "ISA": t, slot: value, ...}`` is matched *positionally*: its values after
``name`` (ISA first) are slots 0, 1, 2, ... A pattern is a dict whose first entry (``buffer``) is
skipped; its values become slot tests:

- a literal ``v`` must equal the slot, ``!v`` must differ;
- ``=x`` binds variable ``x`` at its first occurrence; later occurrences must equal the binding;
- ``-=x`` must differ from ``x``'s binding (checked after every binding is made);
- ``?`` (or an empty slot) matches anything.

Slots compare as strings. ``match_production`` records the bindings on the production (as the
reference does); ``update_buffer`` substitutes them into the production's right-hand side.
"""

from __future__ import annotations

import random
import re
from typing import Any

from .._registry import op

__all__ = [
    "chunk_to_string",
    "pattern_to_string",
    "change_goal",
    "retrieve_chunk",
    "match_production",
    "pattern_matching_function",
    "update_buffer",
    "update_goal",
    "update_retrieval",
    "conflict_resolution_function",
    "check_termination",
]


@op("mdf:chunk_to_string")
def chunk_to_string(chunk):
    """The chunk's slot values (without ``name``) joined by spaces."""
    return " ".join(str(v) for k, v in dict(chunk).items() if k != "name")


@op("mdf:pattern_to_string")
def pattern_to_string(pattern):
    """The pattern's values after the first (the buffer) joined by spaces; ``-=x`` -> ``!?x``,
    ``=x`` -> ``?x``."""
    return " ".join(str(v) for v in list(dict(pattern).values())[1:]).replace("-=", "!?").replace("=", "?")


@op("mdf:change_goal")
def change_goal(pattern, curr_goal):
    """The current goal updated with the pattern's entries (without ``buffer``). Returns a new dict
    (the reference updates ``curr_goal`` in place)."""
    if isinstance(curr_goal, (int, float)) and curr_goal == 0:
        return {}
    goal = dict(curr_goal)
    goal.update(pattern)
    goal.pop("buffer", None)
    return goal


# -- matching ----------------------------------------------------------------------------------

_LIT = re.compile(r"[\w.\-]+")
_NOT_LIT = re.compile(r"!([\w.\-]+)")
_VAR = re.compile(r"\?(\w+)")
_NOT_VAR = re.compile(r"!\?(\w+)")
_NAMED = re.compile(r"([?]?[\w.]+):")


def _slots(chunk: Any) -> dict | None:
    """A chunk (dict, string or positional mapping) -> {slot key: value string}; None for none."""
    if chunk is None:
        return None
    if isinstance(chunk, str):
        text = chunk
    elif isinstance(chunk, dict) and chunk and all(isinstance(k, int) for k in chunk):
        return {k: _text(v) for k, v in chunk.items()}
    elif isinstance(chunk, dict):
        text = chunk_to_string(chunk)
    else:
        return None
    out: dict = {}
    for i, tok in enumerate(text.split()):
        key: Any = i
        if ":" in tok:
            key, tok = tok.split(":", 1)
            key = int(key) if key.isdigit() else key
        out[key] = tok
    return out


def _text(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:g}"
    return v if isinstance(v, str) else repr(v)


class _Fail(Exception):
    pass


def _compile_pattern(patterns: dict) -> tuple[list, list]:
    """{buffer or None: pattern string} -> (ordered tests, deferred tests)."""
    first: list = []
    later: list = []
    seen: set = set()
    for buf, pat in patterns.items():
        named = False
        for j, text in enumerate(str(pat).split()):
            key: Any = j
            m = _NAMED.match(text)
            if m:
                key = m.group(1)
                key = int(key) if key.isdigit() else key
                text = text[m.end() :]
                if not text:
                    raise ValueError(f"no value for slot {key!r} in pattern {pat!r}")
                named = True
            elif named:
                raise ValueError(f"unnamed slot {text!r} after a named slot in pattern {pat!r}")
            if text == "?":
                continue
            while text:
                m = _LIT.match(text)
                if m:
                    first.append(("eq", buf, key, m.group(0)))
                    text = text[m.end() :]
                    continue
                m = _NOT_LIT.match(text)
                if m:
                    first.append(("ne", buf, key, m.group(1)))
                    text = text[m.end() :]
                    continue
                m = _VAR.match(text)
                if m:
                    v = m.group(1)
                    if v in seen:
                        later.append(("eqv", buf, key, v))
                    else:
                        seen.add(v)
                        first.append(("bind", buf, key, v))
                    text = text[m.end() :]
                    continue
                m = _NOT_VAR.match(text)
                if m:
                    later.append(("nev", buf, key, m.group(1)))
                    text = text[m.end() :]
                    continue
                raise ValueError(f"unknown text {text!r} in pattern {pat!r}")
    return first, later


def _match(patterns: dict, context: dict) -> dict | None:
    """Bindings when every test passes, else None."""
    first, later = _compile_pattern(patterns)
    b: dict = {}

    def get(buf: Any, key: Any) -> str:
        chunk = context if buf is None else context.get(buf, _MISSING)
        if chunk is _MISSING or chunk is None or key not in chunk:
            raise _Fail
        return chunk[key]

    try:
        for kind, buf, key, arg in first + later:
            v = get(buf, key)
            if kind == "eq" and v != arg:
                return None
            if kind == "ne" and v == arg:
                return None
            if kind == "bind":
                b[arg] = v
            if kind in ("eqv", "nev"):
                if arg not in b:
                    return None
                if (kind == "eqv") != (v == b[arg]):
                    return None
    except _Fail:
        return None
    return b


_MISSING = object()


@op("mdf:retrieve_chunk")
def retrieve_chunk(pattern, dm_chunks, types):
    """The first chunk of declarative memory matching the pattern, as {"ISA": type, slot: value}
    with slot names from ``types``; ``{}`` for an empty pattern or no match."""
    if not pattern:
        return {}
    pat = pattern_to_string(pattern)
    for chunk in dm_chunks:
        slots = _slots(chunk)
        if slots is not None and _match({None: pat}, slots) is not None:
            values = [slots[k] for k in sorted(k for k in slots if isinstance(k, int))]
            isa = values[0]
            out = {"ISA": isa}
            for i in range(1, len(values)):
                out[types[isa][i - 1]] = values[i]
            return out
    return {}


@op("mdf:match_production")
def match_production(production, context):
    """True when the production's left-hand side matches the buffers in ``context``
    ({buffer: chunk}); the bindings are stored in ``production["bindings"]``."""
    patterns = {}
    for p in production["lhs"]:
        patterns[p["buffer"]] = pattern_to_string(p)
    b = _match(patterns, {k: _slots(v) for k, v in dict(context).items()})
    if b is None:
        return False
    production["bindings"] = b
    return True


@op("mdf:pattern_matching_function")
def pattern_matching_function(productions, goal, retrieval):
    """The productions whose left-hand sides match the goal and retrieval buffers."""
    context = {"goal": chunk_to_string(goal), "retrieval": chunk_to_string(retrieval) if retrieval != {} else None}
    return [p for p in productions if match_production(p, context)]


@op("mdf:conflict_resolution_function")
def conflict_resolution_function(productions, rng=None):
    """One of the matched productions chosen at random (``{}`` when there is none); ``rng`` is a
    numpy Generator (the simulation's, seedable)."""
    if len(productions) == 0:
        return {}
    if rng is None:
        return random.choice(list(productions))
    return productions[int(rng.integers(len(productions)))]


@op("mdf:update_buffer")
def update_buffer(production, buffer):
    """The production's last right-hand-side entry for ``buffer``, bindings substituted."""
    if len(production) == 0:
        return {}
    pattern: dict = {}
    for p in production["rhs"]:
        if p["buffer"] == buffer:
            pattern = dict(p)
    bindings = production.get("bindings", {})
    for k, v in list(pattern.items()):
        name = str(v).replace("=", "")
        if name in bindings:
            pattern[k] = bindings[name]
    return pattern


@op("mdf:update_goal")
def update_goal(production):
    """update_buffer(production, "goal")"""
    return update_buffer(production, "goal")


@op("mdf:update_retrieval")
def update_retrieval(production):
    """update_buffer(production, "retrieval")"""
    return update_buffer(production, "retrieval")


@op("mdf:check_termination")
def check_termination(production):
    """True when no production was selected (``production == {}``)."""
    return isinstance(production, dict) and len(production) == 0
