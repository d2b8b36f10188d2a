"""Episode hooks through the env's relay: wrappers, reward shaping, firstresult; and the
rule that every hook spec is documented for plugin authors and exercised by a test."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest
from envs_for_tests import CountdownEnv, CountingAgent

import agentsgym
from agentsgym import RewardTerm, hookimpl, hookspecs

DOCS = Path(__file__).resolve().parents[1] / "docs" / "plugin-authors.md"
TESTS = Path(__file__).resolve().parent


def spec_names() -> list[str]:
    return [
        name for name, fn in inspect.getmembers(hookspecs, inspect.isfunction)
        if hasattr(fn, "agentsgym_spec")
    ]


def test_every_hook_spec_has_a_full_docstring() -> None:
    for name in spec_names():
        doc = inspect.getdoc(getattr(hookspecs, name)) or ""
        params = [p for p in inspect.signature(getattr(hookspecs, name)).parameters]
        assert "Called" in doc, f"{name}: docstring must say when it is called"
        assert ":return:" in doc, f"{name}: docstring must say what it returns"
        for param in params:
            assert f":param {param}:" in doc, f"{name}: docstring must describe {param}"


def test_every_hook_spec_is_documented_for_plugin_authors() -> None:
    text = DOCS.read_text()
    for name in spec_names():
        assert re.search(rf"^### `{name}", text, re.M), f"docs/plugin-authors.md lacks a section for {name}"


def test_every_hook_spec_is_exercised_by_a_test() -> None:
    sources = "\n".join(p.read_text() for p in TESTS.glob("test_*.py") if p.name != "test_hooks.py")
    sources += (TESTS / "fake_dists.py").read_text() + (TESTS / "envs_for_tests.py").read_text()
    here = Path(__file__).read_text()
    for name in spec_names():
        assert f"def {name}(" in sources + here, f"no test implements the {name} hook"


class PromptObserver:
    """Observes prompts; returning None lets the env's own implementation answer."""

    def __init__(self) -> None:
        self.steps: list[int] = []

    @hookimpl(tryfirst=True)
    def format_prompt(self, env, state, step):
        self.steps.append(step)
        return None


class ActionRecorder:
    @hookimpl(wrapper=True)
    def step_episode(self, env, state, action):
        result = yield
        next_state, reward, done, info = result
        return next_state, reward, done, {**info, "seen_by_wrapper": action}


class BrevityBonus:
    def __init__(self) -> None:
        self.calls = 0

    @hookimpl
    def reward_shaping(self, env, state, action, step_result):
        self.calls += 1
        return RewardTerm("brevity", 0.25) if len(action) <= 2 else None


class FormatPenalty:
    @hookimpl
    def reward_shaping(self, state, action):
        return ("format", -0.1)


def test_reward_shaping_terms_add_to_step_rewards_and_are_kept_per_term() -> None:
    bonus = BrevityBonus()
    env = CountdownEnv(
        tokenizer=agentsgym.load_tokenizer("agentsgym/tiny-chatml"),
        env_config={}, plugins=[bonus, FormatPenalty()],
    )
    episode = env.run_trial([{"start": 2}], CountingAgent()).episodes[0]
    assert bonus.calls == 2
    assert [s.reward_terms for s in episode.steps] == [{"brevity": 0.25, "format": -0.1}] * 2
    assert episode.metrics["reward/brevity"] == pytest.approx(0.5)
    assert episode.metrics["reward/format"] == pytest.approx(-0.2)
    assert episode.metrics["reward/env"] == pytest.approx(2.0)
    assert episode.final_reward == pytest.approx(2.0 + 0.5 - 0.2)
    assert sum(episode.per_token_rewards) == pytest.approx(episode.final_reward)


def test_a_wrapper_alters_a_step_without_subclassing() -> None:
    observer = PromptObserver()
    env = CountdownEnv(env_config={}, plugins=[ActionRecorder(), observer])
    episode = env.run_trial([{"start": 2}], CountingAgent()).episodes[0]
    assert [s.info for s in episode.steps] == [
        {"right": True, "seen_by_wrapper": "2"}, {"right": True, "seen_by_wrapper": "1"},
    ]
    assert observer.steps == [0, 1] and episode.messages[1]["content"] == "Say 2."


def test_firstresult_lets_a_plugin_replace_initialisation() -> None:
    class FixedStart:
        @hookimpl
        def initialize_episode(self, env, session_id, task_data):
            return {"next": 1}

    env = CountdownEnv(env_config={}, plugins=[FixedStart()])
    episode = env.run_trial([{"start": 3}], CountingAgent()).episodes[0]
    assert episode.num_turns == 1 and episode.messages[1]["content"] == "Say 1."


def test_env_hook_relay_is_per_instance() -> None:
    plain = CountdownEnv(env_config={})
    shaped = CountdownEnv(env_config={}, plugins=[FormatPenalty()])
    assert plain.run_trial([{"start": 1}], CountingAgent()).final_rewards == [1.5]
    assert shaped.run_trial([{"start": 1}], CountingAgent()).final_rewards == [pytest.approx(1.4)]
