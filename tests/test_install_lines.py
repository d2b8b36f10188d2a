"""Every install line the docs, READMEs, messages and the scaffold give works from a
clone: no agentsgym distribution is on a package index, so a line must install it from
its folder (``pip install -e ./plugins/FOLDER``), together with the folders of the
agentsgym distributions it needs (agentsgym-gateway needs agentsgym-serve)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement

tomllib = pytest.importorskip("tomllib" if sys.version_info >= (3, 11) else "tomli")

REPO = Path(__file__).resolve().parents[1]
FOLDERS = {p.name: p for p in (REPO / "plugins").iterdir() if (p / "pyproject.toml").exists()}
TEXTS = [
    REPO / "README.md",
    *sorted((REPO / "docs").glob("*.md")),
    *sorted((REPO / "plugins").glob("*/README.md")),
    *sorted((REPO / "core" / "src").rglob("*.py")),
    *sorted((REPO / "plugins").glob("*/src/**/*.py")),
    *sorted((REPO / "plugins").glob("*/src/**/*.tmpl")),
]
BY_NAME = re.compile(r"pip install\s+(?:-\S+\s+)*['\"]?(agentsgym-[a-z]+)")
"""An install of an agentsgym distribution by its name (from an index that has none)."""
FROM_FOLDER = re.compile(r"\./plugins/(agentsgym_[a-z]+)")


def needs(folder: str) -> set[str]:
    """The folders of the agentsgym distributions ``folder``'s distribution needs to
    run (its ``dependencies``, transitively; not the core's)."""
    names = {
        tomllib.loads((path / "pyproject.toml").read_text())["project"]["name"]: name
        for name, path in FOLDERS.items()
    }
    project = tomllib.loads((FOLDERS[folder] / "pyproject.toml").read_text())["project"]
    direct = {
        names[Requirement(r).name]
        for r in project.get("dependencies", [])
        if Requirement(r).name in names
    }
    return direct | {deeper for name in direct for deeper in needs(name)}


def install_lines() -> list[tuple[str, str]]:
    """(where, line) of every line that says ``pip install``."""
    found = []
    for path in TEXTS:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if "pip install" in line:
                found.append((f"{path.relative_to(REPO)}:{number}", line))
    return found


def test_no_line_installs_an_agentsgym_distribution_by_name() -> None:
    by_name = [(where, line.strip()) for where, line in install_lines() if BY_NAME.search(line)]
    assert by_name == [], "install from the clone's folder: pip install -e ./plugins/FOLDER"


def test_a_line_that_installs_a_folder_installs_the_folders_it_needs() -> None:
    """On one line (or the line before, in a command continued with a backslash) every
    folder a distribution needs comes before it."""
    lacking = []
    for where, line in install_lines():
        folders = FROM_FOLDER.findall(line)
        for position, folder in enumerate(folders):
            assert folder in FOLDERS, f"{where}: no folder plugins/{folder}"
            missing = needs(folder) - set(folders[:position])
            if missing:
                lacking.append((where, folder, sorted(missing)))
    assert lacking == []


def test_the_scaffold_installs_what_each_kind_needs_from_the_clone() -> None:
    """`new-env --tools` and `--harness` print (and their README says) a line that
    installs the plugin distributions their package depends on, each after those it
    needs: agentsgym-gateway's after agentsgym-serve's."""
    from agentsgym_scaffold.writer import KINDS, clone_install

    for kind in KINDS.values():
        line = clone_install(kind.needs)
        assert line.startswith("pip install -e ./core")
        folders = FROM_FOLDER.findall(line)
        for position, folder in enumerate(folders):
            assert needs(folder) <= set(folders[:position]), (line, folder)
        wanted = {n.replace("-", "_") for n in kind.needs}
        assert wanted <= set(folders) and kind.wording["clone_install"] == line
