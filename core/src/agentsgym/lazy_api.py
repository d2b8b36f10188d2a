"""The names of a public module, kept once: in its ``if TYPE_CHECKING:`` block.

A public module of the core (``agentsgym``, ``agentsgym.runtime``) lists its names in
one place, as ``from MODULE import NAME as NAME`` lines under ``if TYPE_CHECKING:``:
type checkers, editors and the import graph's tools read those imports, and the
module hands each name out on first access (:func:`public_names` reads the same
lines), so that importing it loads nothing else (no plugin, no engine).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Callable
from importlib import import_module
from pathlib import Path
from typing import Any


def _listed(module_file: str) -> dict[str, str]:
    """``{name: module}`` of the imports in the file's top-level TYPE_CHECKING block."""
    where: dict[str, str] = {}
    for node in ast.parse(Path(module_file).read_text(encoding="utf-8")).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name):
            if node.test.id != "TYPE_CHECKING":
                continue
            for line in node.body:
                if isinstance(line, ast.ImportFrom) and line.module and line.level == 0:
                    for alias in line.names:
                        where[alias.asname or alias.name] = line.module
    return where


def public_names(
    module_name: str, module_file: str, *, guide: str
) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """``(__getattr__, __dir__, __all__)`` of the module ``module_name``: its names are
    the imports of its TYPE_CHECKING block; ``guide`` says, in the error for an unknown
    name, where to look."""
    where = _listed(module_file)

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
