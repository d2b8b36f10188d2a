"""Episode hooks through the env's relay: wrappers, reward shaping, firstresult; and the
rule that every hook spec is documented for plugin authors and called by the core."""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

import pytest

import agentsgym
from agentsgym import RewardTerm, hookimpl, hookspecs
from agentsgym.testing import run_cli
from agentsgym_classical.tictactoe import TicTacToeEnv
from agentsgym_classical.tictactoe_agents import HeuristicAgent
from agentsgym_scaffold import install_plugin
from envs_for_tests import CountdownEnv, CountingAgent

DOCS = Path(__file__).resolve().parents[1] / "docs" / "plugin-authors.md"


def spec_names() -> list[str]:
    return [
        name
        for name, fn in inspect.getmembers(hookspecs, inspect.isfunction)
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
        assert re.search(rf"^### `{name}", text, re.M), (
            f"docs/plugin-authors.md lacks a section for {name}"
        )


def recording_plugin(hook_names: list[str]) -> str:
    """Source of a plugin module implementing these hooks with their specs' parameters:
    each records that it was called and answers None (a firstresult hook falls through to
    the env's own implementation)."""
    lines = ["from agentsgym import hookimpl", "", "CALLED = set()"]
    for name in hook_names:
        params = ", ".join(inspect.signature(getattr(hookspecs, name)).parameters)
        lines += ["", "", "@hookimpl", f"def {name}({params}):", f"    CALLED.add({name!r})"]
    return "\n".join(lines) + "\n"


def test_every_hook_spec_is_called_by_the_core(site: Path) -> None:
    # Installed as a distribution: the command line calls its register_* hooks (the
    # commands when it builds the app, the rest when list-envs builds the registry); an
    # env that takes it as a plugin calls its episode hooks while playing.
    install_plugin(site, "agentsgym-recorder", "agentsgym_recorder", recording_plugin(spec_names()))
    listed = run_cli("list-envs")
    assert listed.code == 0, listed.output
    recorder = importlib.import_module("agentsgym_recorder")
    env = CountdownEnv(env_config={}, plugins=[recorder])
    episode = env.run_trial([{"start": 2}], CountingAgent()).episodes[0]
    assert episode.error is None and episode.num_turns == 2
    # the role hooks are called only for an env that declares roles
    assert sorted(recorder.CALLED) == sorted(set(spec_names()) - {"turn_role", "role_rewards"})
    two_roles = TicTacToeEnv(env_config={}, plugins=[recorder])
    played = two_roles.run_trial([{"seed": 0}], HeuristicAgent()).episodes
    assert [e.role for e in played] == ["x", "o"] and all(e.ok for e in played)
    assert sorted(recorder.CALLED) == sorted(spec_names())


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
        env_config={},
        plugins=[bonus, FormatPenalty()],
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
        {"right": True, "seen_by_wrapper": "2"},
        {"right": True, "seen_by_wrapper": "1"},
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


class StepWitness:
    """Sees the step index and the full reply; gives a list of terms."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, str, bool]] = []

    @hookimpl(wrapper=True)
    def step_episode(self, step, reply):
        self.seen.append((step, reply.text, reply.truncated))
        return (yield)

    @hookimpl
    def reward_shaping(self, step):
        return [RewardTerm("a", 0.1), RewardTerm("b", 0.01 * step)]


class OutcomeAtLimit:
    """Pays partial credit when the runner truncates; records every finish call."""

    def __init__(self) -> None:
        self.calls: list[tuple[bool, str | None, bool]] = []

    @hookimpl
    def finish_episode(self, env, state, truncated, error, session_id):
        self.calls.append((truncated, error, session_id in env.sessions))
        return RewardTerm("partial", 0.3) if truncated else None


def test_step_episode_gets_the_step_index_and_reply_and_terms_may_be_a_list() -> None:
    witness = StepWitness()
    env = CountdownEnv(env_config={}, plugins=[witness])
    episode = env.run_trial([{"start": 2}], CountingAgent()).episodes[0]
    assert witness.seen == [(0, "2", False), (1, "1", False)]
    assert [s.reward_terms for s in episode.steps] == [{"a": 0.1, "b": 0.0}, {"a": 0.1, "b": 0.01}]


def test_finish_episode_runs_once_and_its_term_lands_on_the_last_action() -> None:
    outcome = OutcomeAtLimit()
    tokenizer = agentsgym.load_tokenizer("agentsgym/tiny-chatml")
    env = CountdownEnv(
        tokenizer=tokenizer, env_config={"max_steps_per_episode": 2}, plugins=[outcome]
    )
    # start 5 cannot finish in 2 steps: truncated, so the env pays partial credit
    batch = env.run_trial([{"start": 5}, {"start": 1}], CountingAgent())
    truncated, finished = batch.groups[0].episodes[0], batch.groups[1].episodes[0]
    assert truncated.truncated and not finished.truncated
    assert sorted(outcome.calls) == [(False, None, True), (True, None, True)]
    assert truncated.steps[-1].reward_terms == {"partial": 0.3}
    assert truncated.final_reward == pytest.approx(0.5 + 0.5 + 0.3)
    assert truncated.metrics["reward/partial"] == pytest.approx(0.3)
    assert sum(truncated.per_token_rewards) == pytest.approx(truncated.final_reward)
    assert finished.steps[-1].reward_terms == {}


def test_finish_episode_runs_for_a_failed_episode_with_its_error() -> None:
    outcome = OutcomeAtLimit()
    env = CountdownEnv(env_config={}, plugins=[outcome])
    batch = env.run_trial([{"start": 2}], agentsgym.ScriptedAgent(["boom"]))
    assert len(batch.failed) == 1
    assert len(outcome.calls) == 1
    truncated, error, _ = outcome.calls[0]
    assert not truncated and error is not None and "exploded" in error
    assert batch.failed[0].steps == []
