"""`agentsgym new-env --tools`: a tool env package (agentsgym-tools' ToolEnv and a
ScriptedToolAgent solver) that installs into a fresh venv and passes its own tests; the
plain package stays as it was."""

from __future__ import annotations

import ast
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import agentsgym
from agentsgym_scaffold import FILES, TOOL_FILES, package_names, render_package, write_package
from scaffold_venvs import TOOLS_CHECKOUT, ChildVenv, new_env_installed


@pytest.fixture(scope="module")
def installed_tools(tmp_path_factory: pytest.TempPathFactory) -> tuple[ChildVenv, Path]:
    """A --tools package, written by the CLI and pip-installed into a fresh venv."""
    return new_env_installed(tmp_path_factory.mktemp("scaffold-tools"), "lab/Word-Score", "--tools")


@pytest.mark.timeout(300)
def test_the_tool_package_installs_and_uses_the_checkouts_agentsgym_tools(installed_tools) -> None:
    venv, package = installed_tools
    assert "agentsgym-lab" in venv.distributions()
    meta = venv.metadata("agentsgym-lab", "agentsgym_tools", cwd=package.parent)
    assert any(r.startswith("agentsgym-tools") for r in meta["requires"]), meta["requires"]
    # the test environment's editable install of the checkout, else a copy installed from it
    from_checkout = Path(meta["file"]).resolve().is_relative_to(TOOLS_CHECKOUT)
    assert from_checkout or "agentsgym-tools" in venv.distributions(), meta["file"]


@pytest.mark.timeout(300)
def test_the_tool_packages_own_tests_pass(installed_tools) -> None:
    # check_env with the solver (text, and token ids), the tool turns, Error: tool messages
    venv, package = installed_tools
    assert "10 passed" in venv.passing_tests(package)


# ------------------------------------------------------------------ rendering, no install
def test_tools_replaces_the_env_agent_and_tests_and_shares_the_rest() -> None:
    tomllib = pytest.importorskip("tomllib")
    names = package_names("acme/Maze")
    plain, tools = render_package(names), render_package(names, tools=True)
    assert set(tools) == set(plain)
    differ = {path for path in plain if plain[path] != tools[path]}
    assert differ == {
        "src/agentsgym_acme/env.py",
        "src/agentsgym_acme/agent.py",
        "tests/test_env.py",
        "pyproject.toml",
        "README.md",
        "src/agentsgym_acme/plugin.py",
        "src/agentsgym_acme/tasks.py",
    }
    assert {p for p in TOOL_FILES if TOOL_FILES[p] != FILES[p]} == {
        "src/${package}/env.py",
        "src/${package}/agent.py",
        "tests/test_env.py",
    }
    for path, text in tools.items():
        assert "${" not in text, f"{path} has an unfilled placeholder"
        if path.endswith(".py"):
            ast.parse(text, filename=path)
    requires = tomllib.loads(tools["pyproject.toml"])["project"]["dependencies"]
    assert [r.split(">=")[0] for r in requires] == ["agentsgym", "agentsgym-tools"]
    assert "new-env acme/Maze --tools" in tools["README.md"]
    # the plain package knows nothing of tools
    assert not any("agentsgym_tools" in t or "agentsgym-tools" in t for t in plain.values())
    assert tomllib.loads(plain["pyproject.toml"])["project"]["dependencies"] == [
        names.agentsgym_requirement
    ]


def test_the_tool_env_declares_a_documented_tool_and_hooks() -> None:
    env = render_package(package_names("acme/Maze"), tools=True)["src/agentsgym_acme/env.py"]
    tree = ast.parse(env)
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    tool_doc = ast.get_docstring(functions["scrabble_score"]) or ""
    assert "Args:\n    word:" in tool_doc  # Google style: transformers derives the schema
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "MazeEnv"]
    assert [ast.unparse(b) for b in cls.bases] == ["ToolEnv"]
    methods = {n.name: n for n in cls.body if isinstance(n, ast.FunctionDef)}
    for hook in ("initialize_episode", "format_prompt", "step_episode"):
        assert hook in methods and ast.get_docstring(methods[hook]), hook


@pytest.fixture
def rendered_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A --tools package written to tmp_path and imported in this process (not installed)."""
    names, root, _ = write_package("inproc/Word-Score", tmp_path / "pkg", tools=True)
    monkeypatch.syspath_prepend(str(root / "src"))
    yield names
    for module in [m for m in sys.modules if m.split(".")[0] == names.package]:
        del sys.modules[module]


def test_the_rendered_tool_env_plays_in_process(
    rendered_tools, agentsgym_register_env: Callable[..., Any]
) -> None:
    from agentsgym_inproc.agent import WordScoreAgent
    from agentsgym_inproc.env import WordScoreEnv

    agentsgym_register_env(rendered_tools.env_id, WordScoreEnv)
    env = agentsgym.make(rendered_tools.env_id, tokenizer=agentsgym.DEFAULT_TOKENIZER)
    tasks = env.get_train_dataset(size=2)["task_data"]
    agent = WordScoreAgent(env.tokenizer, token_out=True)
    batch = env.run_trial(tasks, agent, num_rollouts=2)
    assert not batch.failed and batch.final_rewards == [1.0] * 4
    assert {step.token_source for e in batch.episodes for step in e.steps} == {"unchecked"}
    # without a tokenizer its calls come structured, as from a chat server: retokenized
    structured = env.run_trial(tasks, WordScoreAgent(), num_rollouts=1)
    assert structured.final_rewards == [1.0] * 2
    assert all(len(e.segments) == 1 for e in structured.episodes)
    assert {s.token_source for e in structured.episodes for s in e.steps} == {"retokenized"}
    episode = batch.episodes[0]
    calls = env.config.num_candidates
    assert [m["role"] for m in episode.messages] == [
        "system",
        "user",
        "assistant",
        *["tool"] * calls,
        "assistant",
    ]
    assert episode.steps[0].info["tool_calls"] == calls


def test_the_tool_env_runs_every_check_of_check_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No check is skipped for the scaffold's sake (the truncation check needs
    max_steps_per_episode=1 to be allowed)."""
    import importlib

    from agentsgym.testing import check_env, register_env

    names, folder, _ = write_package("scaffoldcheck/Word-Score", tmp_path / "pkg", tools=True)
    monkeypatch.syspath_prepend(str(folder / "src"))
    env_module = importlib.import_module(f"{names.package}.env")
    agent_module = importlib.import_module(f"{names.package}.agent")
    env_class = getattr(env_module, names.env_class)
    agent = getattr(agent_module, names.agent_class)()
    with register_env(names.env_id, env_class):
        report = check_env(names.env_id, agent=agent, raise_on_failure=False)
    assert report.passed, report.failures
    assert report.skipped == [], report.skipped
