"""The shape of the code: a small core, layered imports, plugins on the public API.

The layer contracts live in the workspace pyproject.toml ([tool.importlinter]) and
are drawn in docs/architecture.md.
"""

from __future__ import annotations

import ast
import importlib
import re
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

import pytest
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[1]
CORE_SRC = REPO / "core" / "src" / "agentsgym"
SATELLITES = sorted(p for p in (REPO / "plugins").iterdir() if (p / "pyproject.toml").exists())
MAX_CORE_LINES = 10_000
HEAVY = {"torch", "trl", "ray", "fastapi", "uvicorn"}


def test_every_import_contract_is_kept(capsys: pytest.CaptureFixture[str]) -> None:
    from importlinter.application.use_cases import lint_imports
    from importlinter.configuration import configure

    configure()
    kept = lint_imports(config_filename=str(REPO / "pyproject.toml"), cache_dir=None, no_logo=True)
    report = capsys.readouterr().out
    assert kept, report
    assert re.search(r"Contracts: (\d+) kept, 0 broken", report), report
    assert int(re.search(r"Contracts: (\d+) kept", report).group(1)) >= 10  # type: ignore[union-attr]


def test_the_core_is_at_most_ten_thousand_lines() -> None:
    lines = sum(len(p.read_text().splitlines()) for p in CORE_SRC.rglob("*.py"))
    assert lines <= MAX_CORE_LINES, f"core/src holds {lines} lines of Python"


def _requirement_closure(name: str, seen: set[str]) -> None:
    """The names of every distribution ``name`` needs, installed or not (no extras)."""
    key = name.lower().replace("_", "-")
    if key in seen:
        return
    seen.add(key)
    try:
        requires = distribution(name).requires or []
    except PackageNotFoundError:
        return
    for line in requires:
        requirement = Requirement(line)
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        _requirement_closure(requirement.name, seen)


def test_installing_the_core_brings_no_heavy_dependency() -> None:
    needed: set[str] = set()
    _requirement_closure("agentsgym", needed)
    assert "transformers" in needed and "pluggy" in needed  # the walk does find things
    assert not HEAVY & needed, f"pip install agentsgym brings {sorted(HEAVY & needed)}"


@pytest.mark.parametrize("plugin", SATELLITES, ids=lambda p: p.name)
def test_plugins_import_only_names_the_core_exports(plugin: Path) -> None:
    """import-linter checks the modules; this checks the names: a plugin imports from a
    public core module only what that module lists in ``__all__``."""
    for path in (plugin / "src").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.ImportFrom) and node.module):
                continue
            if node.module != "agentsgym" and not node.module.startswith("agentsgym."):
                continue
            module = importlib.import_module(node.module)
            exported = set(getattr(module, "__all__", ()))
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                is_public_module = node.module == "agentsgym" and re.fullmatch(r"\w+", alias.name)
                if alias.name in exported or (is_public_module and _is_module(submodule)):
                    continue
                pytest.fail(f"{path.relative_to(REPO)}: {alias.name} is not in {node.module}.__all__")


def _is_module(name: str) -> bool:
    try:
        importlib.import_module(name)
    except ImportError:
        return False
    return True


@pytest.mark.parametrize("plugin", SATELLITES, ids=lambda p: p.name)
def test_every_plugin_distribution_has_its_pyproject_readme_tests_and_entry_point(
    plugin: Path,
) -> None:
    pyproject = (plugin / "pyproject.toml").read_text()
    assert '[project.entry-points.agentsgym]' in pyproject, plugin.name
    assert (plugin / "README.md").read_text().strip(), f"{plugin.name} has an empty README"
    assert list((plugin / "tests").glob("test_*.py")), f"{plugin.name} has no tests"
    dependencies = re.search(r"dependencies = \[(.*?)\]", pyproject, re.S)
    assert dependencies and '"agentsgym>=' in dependencies.group(1)
