"""check_env catches envs that break the contract, and names what broke."""

from __future__ import annotations

import asyncio
import random
import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic import Field

import agentsgym
from agentsgym import EnvConfig, MultistepEnv, RewardTerm, StepResult, hookimpl
from agentsgym.randomness import episode_random, global_random
from agentsgym.testing import (
    EnvCheckError,
    SlowAgent,
    check_env,
    register_env,
    run_cli,
)

DETERMINISM = "episodes are deterministic for the same task_data, also concurrently"
TRUNCATION = "episodes cut at max_steps_per_episode are truncated"


def test_builtin_env_passes(agentsgym_check_env) -> None:
    report = agentsgym_check_env("agentsgym/GuessTheNumber-v0")
    assert report.passed and len(report.checks) == 13
    assert {c.name for c in report.checks} >= {
        DETERMINISM,
        "finish_episode runs once per episode",
        "episodes cut at max_steps_per_episode are truncated",
        "step infos are JSON-serialisable",
    }


class Unseeded(MultistepEnv):
    """Ignores task_data's seed: two plays of one task differ."""

    @hookimpl
    def initialize_episode(self, session_id, task_data):
        return random.random()

    @hookimpl
    def format_prompt(self, state, step):
        return f"Number {state:.6f}?"

    @hookimpl
    def step_episode(self, state, action):
        return StepResult(state, 0.0, True, {})

    def get_train_dataset(self):
        return self.make_dataset([{"seed": 1}, {"seed": 2}])

    def get_eval_dataset(self):
        return self.make_dataset([{"seed": 2}])  # overlaps train


def test_contract_breaches_are_all_reported() -> None:
    with register_env("bad/Unseeded-v0", Unseeded, description="breaks the contract"):
        with pytest.raises(EnvCheckError) as info:
            check_env("bad/Unseeded-v0")
        report = check_env("bad/Unseeded-v0", raise_on_failure=False)
    message = str(info.value)
    assert "eval tasks also in train" in message
    assert "different episodes" in message
    assert {c.name for c in report.failures} == {
        "datasets follow the row schema and survive parquet",
        DETERMINISM,
    }


def test_unknown_env_fails_the_first_check() -> None:
    report = check_env("agentsgym/Nope-v0", raise_on_failure=False)
    assert not report.passed and "no env registered" in report.checks[0].detail
    assert len(report.checks) == 1


# ----------------------------------------------------------- randomness under concurrency
class DiceBase(MultistepEnv):
    """Roll a die four times; the prompt shows the rolls so far.

    Subclasses differ only in where the rolls come from. Rolls happen in step_episode,
    after the agent's reply, like a game library that draws on every move.
    """

    @hookimpl
    def format_prompt(self, state: dict[str, Any], step: int) -> str:
        return f"Rolls so far: {state['rolls']}. Roll again?"

    @hookimpl
    def step_episode(self, state: dict[str, Any], step: int) -> StepResult:
        state["rolls"].append(self.roll(state))
        return StepResult(state, float(state["rolls"][-1]), step >= 3, {"roll": state["rolls"][-1]})

    def roll(self, state: dict[str, Any]) -> int:
        raise NotImplementedError

    def get_train_dataset(self) -> Any:
        return self.make_dataset([{"seed": s} for s in (11, 12, 13)])


class GlobalDice(DiceBase):
    """Seeds and draws the process-wide random state: concurrent episodes share it."""

    @hookimpl
    def initialize_episode(self, task_data: dict[str, Any]) -> dict[str, Any]:
        random.seed(task_data["seed"])
        return {"rolls": []}

    def roll(self, state: dict[str, Any]) -> int:
        return random.randint(1, 6)


class EpisodeDice(DiceBase):
    """The same game drawing from the episode's own generator."""

    @hookimpl
    def initialize_episode(self, task_data: dict[str, Any]) -> dict[str, Any]:
        return {"rolls": [], "rng": episode_random(task_data)}

    def roll(self, state: dict[str, Any]) -> int:
        return state["rng"].randint(1, 6)


def library_roll() -> int:
    """Stands for a third-party library that draws from the global `random` itself."""
    return random.randint(1, 6)


class WrappedLibraryDice(EpisodeDice):
    """Calls a global-random library inside global_random(episode's generator)."""

    def roll(self, state: dict[str, Any]) -> int:
        with global_random(state["rng"]):
            return library_roll()


class RollOnSelf(EpisodeDice):
    """Keeps the episode's generator on self: concurrent episodes overwrite it."""

    @hookimpl
    def initialize_episode(self, task_data: dict[str, Any]) -> dict[str, Any]:
        self.rng = episode_random(task_data)
        return {"rolls": []}

    def roll(self, state: dict[str, Any]) -> int:
        return self.rng.randint(1, 6)


def determinism(env_class: type[MultistepEnv]) -> Any:
    with register_env("dice/Dice-v0", env_class, default_agent="scripted"):
        report = check_env("dice/Dice-v0", tokenizer=None, num_tasks=3, raise_on_failure=False)
    return next(c for c in report.checks if c.name == DETERMINISM)


def test_an_env_using_the_global_random_fails_the_determinism_check() -> None:
    result = determinism(GlobalDice)
    assert not result.passed
    assert "episode_random" in result.detail and "global_random" in result.detail


def test_an_env_keeping_episode_state_on_self_fails_the_determinism_check() -> None:
    assert not determinism(RollOnSelf).passed


@pytest.mark.parametrize("env_class", [EpisodeDice, WrappedLibraryDice])
def test_the_same_env_using_the_helpers_passes(env_class: type[MultistepEnv]) -> None:
    result = determinism(env_class)
    assert result.passed, result.detail
    assert "6 episodes, up to 6 at once" in result.detail  # 3 tasks x 2 rollouts


def test_global_random_env_passes_when_played_alone() -> None:
    """The failure comes from concurrency: played one episode at a time it is fine."""
    with register_env("dice/Dice-v0", GlobalDice):
        from agentsgym import ScriptedAgent, make

        env = make("dice/Dice-v0")
        tasks = [{"seed": 11}, {"seed": 12}]
        first = env.run_trial(tasks, ScriptedAgent("roll"), 2, max_concurrency=1)
        second = env.run_trial(tasks, ScriptedAgent("roll"), 2, max_concurrency=1)
    assert [e.messages for e in first.episodes] == [e.messages for e in second.episodes]


class AsyncRoller:
    """An ``async def`` agent: check_env wraps it without blocking the event loop."""

    async def get_action(self, messages, agent_state, *, context=None):
        await asyncio.sleep(0)
        return "roll", (agent_state or 0) + 1


@pytest.mark.parametrize(("env_class", "passes"), [(EpisodeDice, True), (GlobalDice, False)])
def test_the_determinism_check_works_with_an_async_agent(env_class, passes) -> None:
    with register_env("dice/Dice-v0", env_class):
        report = check_env(
            "dice/Dice-v0", agent=AsyncRoller(), tokenizer=None, num_tasks=3, raise_on_failure=False
        )
    result = next(c for c in report.checks if c.name == DETERMINISM)
    assert result.passed is passes, result.detail


def test_slow_agent_passes_context_and_token_ids_through() -> None:
    calls: list[dict[str, Any]] = []

    class Inner:
        wants_prompt_token_ids = True

        def get_action(self, messages, agent_state, *, prompt_token_ids=None, context=None):
            calls.append({"ids": prompt_token_ids, "context": context})
            return "ok", agent_state

    slow = SlowAgent(Inner(), 0.0)
    assert slow.wants_prompt_token_ids
    assert slow.get_action(
        [{"role": "user", "content": "hi"}], None, prompt_token_ids=[1, 2], context="ctx"
    ) == ("ok", None)
    assert calls == [{"ids": [1, 2], "context": "ctx"}]

    class Plain:
        def get_action(self, messages, agent_state, **options):
            return "plain", (agent_state, options)

    # like the runner, context goes only to a get_action that names it
    assert SlowAgent(Plain(), 0.0).get_action([], 3, context="ctx") == ("plain", (3, {}))


# ----------------------------------------------------------- the other hook checks
class Countdown(MultistepEnv):
    """Say 'go' three times. Subclasses break one rule each."""

    @hookimpl
    def initialize_episode(self, task_data: dict[str, Any]) -> dict[str, Any]:
        return {"left": task_data["count"]}

    @hookimpl
    def format_prompt(self, state: dict[str, Any]) -> str:
        return f"{state['left']} to go"

    @hookimpl
    def step_episode(self, state: dict[str, Any], action: str) -> StepResult:
        state["left"] -= 1
        return StepResult(state, 1.0, state["left"] == 0, {"left": state["left"]})

    def get_train_dataset(self) -> Any:
        return self.make_dataset([{"count": 3, "tags": ["a"]}, {"count": 2, "tags": []}])


class Finishing(Countdown):
    finished: ClassVar[list[str]] = []

    @hookimpl
    def finish_episode(self, session_id: str, truncated: bool) -> RewardTerm | None:
        Finishing.finished.append(session_id)
        return RewardTerm("cut", -1.0) if truncated else None


class FinishRaises(Countdown):
    @hookimpl
    def finish_episode(self, state: dict[str, Any], truncated: bool) -> None:
        if truncated:
            raise KeyError("outcome")  # forgot that an episode can be cut


class SetInfo(Countdown):
    @hookimpl
    def step_episode(self, state: dict[str, Any], action: str) -> StepResult:
        state["left"] -= 1
        return StepResult(state, 1.0, state["left"] == 0, {"seen": {action}})


class MutatesTask(Countdown):
    @hookimpl
    def initialize_episode(self, task_data: dict[str, Any]) -> dict[str, Any]:
        task_data["tags"].append("seen")  # the dataset's task, shared by every rollout
        return {"left": task_data["count"]}


class HandToolbox:
    """The core's toolbox protocol written by hand: answers each call of a reply with a
    tool message; ``lenient=False`` raises for a tool it does not know."""

    def __init__(self, schemas: list[dict[str, Any]], lenient: bool = True) -> None:
        self.schemas, self.lenient = schemas, lenient

    async def respond(self, action: Any) -> Any:
        if not action.tool_calls:
            return None
        known = {s["function"]["name"] for s in self.schemas}
        answers = []
        for call in action.tool_calls:
            name = call["function"]["name"]
            if name not in known and not self.lenient:
                raise KeyError(name)
            content = "Error: no such tool" if name not in known else "3"
            answers.append({"role": "tool", "tool_call_id": call["id"], "content": content})
        reply = {"role": "assistant", "content": action.text, "tool_calls": action.tool_calls}
        return reply, answers


def schema(name: str) -> dict[str, Any]:
    parameters = {"type": "object", "properties": {"n": {"type": "integer"}}}
    return {"type": "function", "function": {"name": name, "parameters": parameters}}


class WithTools(Countdown):
    def episode_tools(self, task_data: dict[str, Any]) -> Any:
        return HandToolbox([schema("count"), schema("peek")])


class ToolsThatCrash(Countdown):
    def episode_tools(self, task_data: dict[str, Any]) -> Any:
        return HandToolbox([schema("count")], lenient=False)


class ToolDeclaredTwice(Countdown):
    def episode_tools(self, task_data: dict[str, Any]) -> Any:
        return HandToolbox([schema("count"), schema("count")])


class NamelessTool(Countdown):
    def episode_tools(self, task_data: dict[str, Any]) -> Any:
        return HandToolbox([{"type": "function", "function": {"parameters": {}}}])


TOOLS = "tools are declared and bad calls answered as tool messages"


def test_an_env_whose_tools_answer_bad_calls_passes_the_tool_check() -> None:
    with register_env("count/Countdown-v0", WithTools, default_agent="scripted"):
        report = check_env("count/Countdown-v0", tokenizer=None, raise_on_failure=False)
    assert report.passed, report.failures
    assert {c.name: c.detail for c in report.checks}[TOOLS] == "2 of 2 tasks declare tools"
    with register_env("count/Countdown-v0", Countdown, default_agent="scripted"):
        report = check_env("count/Countdown-v0", tokenizer=None, raise_on_failure=False)
    assert {c.name: c.detail for c in report.checks}[TOOLS] == "the env declares no tools"


@pytest.mark.parametrize(
    ("env_class", "found"),
    [
        (ToolsThatCrash, "a call to an unknown tool failed the episode: KeyError"),
        (ToolDeclaredTwice, "declares a tool twice: ['count', 'count']"),
        (NamelessTool, "are not OpenAI function schemas with names"),
    ],
)
def test_tool_declarations_and_bad_calls_are_checked(
    env_class: type[MultistepEnv], found: str
) -> None:
    assert found in failures(env_class)[TOOLS]


def failures(env_class: type[MultistepEnv]) -> dict[str, str]:
    with register_env("count/Countdown-v0", env_class, default_agent="scripted"):
        report = check_env("count/Countdown-v0", tokenizer=None, raise_on_failure=False)
    return {c.name: c.detail for c in report.failures}


def test_a_well_behaved_env_with_finish_episode_passes() -> None:
    Finishing.finished = []
    assert failures(Finishing) == {}
    assert Finishing.finished  # the env's own implementation ran


def test_finish_episode_that_raises_is_reported() -> None:
    found = failures(FinishRaises)
    assert "KeyError" in found["episodes cut at max_steps_per_episode are truncated"]


def test_non_json_step_info_is_reported_with_its_path() -> None:
    found = failures(SetInfo)
    assert "['seen']: a set" in found["step infos are JSON-serialisable"]


def test_mutating_task_data_is_reported() -> None:
    found = failures(MutatesTask)
    assert "changed its task_data" in found["episodes leave task_data unchanged"]


def test_register_env_refuses_taken_ids_and_local_classes() -> None:
    from agentsgym.errors import RegistrationError

    with (
        pytest.raises(RegistrationError, match="already registered"),
        register_env("agentsgym/GuessTheNumber-v0", Countdown),
    ):
        pass

    class Local(Countdown):
        pass

    with (
        pytest.raises(RegistrationError, match="module level"),
        register_env("count/Local-v0", Local),
    ):
        pass


def test_register_env_fixture(agentsgym_register_env) -> None:
    from agentsgym.registry import get_registry

    spec = agentsgym_register_env("count/Countdown-v0", Countdown, description="test")
    assert get_registry().resolve("count/Countdown-v0") == spec


# ----------------------------------------------------------- skipped checks, closing, -O
class TwoStepsConfig(EnvConfig):
    max_steps_per_episode: int = Field(default=10, ge=2)


class NeedsTwoSteps(Countdown):
    """A config that refuses max_steps_per_episode=1: the truncation check cannot run."""

    config_class = TwoStepsConfig


def test_a_check_that_cannot_run_is_reported_as_skipped_not_ok() -> None:
    with register_env("count/Countdown-v0", NeedsTwoSteps, default_agent="scripted"):
        report = check_env("count/Countdown-v0", tokenizer=None, raise_on_failure=False)
        shown = run_cli("check-env", "count/Countdown-v0", "--tokenizer", "none")
    skipped = {c.name: c.detail for c in report.skipped}
    assert set(skipped) == {
        "token streams keep the fidelity invariants",
        "episodes cut at max_steps_per_episode are truncated",
    }
    assert "refuses max_steps_per_episode=1" in skipped[TRUNCATION]
    assert report.passed and all(c.status == "ok" for c in report.checks if c.name not in skipped)
    assert shown.code == 0, shown.output
    lines = {
        line.split(" ", 1)[0]: line for line in shown.stdout.splitlines() if TRUNCATION in line
    }
    assert list(lines) == ["skip"], shown.stdout
    assert "(13 checks, 2 skipped)" in shown.stdout


class Closing(Countdown):
    """Counts the instances built and closed (check_env must close what it builds)."""

    built: ClassVar[int] = 0
    closed: ClassVar[int] = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        Closing.built += 1

    def close(self) -> None:
        Closing.closed += 1


def test_check_env_closes_every_env_it_builds() -> None:
    Closing.built = Closing.closed = 0
    with register_env("count/Countdown-v0", Closing, default_agent="scripted"):
        report = check_env("count/Countdown-v0", raise_on_failure=False)
    assert report.passed, report.failures
    assert Closing.built > 5 and Closing.closed == Closing.built


def test_a_default_env_close_does_nothing_and_may_be_called_twice() -> None:
    env = agentsgym.make("agentsgym/GuessTheNumber-v0")
    env.close()
    env.close()


def test_failures_are_reported_under_python_dash_o() -> None:
    """Checks fail by raising, not by ``assert`` (which -O removes)."""
    code = "\n".join(
        [
            "import sys",
            "sys.path.insert(0, 'tests')",
            "from test_check_env import MutatesTask",
            "from agentsgym.testing import check_env, register_env",
            "with register_env('count/Countdown-v0', MutatesTask, default_agent='scripted'):",
            "    report = check_env('count/Countdown-v0', tokenizer=None, raise_on_failure=False)",
            "print([c.name for c in report.failures])",
        ]
    )
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, "-O", "-c", code], capture_output=True, text=True, cwd=root, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "episodes leave task_data unchanged" in done.stdout


class InlineButWaits(Countdown):
    """Promises hooks that never wait (run_hooks_inline), and waits in step_episode."""

    run_hooks_inline = True


INLINE = "an env with run_hooks_inline never waits in its hooks"


def test_a_broken_run_hooks_inline_promise_is_reported_to_the_author(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from agentsgym.engine import hook_runtime

    assert INLINE not in failures(InlineButWaits)  # its hooks return at once
    monkeypatch.setattr(hook_runtime, "INLINE_TURN_LIMIT_SECONDS", -1.0)  # every call is slow
    found = failures(InlineButWaits)[INLINE]
    assert "sets run_hooks_inline = True" in found and "stalling every other episode" in found
    assert INLINE not in failures(Countdown)  # worker threads: no promise to keep
