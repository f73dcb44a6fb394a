"""Package faces whose names load on first use (PEP 562): importing one light submodule of a package
(kvx.engine.api, kvx.models.resolve) then does not import torch through the package's __init__."""
from __future__ import annotations

import importlib
import sys
from typing import Any, Callable


def lazy_names(package: str, home: dict[str, str]) -> Callable[[str], Any]:
    """A module-level __getattr__ for `package` that imports each name from its home module."""

    def __getattr__(name: str) -> Any:
        if name not in home:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home[name]), name)
        setattr(sys.modules[package], name, value)  # bound once, like an eager import
        return value

    return __getattr__
