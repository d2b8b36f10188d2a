"""`agentsgym new-env`: the package it writes installs with pip into a fresh venv, is
found through its entry point, passes `agentsgym check-env` and its own tests."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from agentsgym_scaffold import ScaffoldError
from agentsgym_scaffold import FILES, package_names, render_package
from scaffold_venvs import ChildVenv, new_env_installed

ENV_ID = "acme/Word-Guess-v0"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[ChildVenv, Path]:
    """The scaffold, written by the CLI and pip-installed (not editable) into a fresh venv."""
    return new_env_installed(tmp_path_factory.mktemp("scaffold"), "acme/Word-Guess")


@pytest.mark.timeout(300)
def test_the_package_installs_with_its_metadata_and_entry_point(installed) -> None:
    venv, package = installed
    assert "agentsgym-acme" in venv.distributions()
    meta = venv.metadata("agentsgym-acme", "agentsgym_acme", cwd=package.parent)
    assert meta["version"] == "0.1.0"
    assert any(r.startswith("agentsgym>=") for r in meta["requires"])
    assert ["agentsgym", "acme", "agentsgym_acme.plugin"] in meta["eps"]
    # the installed copy, not the source folder
    assert Path(meta["file"]).is_relative_to(venv.site_packages), meta["file"]


def test_the_pyproject_names_its_build_backend(tmp_path: Path) -> None:
    tomllib = pytest.importorskip("tomllib")
    names = package_names("acme/Maze")
    pyproject = tomllib.loads(render_package(names)["pyproject.toml"])
    assert pyproject["build-system"] == {
        "requires": ["hatchling>=1.25"],
        "build-backend": "hatchling.build",
    }
    assert pyproject["project"]["version"] == "0.1.0"
    assert pyproject["project"]["entry-points"]["agentsgym"] == {"acme": "agentsgym_acme.plugin"}


@pytest.mark.timeout(300)
def test_the_installed_env_is_listed_and_described(installed) -> None:
    venv, _ = installed
    listed = venv.run("-m", "agentsgym", "list-envs", "--json", "--verbose")
    assert listed.returncode == 0, listed.stderr
    item = next(i for i in json.loads(listed.stdout) if i.get("id") == ENV_ID)
    assert item["distribution"] == "agentsgym-acme" and item["version"] == "0.1.0"
    assert item["default_agent"] == "acme/word-guess-scripted"
    keys = {k["key"]: k for k in item["config"]}
    assert keys["num_candidates"]["description"] == "words the secret is hidden among"
    assert keys["max_steps_per_episode"]["default"] == 6


@pytest.mark.timeout(300)
def test_the_installed_env_passes_check_env(installed) -> None:
    venv, _ = installed
    result = venv.run("-m", "agentsgym", "check-env", ENV_ID)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{ENV_ID} passes check_env" in result.stdout
    assert "FAIL" not in result.stdout


@pytest.mark.timeout(300)
def test_the_packages_own_tests_pass(installed) -> None:
    venv, package = installed
    assert "6 passed" in venv.passing_tests(package)


@pytest.mark.timeout(300)
def test_the_default_agent_plays_a_rollout_from_the_cli(installed, tmp_path: Path) -> None:
    venv, _ = installed
    out = tmp_path / "r.jsonl"
    result = venv.run("-m", "agentsgym", "rollout", ENV_ID, "--num-tasks", "2", "--out", str(out))
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 4 and {r["final_reward"] for r in rows} == {1.0}
    assert rows[0]["full_token_ids"]  # the bundled tokenizer by default


# ------------------------------------------------------------------ rendering, no install
def test_every_file_is_rendered_and_every_python_file_parses() -> None:
    files = render_package(package_names("acme/Word-Guess"))
    assert set(files) == {p.replace("${package}", "agentsgym_acme") for p in FILES}
    for path, text in files.items():
        assert "${" not in text, f"{path} has an unfilled placeholder"
        if path.endswith(".py"):
            ast.parse(text, filename=path)


def test_every_episode_hook_is_stubbed_and_documented() -> None:
    from agentsgym import hookspecs

    env = render_package(package_names("acme/Maze"))["src/agentsgym_acme/env.py"]
    tree = ast.parse(env)
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "MazeEnv"]
    methods = {n.name: n for n in cls.body if isinstance(n, ast.FunctionDef)}
    for hook in (
        "initialize_episode",
        "format_prompt",
        "step_episode",
        "reward_shaping",
        "finish_episode",
    ):
        assert hook in methods and ast.get_docstring(methods[hook]), hook
        assert hasattr(hookspecs, hook)
    step_args = {a.arg for a in methods["step_episode"].args.args}
    assert {"step", "reply"} <= step_args


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("acme/Maze", ("acme/Maze-v0", "agentsgym-acme", "agentsgym_acme", "MazeEnv")),
        ("acme/Maze-v3", ("acme/Maze-v3", "agentsgym-acme", "agentsgym_acme", "MazeEnv")),
        (
            "My-Org.ai/2048_game",
            (
                "My-Org.ai/2048_game-v0",
                "agentsgym-my-org-ai",
                "agentsgym_my_org_ai",
                "Env2048GameEnv",
            ),
        ),
        (
            "textarena/word-ladder",
            (
                "textarena/word-ladder-v0",
                "agentsgym-textarena",
                "agentsgym_textarena",
                "WordLadderEnv",
            ),
        ),
    ],
)
def test_names_are_derived_from_namespace_and_name(name: str, expected: tuple[str, ...]) -> None:
    names = package_names(name)
    assert (names.env_id, names.distribution, names.package, names.env_class) == expected
    assert names.package.isidentifier() and names.env_class.isidentifier()
    for path, text in render_package(names).items():
        if path.endswith(".py"):
            ast.parse(text, filename=path)


@pytest.mark.parametrize(
    "bad", ["Maze", "a/b/c", "acme/", "/Maze", "acme/Ma ze", "acme/Maze-v0-x", "AgentsGym/Maze"]
)
def test_bad_names_raise_scaffold_errors(bad: str) -> None:
    with pytest.raises(ScaffoldError):
        package_names(bad)
