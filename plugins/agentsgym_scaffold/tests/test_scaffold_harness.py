"""`agentsgym new-env --harness`: a harness env package (agentsgym-gateway's HarnessEnv
running an unmodified openai client program, and a verifier of its answer file) that
installs into a fresh venv, passes `agentsgym check-env` and its own tests."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from agentsgym_scaffold import (
    FILES,
    HARNESS_FILES,
    ScaffoldError,
    package_names,
    render_package,
    write_package,
)
from scaffold_venvs import ChildVenv, new_env_installed

ENV_ID = "lab/Spell-Back-v0"


@pytest.fixture(scope="module")
def installed_harness(tmp_path_factory: pytest.TempPathFactory) -> tuple[ChildVenv, Path]:
    """A --harness package, written by the CLI and pip-installed into a fresh venv, with
    the test environment's agentsgym-gateway and openai (installing needs no download)."""
    pytest.importorskip("agentsgym_gateway", reason="the harness package depends on it")
    pytest.importorskip("openai", reason="the harness package's program uses it")
    root = tmp_path_factory.mktemp("scaffold-harness")
    return new_env_installed(root, "lab/Spell-Back", "--harness")


@pytest.mark.timeout(300)
def test_the_harness_package_installs_and_depends_on_the_gateway(installed_harness) -> None:
    venv, package = installed_harness
    assert "agentsgym-lab" in venv.distributions()
    meta = venv.metadata("agentsgym-lab", "agentsgym_gateway", cwd=package.parent)
    requires = {r.split(">=")[0] for r in meta["requires"] if "extra ==" not in r}
    assert requires == {"agentsgym", "agentsgym-gateway", "openai"}, meta["requires"]
    # the program ships in the wheel, next to the env that runs it
    program = venv.run("-c", "import agentsgym_lab.env as e; print(e.PROGRAM.is_file())")
    assert program.stdout.strip() == "True", program.stderr


@pytest.mark.timeout(300)
def test_the_installed_harness_env_passes_check_env(installed_harness) -> None:
    venv, _ = installed_harness
    result = venv.run("-m", "agentsgym", "check-env", ENV_ID)
    assert result.returncode == 0, result.stdout + result.stderr
    out = " ".join(result.stdout.split())  # the console wraps long lines
    assert f"{ENV_ID} passes check_env" in out and "FAIL" not in out
    assert "ok programs end within episode_timeout_seconds and exit 0" in out
    assert "ok the verifier returns a finite reward (rewards 1)" in out
    assert "skip finish_episode runs once per episode" in out


@pytest.mark.timeout(300)
def test_the_harness_packages_own_tests_pass(installed_harness) -> None:
    venv, package = installed_harness
    assert "8 passed" in venv.passing_tests(package)


# ------------------------------------------------------------------ rendering, no install
def test_harness_has_its_own_env_program_agent_and_tests_and_shares_the_rest() -> None:
    tomllib = pytest.importorskip("tomllib")
    names = package_names("acme/Maze")
    plain, harness = render_package(names), render_package(names, harness=True)
    assert set(harness) == set(plain) | {"src/agentsgym_acme/program.py"}
    assert {p for p in HARNESS_FILES if HARNESS_FILES[p] != FILES.get(p)} == {
        "src/${package}/env.py",
        "src/${package}/program.py",
        "src/${package}/agent.py",
        "tests/test_env.py",
    }
    for path, text in harness.items():
        assert "${" not in text, f"{path} has an unfilled placeholder"
        if path.endswith(".py"):
            ast.parse(text, filename=path)
    requires = tomllib.loads(harness["pyproject.toml"])["project"]["dependencies"]
    assert [r.split(">=")[0] for r in requires] == ["agentsgym", "agentsgym-gateway", "openai"]
    assert "new-env acme/Maze --harness" in harness["README.md"]
    # the program is unmodified: a plain openai client, nothing of agentsgym
    program = harness["src/agentsgym_acme/program.py"]
    assert "from openai import OpenAI" in program and "import agentsgym" not in program
    env = ast.parse(harness["src/agentsgym_acme/env.py"])
    (cls,) = [n for n in env.body if isinstance(n, ast.ClassDef) and n.name == "MazeEnv"]
    assert [b.id for b in cls.bases if isinstance(b, ast.Name)] == ["HarnessEnv"]
    methods = {n.name: n for n in cls.body if isinstance(n, ast.FunctionDef)}
    for method in ("program", "prepare", "verify", "get_train_dataset", "get_eval_dataset"):
        assert method in methods and ast.get_docstring(methods[method]), method
    # the plain package knows nothing of the gateway
    assert not any("agentsgym_gateway" in t or "agentsgym-gateway" in t for t in plain.values())


def test_tools_and_harness_together_are_refused_before_anything_is_written(tmp_path) -> None:
    with pytest.raises(ScaffoldError, match="--tools and --harness"):
        write_package("acme/Maze", tmp_path / "pkg", tools=True, harness=True)
    assert not (tmp_path / "pkg").exists()
