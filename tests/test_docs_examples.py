"""docs/plugin-authors.md is tested as readers see it.

Fenced blocks whose first line is ``# file: PATH`` are the files of the guide's
example package: they are written out as they are, pip-installed into a fresh venv,
and must pass ``agentsgym check-env`` and the package's own tests. Every other Python
block runs, in the order of the guide, in one namespace, after the install.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from venvs import ChildVenv

DOC = Path(__file__).resolve().parents[1] / "docs" / "plugin-authors.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
FILE_MARKER = re.compile(r"^# file: (\S+)\n")


@dataclass
class Block:
    language: str
    code: str
    line: int  # line of the opening fence in the guide

    @property
    def path(self) -> str | None:
        match = FILE_MARKER.match(self.code)
        return match.group(1) if match else None


def blocks() -> list[Block]:
    text = DOC.read_text()
    return [
        Block(m.group(1), m.group(2), text.count("\n", 0, m.start()) + 1)
        for m in FENCE.finditer(text)
    ]


def package_files() -> dict[str, str]:
    return {b.path: b.code for b in blocks() if b.path}


def snippets() -> list[Block]:
    return [b for b in blocks() if b.language == "python" and not b.path]


def test_the_guide_has_the_example_package_and_runnable_snippets() -> None:
    files = package_files()
    assert {"pyproject.toml", "src/agentsgym_myenv/env.py", "src/agentsgym_myenv/plugin.py",
            "src/agentsgym_myenv/agent.py", "tests/test_env.py"} <= set(files)
    layout = next(b.code for b in blocks() if b.code.startswith("agentsgym-myenv/"))
    for path in files:
        assert Path(path).name in layout, f"{path} is missing from the package layout block"
    assert len(snippets()) >= 6
    for block in blocks():
        if block.language == "python":
            ast.parse(block.code, filename=f"{DOC.name}:{block.line}")


def test_the_pyproject_example_is_complete() -> None:
    tomllib = pytest.importorskip("tomllib")
    pyproject = tomllib.loads(package_files()["pyproject.toml"])
    assert pyproject["build-system"]["build-backend"] == "hatchling.build"
    assert pyproject["project"]["version"]  # setuptools and hatchling both require it
    assert pyproject["project"]["entry-points"]["agentsgym"] == {"myenv": "agentsgym_myenv.plugin"}


def test_the_guide_documents_the_rules_authors_asked_about() -> None:
    text = DOC.read_text()
    for needle in (
        "from agentsgym import RewardTerm",           # the import is shown
        "**`None` on the first call of a",           # agent_state starts as None
        "context: EpisodeContext | None = None",      # the optional context keyword
        "**never copies it**",                        # state ownership
        "`batch.group_indices[i]` is the task",       # the flat padded layout
        "padded **per group**",
        "hook_timeout_seconds",
        "`async def` hooks are awaited",
        "global_random(rng)",
    ):
        assert needle in text, needle


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> tuple[ChildVenv, Path]:
    """The guide's package, written from its file blocks and pip-installed into a venv."""
    root = tmp_path_factory.mktemp("docs")
    package = root / "agentsgym-myenv"
    for path, code in package_files().items():
        target = package / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(code)
    init = package / "src" / "agentsgym_myenv" / "__init__.py"
    if not init.exists():  # "may be empty", says the layout
        init.write_text("")
    venv = ChildVenv(root / "venv")
    result = venv.pip_install(str(package))
    assert result.returncode == 0, result.stdout + result.stderr
    return venv, package


@pytest.mark.timeout(300)
def test_the_example_package_installs_and_registers_its_envs(example) -> None:
    venv, _ = example
    listed = venv.run("-m", "agentsgym", "list-envs", "--json")
    assert listed.returncode == 0, listed.stderr
    ids = {item.get("id"): item for item in json.loads(listed.stdout)}
    assert ids["myns/MyEnv-v0"]["distribution"] == "agentsgym-myenv"
    assert ids["myns/MyEnv-v0-hard"]["default_agent"] == "myns/guesser"


@pytest.mark.timeout(300)
def test_the_example_env_passes_check_env_and_its_tests(example) -> None:
    venv, package = example
    checked = venv.run("-m", "agentsgym", "check-env", "myns/MyEnv-v0")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = venv.run("-m", "pytest", "-q", "-p", "no:cacheprovider", cwd=package)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "3 passed" in tested.stdout


RUNNER = '''
import sys
import traceback

for line, code in BLOCKS:
    try:
        exec(compile(code, f"docs/plugin-authors.md (block at line {line})", "exec"), globals())
    except BaseException:
        traceback.print_exc()
        print(f"the guide's Python block at line {line} failed", file=sys.stderr)
        sys.exit(1)
    print(f"ok {line}")
'''


@pytest.mark.timeout(300)
def test_every_python_example_of_the_guide_runs(example, tmp_path: Path) -> None:
    venv, _ = example
    script = tmp_path / "run_guide.py"
    payload = [(b.line, b.code) for b in snippets()]
    script.write_text(f"BLOCKS = {payload!r}\n{RUNNER}")
    result = venv.run(str(script), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.split() == [w for b in snippets() for w in ("ok", str(b.line))]
