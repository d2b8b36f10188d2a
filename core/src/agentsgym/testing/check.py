"""check_env: the contract test env authors run in their own CI (``agentsgym check-env
ENV_ID`` runs the same checks; docs/plugin-authors.md lists what they check).

Every check records a result instead of raising, so that one failure does not hide the
others; only the first two (the id resolves, the env builds) stop the rest.
"""

from __future__ import annotations

import copy
import json
import logging
import math
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentsgym.agents import FunctionAgent, ScriptedAgent
from agentsgym.errors import EnvConfigError
from agentsgym.factory import DEFAULT_TOKENIZER, load_tokenizer, make
from agentsgym.hookspecs import hookimpl
from agentsgym.registry import EnvSpec, env_class, get_registry
from agentsgym.rows import parse_rows
from agentsgym.testing.agents import slow_agent
from agentsgym.trajectory import Episode, TrajectoryBatch
from agentsgym.types import AgentAction

if TYPE_CHECKING:
    from agentsgym.env import MultistepEnv

logger = logging.getLogger(__name__)

__all__ = ["CheckReport", "CheckResult", "EnvCheckError", "check_env"]


class EnvCheckError(AssertionError):
    """check_env found the env breaking the contract; the message lists every failure."""


@dataclass
class CheckResult:
    """One check: its name, whether it passed, and what it found."""

    name: str
    passed: bool
    detail: str = ""


@dataclass
class CheckReport:
    """Every check check_env ran on one env."""

    env_id: str
    checks: list[CheckResult] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    @property
    def failures(self) -> list[CheckResult]:
        return [c for c in self.checks if not c.passed]


def check_env(
    env_id: str,
    *,
    agent: Any = None,
    agent_options: dict[str, Any] | None = None,
    env_config: dict[str, Any] | None = None,
    tokenizer: Any = DEFAULT_TOKENIZER,
    num_tasks: int = 2,
    num_rollouts: int = 2,
    agent_delay: float = 0.002,
    raise_on_failure: bool = True,
) -> CheckReport:
    """Check that ``env_id`` follows the agentsgym env contract.

    :param agent: an agent object, a registered agent name (built with ``agent_options``)
        or ``None`` for the env's default agent (else a scripted one). It must reply
        deterministically: the determinism check plays every task twice with it.
    :param env_config: layered over the id's registered defaults.
    :param num_tasks: tasks taken from the train split (else the eval split).
    :param agent_delay: seconds the determinism check's slow agent sleeps per reply.
    :raises EnvCheckError: when ``raise_on_failure`` and any check fails.
    """
    report = _Checker(
        env_id, agent, agent_options, dict(env_config or {}), load_tokenizer(tokenizer),
        max(1, num_tasks), max(1, num_rollouts), agent_delay,
    ).run()
    if raise_on_failure and not report.passed:
        lines = "\n".join(f"  - {c.name}: {c.detail}" for c in report.failures)
        raise EnvCheckError(f"{env_id} fails check_env:\n{lines}")
    return report


@dataclass
class _Checker:
    """The checks of one check_env call."""

    env_id: str
    agent_arg: Any
    agent_options: dict[str, Any] | None
    env_config: dict[str, Any]
    tokenizer: Any
    num_tasks: int
    num_rollouts: int
    agent_delay: float
    # filled in by the checks, in order
    spec: EnvSpec | None = None
    agent: Any = None
    tasks: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    batches: list[TrajectoryBatch] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.report = CheckReport(self.env_id)
        self.finish_probe = FinishProbe()

    def run(self) -> CheckReport:
        self.check("env id resolves to a MultistepEnv subclass", self.resolves)
        if self.report.passed:
            self.check("env builds with and without a tokenizer", self.builds)
        if not self.report.passed:
            return self.report
        self.check("unknown env_config keys are rejected", self.rejects_unknown_config)
        self.check("datasets follow the row schema and survive parquet", self.datasets)
        self.check("episodes play without a tokenizer", self.plays_without_tokenizer)
        self.check("token streams keep the fidelity invariants", self.plays_with_tokenizer)
        self.check("tools are declared and bad calls answered as tool messages", self.tools)
        self.check("step infos are JSON-serialisable", self.infos_are_json)
        self.check("episodes leave task_data unchanged", self.task_data_unchanged)
        self.check("finish_episode runs once per episode", self.finish_runs_once)
        self.check("episodes cut at max_steps_per_episode are truncated", self.truncation)
        self.check(
            "episodes are deterministic for the same task_data, also concurrently",
            self.deterministic,
        )
        return self.report

    def check(self, name: str, fn: Callable[[], str | None]) -> None:
        try:
            self.report.checks.append(CheckResult(name, True, fn() or ""))
        except Exception as exc:
            logger.debug("check %s failed", name, exc_info=True)
            self.report.checks.append(CheckResult(name, False, f"{type(exc).__name__}: {exc}"))

    # ------------------------------------------------------------ building
    def make(self, *, tokenizer: Any = None, plugins: tuple[object, ...] = (), **config: Any) -> MultistepEnv:
        config = {**self.env_config, **config}
        return make(self.env_id, tokenizer=tokenizer, env_config=config, plugins=plugins)

    def resolves(self) -> str:
        # the id given to check is the user's own: a server URL needs no allowing
        self.spec = get_registry().resolve(self.env_id, allow_remote=True)
        env_class(self.spec)
        return f"{self.spec.entry_point} from {self.spec.distribution}"

    def builds(self) -> None:
        self.make(tokenizer=self.tokenizer)
        self.make(tokenizer=None)
        assert self.spec is not None
        if self.agent_arg is not None and not isinstance(self.agent_arg, str):
            self.agent = self.agent_arg
        elif name := self.agent_arg or self.spec.default_agent:
            self.agent = get_registry().agent(name).build(**(self.agent_options or {}))
        else:
            self.agent = ScriptedAgent(["I am not sure."])

    def rejects_unknown_config(self) -> None:
        try:
            self.make(agentsgym_check_unknown_key=1)
        except EnvConfigError:
            return
        raise AssertionError("an unknown env_config key was accepted; configs must forbid extras")

    def datasets(self) -> str:
        import datasets

        env = self.make()
        assert self.spec is not None
        for split, getter in (("train", env.get_train_dataset), ("eval", env.get_eval_dataset)):
            try:
                dataset = getter()
            except NotImplementedError:
                continue
            rows = parse_rows(dataset)
            assert rows, f"{split} dataset is empty"
            for row in rows[:50]:
                named = row.env_class_path
                same_env = get_registry().resolve(named, allow_remote=True).id == self.spec.id
                assert same_env or named == env.env_id, f"{split} row names {named!r}"
                make(named, env_config=row.env_config)
            with tempfile.TemporaryDirectory() as tmp:
                path = str(Path(tmp) / "rows.parquet")
                dataset.to_parquet(path)
                again = datasets.Dataset.from_parquet(path)
                assert again.to_list() == dataset.to_list(), "parquet round trip changed rows"
            self.tasks[split] = [row.task_data for row in rows]
        if "train" in self.tasks and "eval" in self.tasks:
            train = {json.dumps(t, sort_keys=True) for t in self.tasks["train"]}
            overlap = [t for t in self.tasks["eval"] if json.dumps(t, sort_keys=True) in train]
            assert not overlap, f"{len(overlap)} eval tasks also in train, e.g. {overlap[0]}"
        return ", ".join(f"{k}: {len(v)} rows" for k, v in self.tasks.items()) or "no datasets"

    def task_list(self, count: int | None = None) -> list[dict[str, Any]]:
        found = self.tasks.get("train") or self.tasks.get("eval")
        assert found, "the env ships no dataset; cannot pick tasks to play"
        return copy.deepcopy(found[: count or self.num_tasks])

    # ------------------------------------------------------------ playing
    def play(self, tokenizer: Any) -> tuple[MultistepEnv, TrajectoryBatch]:
        env = self.make(tokenizer=tokenizer, plugins=(self.finish_probe,))
        batch = env.run_trial(self.task_list(), self.agent, self.num_rollouts)
        self.batches.append(batch)
        failed = batch.failed
        assert not failed, f"{len(failed)} episodes failed, first: {failed[0].error}"
        assert len(batch) > 0, "no trajectories"
        max_steps = env.config.max_steps_per_episode
        for episode in batch.all_episodes:
            assert episode.messages, "an episode has no messages"
            assert 1 <= episode.num_turns <= max_steps, (
                f"episode took {episode.num_turns} turns; max_steps_per_episode is {max_steps}"
            )
            assert math.isfinite(episode.final_reward), "non-finite final reward"
        return env, batch

    def plays_without_tokenizer(self) -> str:
        _, batch = self.play(None)
        return f"mean reward {sum(batch.final_rewards) / max(len(batch), 1):.3g}"

    def plays_with_tokenizer(self) -> str:
        if self.tokenizer is None:
            return "skipped: check_env was given no tokenizer"
        env, batch = self.play(self.tokenizer)
        _assert_tokens(batch, env)
        return f"{len(batch)} rows"

    def tools(self) -> str:
        env, tasks = self.make(), self.task_list()
        declared = [(t, list(s)) for t in tasks if (s := getattr(env.episode_tools(t), "schemas", 0))]
        for task, found in declared:
            names = [str((s.get("function") or {}).get("name") or "") for s in found]
            assert all(s.get("type") == "function" for s in found) and all(names), (
                f"tools of task {task} are not OpenAI function schemas with names: {found!r:.300}"
            )
            assert len(set(names)) == len(names), f"task {task} declares a tool twice: {names}"
            json.dumps(found)
        if not declared:
            return "the env declares no tools"
        task, found = declared[0]
        calls = [{"id": f"call_{i}", "type": "function", "function": {"name": n, "arguments": a}}
                 for i, (n, a) in enumerate((("agentsgym_check_no_such_tool", "{}"),
                                             (found[0]["function"]["name"], "{not json")))]  # fmt: skip
        bad_calls = FunctionAgent(lambda messages, state: (  # then a plain reply
            "I am not sure." if any(m["role"] == "assistant" for m in messages)
            else AgentAction("", tool_calls=calls), state))  # fmt: skip
        env = self.make(max_steps_per_episode=2)
        episode = env.run_trial([task], bad_calls).all_episodes[0]
        assert episode.error is None, f"a call to an unknown tool failed the episode: {episode.error}"
        answers = [m for m in episode.messages if m["role"] == "tool"]
        assert len(answers) == 2 and all(isinstance(m.get("content"), str) for m in answers), (
            f"an unknown tool and bad arguments must each get a tool message, got {answers}"
        )
        return f"{len(declared)} of {len(tasks)} tasks declare tools"

    def played(self) -> list[Episode]:
        episodes = [e for batch in self.batches for e in batch.all_episodes]
        assert episodes, "no episode was played (see the checks above)"
        return episodes

    def infos_are_json(self) -> str:
        episodes = self.played()
        for episode in episodes:
            for index, step in enumerate(episode.steps):
                problem = _json_problem(step.info)
                assert not problem, (
                    f"step {index} of an episode of task {episode.task_data}: info{problem}; "
                    "step infos are written to dataset files: keep them to str, int, "
                    "float, bool, None, lists and dicts"
                )
        return f"{sum(len(e.steps) for e in episodes)} steps"

    def task_data_unchanged(self) -> None:
        tasks = self.task_list()
        before = json.dumps(tasks, sort_keys=True)
        self.make().run_trial(tasks, self.agent, 1)
        assert json.dumps(tasks, sort_keys=True) == before, (
            "playing an episode changed its task_data; task_data is shared by every "
            "rollout of a task: copy what the state needs (initialize_episode)"
        )

    def finish_runs_once(self) -> str:
        episodes = self.played()
        probe = self.finish_probe
        assert not probe.failures, f"finish_episode raised: {probe.failures[0]}"
        failed = [e.error for e in episodes if e.error and "finish_episode" in e.error]
        assert not failed, f"finish_episode failed: {failed[0]}"
        expected = Counter(e.session_id for e in episodes)
        seen = Counter(session for session, _ in probe.calls)
        if seen != expected:
            session = next(s for s in expected | seen if expected[s] != seen[s])
            raise AssertionError(
                f"session {session} played {expected[session]} episode(s) but finish_episode "
                f"ran {seen[session]} time(s); it must run exactly once per episode"
            )
        told_truncated = {session for session, truncated in probe.calls if truncated}
        assert not any(e.truncated and e.session_id not in told_truncated for e in episodes), (
            "finish_episode was not told truncated=True for a cut episode"
        )
        assert self.spec is not None
        implemented = hasattr(env_class(self.spec), "finish_episode")
        return f"{len(probe.calls)} calls" + ("" if implemented else " (the env does not implement it)")

    def truncation(self) -> str:
        probe = FinishProbe()
        try:
            env = self.make(plugins=(probe,), max_steps_per_episode=1)
        except EnvConfigError as exc:
            return f"skipped: the env refuses max_steps_per_episode=1 ({exc})"
        batch = env.run_trial(self.task_list(), self.agent, 1)
        assert not probe.failures, (
            f"finish_episode raised for an episode cut after one step: {probe.failures[0]}; "
            "an env must handle being cut at max_steps_per_episode (truncated=True)"
        )
        failed = batch.failed
        assert not failed, (
            f"an episode cut after one step failed: {failed[0].error}; an env must handle "
            "being cut at max_steps_per_episode (finish_episode gets truncated=True)"
        )
        cut = 0
        for episode in batch.all_episodes:
            done = bool(episode.steps) and episode.steps[-1].done
            assert episode.num_turns == 1, f"an episode took {episode.num_turns} turns, limit 1"
            assert episode.truncated == (not done), (
                f"episode done={done} but truncated={episode.truncated}"
            )
            cut += episode.truncated
        truncated_calls = sum(truncated for _, truncated in probe.calls)
        assert truncated_calls == cut, (
            f"{cut} episodes were cut but finish_episode saw truncated=True {truncated_calls} times"
        )
        return f"{cut} of {len(batch.all_episodes)} episodes cut after one step"

    def deterministic(self) -> str:
        tasks = self.task_list(max(self.num_tasks, 2))
        rollouts = max(self.num_rollouts, 2)
        env = self.make()
        sequential = env.run_trial(tasks, slow_agent(self.agent, 0.0), rollouts, max_concurrency=1)
        jobs = len(tasks) * rollouts
        slow = slow_agent(self.agent, self.agent_delay, rendezvous=min(jobs, 3))
        concurrent = env.run_trial(tasks, slow, rollouts, max_concurrency=jobs)
        first = {_key(e): e for e in sequential.all_episodes}
        second = {_key(e): e for e in concurrent.all_episodes}
        assert first, "no episode was played"
        for key in sorted(first.keys() | second.keys()):
            difference = _difference(first.get(key), second.get(key))
            if difference:
                task, rollout, index = key
                raise AssertionError(
                    f"task {task} rollout {rollout} episode {index}: {difference}. Played once "
                    f"alone and once with {jobs} episodes at once (a deterministic agent that "
                    "sleeps between replies), the same task_data gave different episodes. Draw "
                    "randomness from agentsgym.randomness.episode_random(task_data) kept in the "
                    "state (never the global random module, or wrap a library that uses it in "
                    "global_random), and keep per-episode data in the state, not on self"
                )
        return f"{len(first)} episodes, up to {jobs} at once"


# ------------------------------------------------------------ helpers of the checks
class FinishProbe:
    """A plugin for an env's hook relay: records every finish_episode call as
    ``(session_id, truncated)`` and what any implementation raised. As a hook wrapper it
    sees each call once however many implementations run (list.append is thread-safe).
    """

    def __init__(self) -> None:
        self.calls: list[tuple[str, bool]] = []
        self.failures: list[str] = []

    @hookimpl(wrapper=True)
    def finish_episode(self, session_id: str, truncated: bool, error: str | None) -> Any:
        self.calls.append((session_id, bool(truncated)))
        try:
            return (yield)
        except Exception as exc:
            self.failures.append(f"{type(exc).__name__}: {exc}")
            raise


def _key(episode: Episode) -> tuple[int, int, int]:
    return episode.task_index, episode.rollout_index, episode.episode_index


def _difference(first: Episode | None, second: Episode | None) -> str:
    if first is None or second is None:
        return "played in one run only"
    if first.error != second.error:
        return f"errors differ: {first.error!r} vs {second.error!r}"
    for index, (a, b) in enumerate(zip(first.messages, second.messages)):
        if a != b:
            return f"message {index} differs: {a['content']!r:.100} vs {b['content']!r:.100}"
    if len(first.messages) != len(second.messages):
        return f"{len(first.messages)} vs {len(second.messages)} messages"
    rewards = ([s.reward for s in first.steps], [s.reward for s in second.steps])
    if rewards[0] != rewards[1]:
        return f"step rewards differ: {rewards[0]} vs {rewards[1]}"
    return ""


def _json_problem(value: Any, path: str = "") -> str:
    """Where ``value`` stops being JSON (``"['board']: a set"``), or ``""``."""
    if value is None or isinstance(value, (str, bool, int)):
        return ""
    if isinstance(value, float):
        return "" if math.isfinite(value) else f"{path}: the non-finite float {value!r}"
    if isinstance(value, dict):
        items = list(value.items())
    elif isinstance(value, (list, tuple)):
        items = list(enumerate(value))
    else:
        return f"{path}: a {type(value).__name__} ({value!r:.60})"
    for key, item in items:
        if isinstance(value, dict) and not isinstance(key, str):
            return f"{path}: the non-string key {key!r}"
        problem = _json_problem(item, f"{path}[{key!r}]")
        if problem:
            return problem
    return ""


def _assert_tokens(batch: TrajectoryBatch, env: Any) -> None:
    pad = env.chat.pad_token_id
    for group in batch.groups:
        widths = {len(r) for r in group.padded_full_token_ids}
        assert len(widths) == 1, f"group {group.task_index} rows have lengths {widths}"
        for (episode, segment), ids, mask, rewards in zip(
            group.rows, group.padded_full_token_ids, group.padded_agent_token_mask,
            group.padded_per_token_rewards,
        ):
            episode.check()
            n = len(episode.segments[segment])
            assert ids[n:] == [pad] * (len(ids) - n), "padding is not the pad token id"
            assert not any(mask[n:]) and not any(rewards[n:]), "padding carries mask or reward"
        if not env.chat.is_prefix_preserving():
            # e.g. Qwen3 renders an empty think block into a final assistant turn the
            # model never generated; segments were checked against their views instead.
            continue
        for episode in group.episodes:
            if len(episode.segments) == 1 and not any(
                env.chat.has_special_text(m["content"]) for m in episode.messages
            ):
                toolbox = env.episode_tools(episode.task_data)  # the episode's tools render too
                rendered = env.tokenizer.apply_chat_template(
                    episode.messages, tokenize=False, tools=toolbox.schemas if toolbox else None,
                    **env.config.chat_template_kwargs,
                )  # fmt: skip
                expected = env.tokenizer(rendered, add_special_tokens=False)["input_ids"]
                assert episode.full_token_ids == list(expected), (
                    "full_token_ids differ from apply_chat_template(messages)"
                )
