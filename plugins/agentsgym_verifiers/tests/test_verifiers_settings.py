"""What a wrong setting of a verifiers env says (no verifiers needed)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import agentsgym
from agentsgym.errors import AgentsGymError, RunSettingsError
from agentsgym_verifiers import VerifiersBridgeError, VerifiersEnv


@pytest.mark.parametrize(
    ("url", "canonical"),
    [
        ("verifiers://openenv", "verifiers://openenv"),
        ("VERIFIERS://addition_v1/", "verifiers://addition_v1"),
        ("verifiers://primeintellect/wordle@0.1.2", "verifiers://primeintellect/wordle@0.1.2"),
    ],
)
def test_a_url_names_a_taskset(url: str, canonical: str) -> None:
    env = agentsgym.make(url)
    assert isinstance(env, VerifiersEnv)
    assert env.env_id == canonical
    assert env.taskset_id == canonical.removeprefix("verifiers://")


@pytest.mark.parametrize("url", ["verifiers://", "verifiers://wordle?game=x", "verifiers://a/b/c"])
def test_a_malformed_url_says_what_is_expected(url: str) -> None:
    with pytest.raises(AgentsGymError, match="expected verifiers://TASKSET_ID"):
        agentsgym.make(url)


def test_no_python_says_how_to_make_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENTSGYM_VERIFIERS_PYTHON", raising=False)
    env = agentsgym.make("verifiers://openenv")
    with pytest.raises(RunSettingsError, match="AGENTSGYM_VERIFIERS_PYTHON") as raised:
        env.get_train_dataset()
    assert "pip install verifiers==0.4.0" in str(raised.value)


def test_a_python_that_is_not_there(tmp_path: Path) -> None:
    env = agentsgym.make("verifiers://openenv", env_config={"python": str(tmp_path / "python")})
    with pytest.raises(VerifiersBridgeError, match="could not start verifiers' Python"):
        env.get_train_dataset()


def test_a_python_without_verifiers_says_so() -> None:
    """This venv's python has no verifiers (its pins cannot sit beside agentsgym's)."""
    if _has_verifiers():
        pytest.skip("this python has verifiers installed")
    env = agentsgym.make("verifiers://openenv", env_config={"python": sys.executable})
    try:
        with pytest.raises(VerifiersBridgeError, match="could not start: Module.*verifiers"):
            env.get_train_dataset()
    finally:
        env.close()


def _has_verifiers() -> bool:
    import importlib.util

    return importlib.util.find_spec("verifiers") is not None
