"""The errors a user can cause. Every one names the file and the place in it.

A ``StdopsError`` is what the CLI prints as one line (exit status 2); anything else
escaping stdops is a bug in stdops.
"""

from __future__ import annotations


class StdopsError(Exception):
    """Base of every error caused by the user's input (model, feeds, options)."""

    #: True once the message names the file and the place (an inner plan or expression gave them): the
    #: enclosing scopes pass the error on as it is
    located: bool = False


class ModelFormatError(StdopsError):
    """A model file (or proto) that is malformed: truncated, corrupt, wrong magic,
    a missing or unknown attribute, a reference to a value nothing produces."""

    def __init__(self, path: str | None, where: str | None, message: str):
        self.path, self.where, self.detail = path, where, message
        parts = [p for p in (path, where) if p]
        super().__init__(f"{': '.join(parts)}: {message}" if parts else message)


class UnsupportedOp(StdopsError):
    """An operator (domain, type, version) that no kernel binds."""

    def __init__(
        self, domain: str, op_type: str, version: int | None, where: str | None = None, path: str | None = None
    ):
        self.domain, self.op_type, self.version, self.path, self.where = domain, op_type, version, path, where
        dom = domain or "ai.onnx"
        ver = f" (opset {version})" if version is not None else ""
        loc = ": ".join(p for p in (path, where) if p)
        super().__init__(f"{loc + ': ' if loc else ''}unsupported operator {dom}:{op_type}{ver}")


class OpError(StdopsError):
    """A kernel refused its inputs (bad shapes, out-of-range indices, ...) while running a node."""

    def __init__(self, node: str, op: str, cause: BaseException | str, path: str | None = None):
        self.node, self.op, self.cause, self.path = node, op, cause, path
        what = cause if isinstance(cause, str) else f"{type(cause).__name__}: {cause}"
        loc = f"{path}: " if path else ""
        super().__init__(f"{loc}node {node!r} ({op}): {what}")


class InputError(StdopsError):
    """A feed that does not fit the model: unknown name, missing, wrong rank/shape/dtype."""


class ValidationError(StdopsError):
    """A model document (MDF) whose field at a JSON path is invalid."""

    def __init__(self, path: str | None, json_path: str, message: str):
        self.path, self.json_path = path, json_path
        loc = f"{path}: " if path else ""
        super().__init__(f"{loc}{json_path}: {message}")


class KernelError(ValueError):
    """Raised by a kernel for inputs it cannot accept. The graph turns it into an OpError
    naming the node; called directly, it is a plain ValueError with a clear message."""


class ResourceLimitError(StdopsError):
    """An operation would allocate more than the configured limit (see stdops.limits)."""


class SharedStateError(StdopsError):
    """An object that belongs to one thread at a time (an MDF ``Simulation``: it holds the run's state) was
    used by a second thread while the first was using it. A loaded model can be shared; a simulation cannot."""
