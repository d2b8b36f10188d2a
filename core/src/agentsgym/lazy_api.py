"""The names of a public module, kept once: in its stub.

A public module of the core (``agentsgym``, ``agentsgym.runtime``) lists its names in
one place, its ``.pyi`` stub, as ``from MODULE import NAME as NAME`` lines: type
checkers and editors read the stub, and the module hands each name out on first access
(:func:`public_names`), so that importing it loads nothing else (no plugin, no engine).
This is the layout of Scientific Python's SPEC 1 (``lazy_loader.attach_stub``).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Callable
from importlib import import_module
from pathlib import Path
from typing import Any


def public_names(
    module_name: str, module_file: str, *, guide: str
) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """``(__getattr__, __dir__, __all__)`` of the module ``module_name``, whose names are
    the imports of the stub beside ``module_file``; ``guide`` says, in the error for an
    unknown name, where to look."""
    stub = Path(module_file).with_suffix(".pyi")
    where: dict[str, str] = {}
    for node in ast.parse(stub.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                where[alias.asname or alias.name] = node.module

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}; {guide}")
        if module == module_name:  # `from agentsgym import errors`: a submodule
            value = import_module(f"{module_name}.{name}")
        else:
            value = getattr(import_module(module), name)
        setattr(sys.modules[module_name], name, value)  # the next access is a plain lookup
        return value

    def __dir__() -> list[str]:
        return sorted(where)

    return __getattr__, __dir__, sorted(where)
