"""Env ids, make(), unknown-id hints, untrusted class paths, env_config validation."""

from __future__ import annotations

import inspect

import pytest

import agentsgym
from agentsgym.errors import (
    EnvConfigError,
    RegistrationError,
    UnknownAgentError,
    UnknownEnvError,
    UntrustedClassPathError,
)
from agentsgym.registry import validate_env_id

CLASS_PATH = "envs_for_tests:CountdownEnv"


def test_make_builds_a_registered_env_with_defaults_and_overrides() -> None:
    env = agentsgym.make("agentsgym/GuessTheNumber-v0", env_config={"high": 10})
    assert env.env_id == "agentsgym/GuessTheNumber-v0"
    assert env.config.high == 10 and env.config.low == 1 and env.tokenizer is None
    assert env.env_config["episodes_per_trial"] == 1 and env.env_config["free_shots"] == 0


def test_unknown_id_suggests_close_ids_and_the_namespace_provider() -> None:
    with pytest.raises(UnknownEnvError) as info:
        agentsgym.make("agentsgym/GuessTheNumbr-v0")
    message = str(info.value)
    assert "Did you mean: agentsgym/GuessTheNumber-v0" in message
    assert "Namespace 'agentsgym' is provided by agentsgym" in message


def test_unknown_namespace_says_no_package_provides_it() -> None:
    with pytest.raises(UnknownEnvError, match="No installed package provides namespace 'nope'"):
        agentsgym.make("nope/Thing-v0")


@pytest.mark.parametrize(
    "good", ["a/B-v0", "twentyq/TwentyQuestions-v0-hardcore", "x.y/Some-Name-v12"]
)
def test_valid_ids(good: str) -> None:
    validate_env_id(good)


@pytest.mark.parametrize("bad", ["NoNamespace-v0", "a/B", "a/B-vX", "a/B v0"])
def test_invalid_ids_are_rejected(bad: str) -> None:
    with pytest.raises(RegistrationError, match="namespace/Name-vN"):
        validate_env_id(bad)


def test_class_paths_import_only_when_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    sys.modules.pop("envs_for_tests_untrusted", None)
    with pytest.raises(UntrustedClassPathError, match="allow_class_paths"):
        agentsgym.make("envs_for_tests_untrusted:Thing")
    assert "envs_for_tests_untrusted" not in sys.modules  # no import happened
    env = agentsgym.make(CLASS_PATH, allow_class_paths=True)
    assert type(env).__name__ == "CountdownEnv"
    assert agentsgym.make(CLASS_PATH, allow_class_paths=["envs_for_tests"]).env_id == CLASS_PATH
    for other in (["other."], ["envs_for"]):  # whole dotted names, not prefixes
        with pytest.raises(UntrustedClassPathError):
            agentsgym.make(CLASS_PATH, allow_class_paths=other)
    monkeypatch.setenv("AGENTSGYM_ALLOW_CLASS_PATHS", "envs_for_tests")
    assert agentsgym.make(CLASS_PATH).env_id == CLASS_PATH


def test_env_config_wrong_type_names_field_value_and_type() -> None:
    with pytest.raises(EnvConfigError) as info:
        agentsgym.make("agentsgym/GuessTheNumber-v0", env_config={"max_steps_per_episode": "many"})
    message = str(info.value)
    assert "max_steps_per_episode" in message and "'many'" in message and "str" in message


def test_env_config_unknown_key_suggests_a_close_key_else_lists_them() -> None:
    guess = "agentsgym/GuessTheNumber-v0"
    with pytest.raises(EnvConfigError, match=f"(?s)of {guess}:.*'hgih'.*did you mean 'high'"):
        agentsgym.make(guess, env_config={"hgih": 3})
    with pytest.raises(EnvConfigError, match="'max_step'.*did you mean 'max_steps_per_episode'"):
        agentsgym.make(guess, env_config={"max_step": 3})
    with pytest.raises(EnvConfigError, match="unknown key 'zzz'.*known keys:.*high") as info:
        agentsgym.make(guess, env_config={"zzz": 3})
    assert "GuessTheNumberEnv" not in str(info.value)


def test_free_shots_must_leave_a_scored_episode() -> None:
    with pytest.raises(EnvConfigError, match="free_shots"):
        agentsgym.make(
            "agentsgym/GuessTheNumber-v0", env_config={"episodes_per_trial": 2, "free_shots": 2}
        )


def test_constructor_takes_only_tokenizer_and_env_config() -> None:
    params = inspect.signature(agentsgym.MultistepEnv.__init__).parameters
    assert list(params)[:3] == ["self", "tokenizer", "env_config"]
    for removed in ("prompt", "seed", "env_id", "system_prompt", "train_dataset_size"):
        assert removed not in params
    assert not hasattr(agentsgym.MultistepEnv, "get_rubric")


def test_hook_method_without_marker_is_a_clear_error() -> None:
    class Forgetful(agentsgym.MultistepEnv):
        def step_episode(self, state, action):
            return state, 0.0, True, {}

    with pytest.raises(TypeError, match="Forgetful.step_episode.*@agentsgym.hookimpl"):
        Forgetful()


def test_unknown_agent_suggests_close_names() -> None:
    with pytest.raises(UnknownAgentError, match="Did you mean: scripted"):
        agentsgym.make_agent("scriptd")


def test_seed_in_task_data_makes_episodes_deterministic() -> None:
    env = agentsgym.make("agentsgym/GuessTheNumber-v0")
    agent = agentsgym.make_agent("agentsgym/bisect")
    runs = [env.run_trial([{"seed": 7}, {"seed": 8}], agent).episodes for _ in range(2)]
    assert [e.messages for e in runs[0]] == [e.messages for e in runs[1]]
    assert runs[0][0].messages != runs[0][1].messages
