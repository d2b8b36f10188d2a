"""check_env: the contract test env authors run in their own CI.

    from agentsgym.testing import check_env

    def test_my_env_follows_the_contract():
        check_env("myns/MyEnv-v0")

It builds the env with and without a tokenizer, plays a few trials with the env's
default agent (or the one given), and checks the row schema of its datasets, the
token-fidelity invariants, padding, determinism under a seed, and that bad config
keys are rejected. ``agentsgym check-env ENV_ID`` runs the same checks.
"""

from __future__ import annotations

import json
import logging
import math
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentsgym.agents import ScriptedAgent
from agentsgym.errors import EnvConfigError
from agentsgym.factory import DEFAULT_TOKENIZER, load_tokenizer, make
from agentsgym.registry import get_registry
from agentsgym.rows import parse_rows
from agentsgym.trajectory import TrajectoryBatch

logger = logging.getLogger(__name__)


class EnvCheckError(AssertionError):
    """check_env found the env breaking the contract; the message lists every failure."""


@dataclass
class CheckResult:
    name: str
    passed: bool
    detail: str = ""


@dataclass
class CheckReport:
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
    raise_on_failure: bool = True,
) -> CheckReport:
    """Check that ``env_id`` follows the agentsgym env contract.

    :param agent: an agent object, a registered agent name, or ``None`` for the
        env's default agent (a scripted agent when it has none).
    :param tokenizer: used for the token checks (default: the bundled tokenizer).
    :raises EnvCheckError: when ``raise_on_failure`` and any check fails.
    """
    report = CheckReport(env_id)
    tokenizer = load_tokenizer(tokenizer)
    state: dict[str, Any] = {}

    def run(name: str, fn: Callable[[], str | None]) -> None:
        try:
            detail = fn() or ""
            report.checks.append(CheckResult(name, True, detail))
        except Exception as exc:  # every check reports, one failure does not hide others
            logger.debug("check %s failed", name, exc_info=True)
            report.checks.append(CheckResult(name, False, f"{type(exc).__name__}: {exc}"))

    def resolves() -> str:
        spec = get_registry().resolve(env_id)
        state["spec"] = spec
        spec.load_class()
        return f"{spec.entry_point} from {spec.distribution}"

    def builds() -> None:
        state["env"] = make(env_id, tokenizer=tokenizer, env_config=env_config)
        state["plain_env"] = make(env_id, tokenizer=None, env_config=env_config)
        state["agent"] = _agent(state["spec"].default_agent, agent, agent_options)

    def rejects_unknown_config() -> None:
        try:
            make(env_id, env_config={**(env_config or {}), "agentsgym_check_unknown_key": 1})
        except EnvConfigError:
            return
        raise AssertionError("an unknown env_config key was accepted; configs must forbid extras")

    def datasets_follow_schema() -> str:
        env = state["env"]
        tasks: dict[str, list[dict[str, Any]]] = {}
        for split, getter in (("train", env.get_train_dataset), ("eval", env.get_eval_dataset)):
            try:
                dataset = getter()
            except NotImplementedError:
                continue
            rows = parse_rows(dataset)
            assert rows, f"{split} dataset is empty"
            for row in rows[:50]:
                assert get_registry().resolve(row.env_class_path).id == state["spec"].id or \
                    row.env_class_path == env.env_id, f"{split} row names {row.env_class_path!r}"
                make(row.env_class_path, env_config=row.env_config)
            with tempfile.TemporaryDirectory() as tmp:
                path = Path(tmp) / "rows.parquet"
                dataset.to_parquet(str(path))
                import datasets

                again = datasets.Dataset.from_parquet(str(path))
                assert again.to_list() == dataset.to_list(), "parquet round trip changed rows"
            tasks[split] = [row.task_data for row in rows]
        state["tasks"] = tasks
        if "train" in tasks and "eval" in tasks:
            train = {json.dumps(t, sort_keys=True) for t in tasks["train"]}
            overlap = [t for t in tasks["eval"] if json.dumps(t, sort_keys=True) in train]
            assert not overlap, f"{len(overlap)} eval tasks also in train, e.g. {overlap[0]}"
        return ", ".join(f"{k}: {len(v)} rows" for k, v in tasks.items()) or "no datasets"

    def task_list() -> list[dict[str, Any]]:
        tasks = state.get("tasks", {})
        found = tasks.get("train") or tasks.get("eval")
        if not found:
            raise AssertionError("the env ships no dataset; cannot pick tasks to play")
        return found[:num_tasks]

    def plays_without_tokenizer() -> str:
        batch = state["plain_env"].run_trial(task_list(), state["agent"], num_rollouts)
        _assert_played(batch, state["plain_env"].config.max_steps_per_episode)
        return f"mean reward {sum(batch.final_rewards) / max(len(batch), 1):.3g}"

    def plays_with_tokenizer() -> str:
        env = state["env"]
        batch = env.run_trial(task_list(), state["agent"], num_rollouts)
        _assert_played(batch, env.config.max_steps_per_episode)
        _assert_tokens(batch, env)
        state["batch"] = batch
        return f"{len(batch)} rows"

    def deterministic_under_seed() -> None:
        env = state["plain_env"]
        task = task_list()[0]
        first = env.run_trial([task], state["agent"], 1, max_concurrency=1).episodes
        second = env.run_trial([task], state["agent"], 1, max_concurrency=1).episodes
        assert first and second, "no episode completed"
        assert first[0].messages == second[0].messages, (
            "the same task_data played twice by a deterministic agent gave different "
            "conversations; a seed in task_data must make the episode deterministic"
        )

    run("env id resolves to a MultistepEnv subclass", resolves)
    if not report.passed:
        return _finish(report, raise_on_failure)
    run("env builds with and without a tokenizer", builds)
    if not report.passed:
        return _finish(report, raise_on_failure)
    run("unknown env_config keys are rejected", rejects_unknown_config)
    run("datasets follow the row schema and survive parquet", datasets_follow_schema)
    run("episodes play without a tokenizer", plays_without_tokenizer)
    run("token streams keep the fidelity invariants", plays_with_tokenizer)
    run("episodes are deterministic for the same task_data", deterministic_under_seed)
    return _finish(report, raise_on_failure)


def _finish(report: CheckReport, raise_on_failure: bool) -> CheckReport:
    if raise_on_failure and not report.passed:
        lines = "\n".join(f"  - {c.name}: {c.detail}" for c in report.failures)
        raise EnvCheckError(f"{report.env_id} fails check_env:\n{lines}")
    return report


def _agent(default: str | None, agent: Any, options: dict[str, Any] | None) -> Any:
    if agent is not None and not isinstance(agent, str):
        return agent
    name = agent or default
    if name is None:
        return ScriptedAgent(["I am not sure."])
    return get_registry().agent(name).build(**(options or {}))


def _assert_played(batch: TrajectoryBatch, max_steps: int) -> None:
    failed = batch.failed
    assert not failed, f"{len(failed)} episodes failed, first: {failed[0].error}"
    assert len(batch) > 0, "no trajectories"
    for episode in batch.all_episodes:
        assert episode.messages, "an episode has no messages"
        assert 1 <= episode.num_turns <= max_steps, (
            f"episode took {episode.num_turns} turns; max_steps_per_episode is {max_steps}"
        )
        assert math.isfinite(episode.final_reward), "non-finite final reward"
        json.dumps([s.info for s in episode.steps])


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
            if len(episode.segments) == 1 and not _has_special_text(env, episode.messages):
                rendered = env.tokenizer.apply_chat_template(
                    episode.messages, tokenize=False, **env.config.chat_template_kwargs
                )
                expected = env.tokenizer(rendered, add_special_tokens=False)["input_ids"]
                assert episode.full_token_ids == list(expected), (
                    "full_token_ids differ from apply_chat_template(messages)"
                )


def _has_special_text(env: Any, messages: list[dict[str, str]]) -> bool:
    return any(s in m["content"] for m in messages for s in env.chat.special_texts)
