"""Modules imported on first use, so that `import stdops` and the CLI start fast (scipy.special alone
costs ~0.15 s to import; a run that never calls erf or expit should not pay it)."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class LazyModule:
    """``special = LazyModule("scipy.special")``; ``special.erf(x)`` imports scipy.special on the first call."""

    def __init__(self, name: str):
        self._name = name
        self._module: ModuleType | None = None

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        if self._module is None:
            self._module = importlib.import_module(self._name)
        return getattr(self._module, attr)
