"""From a condition as a file writes it (``{"type": "EveryNCalls", "kwargs": {...}}``, graph-scheduler's
positional ``args`` as PsyNeuLink writes them, older PsyNeuLink names) to a Condition object of
:mod:`stdops.mdf.conditions`; errors name the JSON path."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from ..errors import ValidationError
from .conditions import (  # every condition the table names
    AfterCall,
    AfterConsiderationSetExecution,
    AfterEnvironmentSequence,
    AfterEnvironmentStateUpdate,
    AfterNCalls,
    AfterNCallsCombined,
    AfterNConsiderationSetExecutions,
    AfterNEnvironmentSequences,
    AfterNEnvironmentStateUpdates,
    AfterNPasses,
    AfterPass,
    All,
    AllHaveRun,
    Always,
    Any_,
    AtConsiderationSetExecution,
    AtEnvironmentSequence,
    AtEnvironmentSequenceNStart,
    AtEnvironmentSequenceStart,
    AtEnvironmentStateUpdate,
    AtEnvironmentStateUpdateNStart,
    AtEnvironmentStateUpdateStart,
    AtNCalls,
    AtPass,
    BeforeConsiderationSetExecution,
    BeforeEnvironmentStateUpdate,
    BeforeNCalls,
    BeforePass,
    Condition,
    EveryNCalls,
    EveryNPasses,
    JustRan,
    Never,
    Not,
    NWhen,
    Threshold,
    TimeInterval,
    TimeTermination,
    WhenFinished,
    WhenFinishedAll,
    WhenFinishedAny,
    parse_time_scale,
)

#: condition type name -> class or factory
CONDITIONS: dict[str, Callable[..., Condition]] = {
    c.__name__: c
    for c in (
        Always,
        Never,
        All,
        Not,
        NWhen,
        EveryNCalls,
        JustRan,
        AllHaveRun,
        WhenFinished,
        WhenFinishedAny,
        WhenFinishedAll,
        Threshold,
        TimeInterval,
        TimeTermination,
        AfterNCallsCombined,
        BeforeNCalls,
        AtNCalls,
        AfterCall,
        AfterNCalls,
        BeforeConsiderationSetExecution,
        AtConsiderationSetExecution,
        AfterConsiderationSetExecution,
        AfterNConsiderationSetExecutions,
        BeforePass,
        AtPass,
        AfterPass,
        AfterNPasses,
        EveryNPasses,
        BeforeEnvironmentStateUpdate,
        AtEnvironmentStateUpdate,
        AfterEnvironmentStateUpdate,
        AfterNEnvironmentStateUpdates,
        AtEnvironmentSequence,
        AfterEnvironmentSequence,
        AfterNEnvironmentSequences,
        AtEnvironmentStateUpdateStart,
        AtEnvironmentStateUpdateNStart,
        AtEnvironmentSequenceStart,
        AtEnvironmentSequenceNStart,
    )
}
CONDITIONS.update(
    {
        "Any": Any_,
        "And": All,
        "Or": Any_,
        # older (PsyNeuLink) names
        "AtTrial": AtEnvironmentStateUpdate,
        "BeforeTrial": BeforeEnvironmentStateUpdate,
        "AfterTrial": AfterEnvironmentStateUpdate,
        "AfterNTrials": AfterNEnvironmentStateUpdates,
        "AtTimeStep": AtConsiderationSetExecution,
        "BeforeTimeStep": BeforeConsiderationSetExecution,
        "AfterTimeStep": AfterConsiderationSetExecution,
        "AfterNTimeSteps": AfterNConsiderationSetExecutions,
        "AtRun": AtEnvironmentSequence,
        "AfterRun": AfterEnvironmentSequence,
        "AfterNRuns": AfterNEnvironmentSequences,
        "AtTrialStart": AtEnvironmentStateUpdateStart,
        "AtTrialNStart": AtEnvironmentStateUpdateNStart,
        "AtRunStart": AtEnvironmentSequenceStart,
        "AtRunNStart": AtEnvironmentSequenceNStart,
    }
)


def build_condition(cond: Any, node_ids: set, where: str, path: str | None) -> Condition:
    """A schema Condition (or dict) -> a Condition object; errors name ``where``."""
    from .schema import Condition as SchemaCondition

    if isinstance(cond, dict):
        cond = SchemaCondition.model_validate(cond)
    if not isinstance(cond, SchemaCondition):
        raise ValidationError(path, where, f"expected a condition, got {cond!r}")
    factory = CONDITIONS.get(cond.type)
    if factory is None:
        raise ValidationError(path, f"{where}.type", f"unknown condition type {cond.type!r}")
    sig = inspect.signature(factory)
    params = sig.parameters
    kwargs: dict[str, Any] = {}
    positional: list = []
    for k, v in cond.kwargs.items():
        if k == "args" and "args" not in params:
            # graph-scheduler's positional arguments, as PsyNeuLink writes them: kwargs: {args: [...]}
            vals = v if isinstance(v, (list, tuple)) else [v]
            positional = [_arg(x, node_ids, f"{where}.kwargs.args.{i}", path) for i, x in enumerate(vals)]
            continue
        if k == "dependencies" and "dependencies" not in params and "dependency" in params:
            k = "dependency"
        kwargs[k] = _arg(v, node_ids, f"{where}.kwargs.{k}", path)
    var_pos = next((n for n, p in params.items() if p.kind is p.VAR_POSITIONAL), None)
    args: list = []
    if var_pos is not None and var_pos in kwargs:
        v = kwargs.pop(var_pos)
        args = list(v) if isinstance(v, (list, tuple)) else [v]
    if positional and var_pos is not None:
        args = positional + args
    elif positional:
        names = [n for n, p in params.items() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        if len(positional) > len(names):
            raise ValidationError(
                path, f"{where}.kwargs.args", f"{cond.type} takes {len(names)} arguments, {len(positional)} given"
            )
        for n, v in zip(names, positional):
            if n in kwargs:
                raise ValidationError(path, f"{where}.kwargs.{n}", f"{cond.type}: {n} given twice")
            kwargs[n] = v
    for k in ("dependency",):
        if k in kwargs and isinstance(kwargs[k], str) and kwargs[k] not in node_ids:
            raise ValidationError(path, f"{where}.kwargs", f"{cond.type}: no node {kwargs[k]!r}")
    for k in kwargs:
        if k not in params or params[k].kind is inspect.Parameter.VAR_POSITIONAL:
            raise ValidationError(
                path, f"{where}.kwargs.{k}", f"{cond.type} takes no argument {k!r} (arguments: {', '.join(params)})"
            )
    for d in args:
        if isinstance(d, str) and d not in node_ids:
            raise ValidationError(path, f"{where}.kwargs", f"{cond.type}: no node {d!r}")
    for k in ("n", "threshold", "atol", "rtol"):
        if k in kwargs and (isinstance(kwargs[k], bool) or not isinstance(kwargs[k], (int, float))):
            raise ValidationError(path, f"{where}.kwargs.{k}", f"{cond.type}: {k} must be a number, not {kwargs[k]!r}")
    for k in ("dependency", "parameter", "comparator"):
        if k in kwargs and not isinstance(kwargs[k], str):
            raise ValidationError(path, f"{where}.kwargs.{k}", f"{cond.type}: {k} must be a name, not {kwargs[k]!r}")
    try:
        return factory(*args, **kwargs)
    except (TypeError, ValueError) as e:
        raise ValidationError(path, where, f"{cond.type}: {e}") from None


def _arg(v: Any, node_ids: set, where: str, path: str | None) -> Any:
    from .schema import Condition as SchemaCondition

    if isinstance(v, SchemaCondition):
        return build_condition(v, node_ids, where, path)
    if isinstance(v, dict) and "type" in v:
        return build_condition(v, node_ids, where, path)
    if isinstance(v, dict) and "id" in v:  # a node written as an object
        return v["id"]
    if isinstance(v, list):
        return [_arg(x, node_ids, f"{where}.{i}", path) for i, x in enumerate(v)]
    if isinstance(v, str) and v not in node_ids:
        try:
            return parse_time_scale(v)
        except ValueError:
            return v
    return v
