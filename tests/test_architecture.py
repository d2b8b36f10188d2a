"""The shape of the code: a core that names no plugin, layered imports, plugins on the
public API. The core's size is reported, not capped.

The layer contracts live in the workspace pyproject.toml ([tool.importlinter]) and
are drawn in docs/architecture.md.
"""

from __future__ import annotations

import ast
import importlib
import re
import sys
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

import pytest
from packaging.requirements import Requirement

tomllib = pytest.importorskip("tomllib" if sys.version_info >= (3, 11) else "tomli")

REPO = Path(__file__).resolve().parents[1]
CORE_SRC = REPO / "core" / "src" / "agentsgym"
PLUGINS = sorted(p for p in (REPO / "plugins").iterdir() if (p / "pyproject.toml").exists())
HEAVY = {"torch", "trl", "ray", "fastapi", "uvicorn"}
PUBLIC_MODULES = {"errors", "testing", "cli", "executors", "runtime"}
"""The core's modules a plugin may import, besides ``agentsgym`` itself."""


def test_every_import_contract_is_kept(capsys: pytest.CaptureFixture[str]) -> None:
    from importlinter.application.use_cases import lint_imports
    from importlinter.configuration import configure

    configure()
    kept = lint_imports(config_filename=str(REPO / "pyproject.toml"), cache_dir=None, no_logo=True)
    report = capsys.readouterr().out
    assert kept, report
    assert re.search(r"Contracts: (\d+) kept, 0 broken", report), report
    assert int(re.search(r"Contracts: (\d+) kept", report).group(1)) >= 10  # type: ignore[union-attr]


def test_the_core_size_is_reported(capsys: pytest.CaptureFixture[str]) -> None:
    """Reported, not capped: the core is small because it holds only what every user
    needs, which the contracts above and below check."""
    modules = sorted(CORE_SRC.rglob("*.py"))
    lines = sum(len(p.read_text().splitlines()) for p in modules)
    with capsys.disabled():
        print(f"\ncore/src/agentsgym: {lines} lines of Python in {len(modules)} modules")
    assert modules and lines > 0


def _plugin_names() -> set[str]:
    """Every plugin distribution's name, and its import package's name."""
    names = set()
    for plugin in PLUGINS:
        project = tomllib.loads((plugin / "pyproject.toml").read_text())["project"]["name"]
        names |= {project, project.replace("-", "_")}
    return names


def test_no_core_module_names_a_plugin_distribution() -> None:
    """Beyond imports (the forbidden contract): no plugin's name in the core's source, so
    that hints, docs strings and tables of who-provides-what live with the plugins."""
    names = _plugin_names()
    assert "agentsgym-serve" in names and "agentsgym_trl" in names  # the walk finds them
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, sorted(names))) + r")\b")
    offenders = [
        f"{path.relative_to(REPO)}:{number}: {match.group(1)}"
        for path in sorted(CORE_SRC.rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        for match in pattern.finditer(line)
    ]
    assert offenders == []


def test_every_core_module_outside_the_public_api_is_protected() -> None:
    """The protected contract lists the core's modules one by one (import-linter cannot
    subtract); a new module must join that list or the public API."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    (protected,) = [c for c in contracts if c["type"] == "protected"]
    listed = set(protected["protected_modules"])
    top_level = {
        p.stem if p.is_file() else p.name
        for p in CORE_SRC.iterdir()
        if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").exists()
    }
    missing = sorted(
        f"agentsgym.{name}"
        for name in top_level - PUBLIC_MODULES
        if f"agentsgym.{name}" not in listed
    )
    assert missing == [], "add them to the protected contract in pyproject.toml"
    assert "agentsgym.*.*" in listed


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


def _declared_closure(name: str, seen: set[str]) -> None:
    """As :func:`_requirement_closure`, reading this repository's distributions from their
    pyproject (as a fresh install would), the others from what is installed."""
    key = name.lower().replace("_", "-")
    folder = REPO / "core" if key == "agentsgym" else REPO / "plugins" / key.replace("-", "_")
    if not key.startswith("agentsgym") or not (folder / "pyproject.toml").exists():
        _requirement_closure(name, seen)
        return
    if key in seen:
        return
    seen.add(key)
    project = tomllib.loads((folder / "pyproject.toml").read_text())["project"]
    for line in project["dependencies"]:
        _declared_closure(Requirement(line).name, seen)


def test_installing_the_gateway_brings_no_fastapi() -> None:
    """The gateway serves on agentsgym-serve's background server, which needs uvicorn
    alone; FastAPI is serve's extra [server] (the env server)."""
    needed: set[str] = set()
    _declared_closure("agentsgym-gateway", needed)
    assert {"agentsgym-serve", "uvicorn", "starlette"} <= needed  # the walk finds them
    assert "fastapi" not in needed, "pip install agentsgym-gateway would bring FastAPI"


@pytest.mark.parametrize("plugin", PLUGINS, ids=lambda p: p.name)
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
                pytest.fail(
                    f"{path.relative_to(REPO)}: {alias.name} is not in {node.module}.__all__"
                )


def _is_module(name: str) -> bool:
    try:
        importlib.import_module(name)
    except ImportError:
        return False
    return True


@pytest.mark.parametrize("plugin", PLUGINS, ids=lambda p: p.name)
def test_every_plugin_distribution_has_its_pyproject_readme_tests_and_entry_point(
    plugin: Path,
) -> None:
    pyproject = (plugin / "pyproject.toml").read_text()
    assert "[project.entry-points.agentsgym]" in pyproject, plugin.name
    assert (plugin / "README.md").read_text().strip(), f"{plugin.name} has an empty README"
    assert list((plugin / "tests").glob("test_*.py")), f"{plugin.name} has no tests"
    dependencies = re.search(r"dependencies = \[(.*?)\]", pyproject, re.DOTALL)
    assert dependencies and '"agentsgym>=' in dependencies.group(1)
