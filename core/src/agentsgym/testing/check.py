"""check_env: the contract test env authors run in their own CI (``agentsgym check-env
ENV_ID`` runs the same checks; docs/plugin-authors.md lists what they check).

Every check records a result instead of raising, so that one failure does not hide the
others; only the first two (the id resolves, the env builds) stop the rest. A check
fails by raising :class:`CheckFailed` (never ``assert``: ``python -O`` drops those) and
is skipped by raising :class:`CheckSkipped`. Every env a check builds is closed. An env
class's ``contract_checks`` replaces checks of the same name or adds its own
(:mod:`agentsgym.testing.check_context`).
"""

from __future__ import annotations

import copy
import json
import logging
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentsgym.agents import ScriptedAgent
from agentsgym.errors import EnvConfigError
from agentsgym.factory import DEFAULT_TOKENIZER, load_tokenizer, make
from agentsgym.registry import EnvSpec, env_class, get_registry
from agentsgym.testing.agents import slow_agent
from agentsgym.testing.check_context import EnvCheckContext, EnvChecks
from agentsgym.testing.check_datasets import check_disjoint, check_splits
from agentsgym.testing.check_episodes import (
    FinishProbe,
    episode_difference,
    episode_key,
    json_problem,
)
from agentsgym.testing.check_inline import HookTimer, check_inline_promise
from agentsgym.testing.check_report import (
    CheckFailed,
    CheckReport,
    CheckResult,
    CheckSkipped,
    EnvCheckError,
    require,
)
from agentsgym.testing.check_roles import check_roles, games
from agentsgym.testing.check_tokens import check_token_rows
from agentsgym.testing.check_tools import check_tools
from agentsgym.trajectory import Episode, TrajectoryBatch

if TYPE_CHECKING:
    from agentsgym.env import MultistepEnv

logger = logging.getLogger(__name__)

__all__ = [
    "CheckFailed",
    "CheckReport",
    "CheckResult",
    "CheckSkipped",
    "EnvCheckError",
    "check_env",
]


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

    :param agent: an agent object (in an env with roles: one for every role, or a dict
        of them by role), a registered agent name (built with ``agent_options``) or
        ``None`` for the env's default agent: in an env with roles, each role's own
        ``default_agent``, the env's for the roles without one (else a scripted one). It
        must reply deterministically: the determinism check plays every task twice with it.
    :param env_config: layered over the id's registered defaults.
    :param num_tasks: tasks taken from the train split (else the eval split).
    :param agent_delay: seconds the determinism check's slow agent sleeps per reply.
    :return: the report: a result per check, ok, failed or skipped (with the reason).
    :raises EnvCheckError: when ``raise_on_failure`` and any check fails.
    """
    checker = _Checker(
        env_id,
        agent,
        agent_options,
        dict(env_config or {}),
        load_tokenizer(tokenizer),
        max(1, num_tasks),
        max(1, num_rollouts),
        agent_delay,
    )
    report = checker.run()
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
    episodes: list[Episode] = field(default_factory=list)
    """Every episode the playing checks played, every role's (a batch holds only the
    trainable roles' groups)."""
    built: list[MultistepEnv] = field(default_factory=list)
    own_checks: EnvChecks = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.report = CheckReport(self.env_id)
        self.finish_probe = FinishProbe()
        self.hook_timer = HookTimer()

    def run(self) -> CheckReport:
        try:
            self._run_checks()
        finally:
            self._close_envs()
        return self.report

    def _run_checks(self) -> None:
        self.check("env id resolves to a MultistepEnv subclass", self.resolves)
        if self.report.passed:
            self.check("env builds with and without a tokenizer", self.builds)
        if not self.report.passed:
            return
        if hasattr(env_class(self._spec()), "contract_checks"):
            self.check("the env's own checks load (contract_checks)", self.load_own_checks)
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
        self.check("an env with run_hooks_inline never waits in its hooks", self.inline)
        if getattr(env_class(self._spec()), "roles", ()):  # single-agent envs: as before
            self.check("each role plays with its own view and token stream", self.roles)
        for name, fn in list(self.own_checks.items()):  # the env's checks not run in place
            self.check(name, fn)

    def check(self, name: str, fn: Callable[[], str | None]) -> None:
        fn = self.own_checks.pop(name, fn)  # the env's own check of that name runs instead
        try:
            detail = fn() or ""
        except CheckSkipped as skip:
            self.report.checks.append(CheckResult(name, "skipped", str(skip)))
        except Exception as exc:
            logger.debug("check %s failed", name, exc_info=True)
            detail = str(exc) if isinstance(exc, CheckFailed) else f"{type(exc).__name__}: {exc}"
            self.report.checks.append(CheckResult(name, "failed", detail))
        else:
            self.report.checks.append(CheckResult(name, "ok", detail))

    # ------------------------------------------------------------ building
    def make(
        self, *, tokenizer: Any = None, plugins: tuple[object, ...] = (), **config: Any
    ) -> MultistepEnv:
        """The env under check with ``config`` over the given env_config; closed at the end."""
        env_config = {**self.env_config, **config}
        return self.build(self.env_id, env_config, tokenizer=tokenizer, plugins=plugins)

    def build(
        self,
        env_id: str,
        env_config: dict[str, Any],
        *,
        tokenizer: Any = None,
        plugins: tuple[object, ...] = (),
    ) -> MultistepEnv:
        """An env built for a check, kept to be closed when the checks end."""
        env = make(env_id, tokenizer=tokenizer, env_config=env_config, plugins=plugins)
        self.built.append(env)
        return env

    def _close_envs(self) -> None:
        for env in self.built:
            try:
                env.close()
            except Exception:  # a failing close must not hide the report
                logger.exception("closing env %s failed", env.env_id)
        self.built.clear()

    def resolves(self) -> str:
        # the id given to check is the user's own: a server URL needs no allowing
        self.spec = get_registry().resolve(self.env_id, allow_remote=True)
        env_class(self.spec)
        return f"{self.spec.entry_point} from {self.spec.distribution}"

    def builds(self) -> None:
        self.make(tokenizer=self.tokenizer)
        self.make(tokenizer=None)
        self.agent = self._agent()

    def _agent(self) -> Any:
        """The agent of the checks (see :func:`check_env`'s ``agent``)."""
        if self.agent_arg is not None and not isinstance(self.agent_arg, str):
            return self.agent_arg
        spec = self._spec()
        registry = get_registry()
        name = self.agent_arg or spec.default_agent
        agent = registry.agent(name).build(**(self.agent_options or {})) if name else None
        roles = env_class(spec).roles
        if self.agent_arg is None and any(role.default_agent for role in roles):
            placeholder = agent or ScriptedAgent(["I am not sure."])
            return {
                role.name: registry.agent(role.default_agent).build()
                if role.default_agent
                else placeholder
                for role in roles
            }
        return agent or ScriptedAgent(["I am not sure."])

    def run_trial(
        self,
        env: MultistepEnv,
        tasks: list[dict[str, Any]],
        agent: Any,
        rollouts: int,
        **options: Any,
    ) -> tuple[TrajectoryBatch, list[Episode]]:
        """Play ``tasks``; the batch, and every episode played: every role's, where the
        batch holds only the trainable roles' groups (and the failed among them)."""
        episodes: list[Episode] = []
        batch = env.run_trial(tasks, agent, rollouts, on_episode=episodes.append, **options)
        return batch, episodes

    def slow(self, delay: float, rendezvous: int = 0) -> Any:
        """The checks' agent slowed down (each role's, in an env with roles: the first
        role's calls meet, where games begin)."""
        if not isinstance(self.agent, dict):
            return slow_agent(self.agent, delay, rendezvous=rendezvous)
        first = next(iter(self.agent))
        return {
            role: slow_agent(agent, delay, rendezvous=rendezvous if role == first else 0)
            for role, agent in self.agent.items()
        }

    def load_own_checks(self) -> str:
        context = EnvCheckContext(
            env_id=self.env_id,
            agent=self.agent,
            tokenizer=self.tokenizer,
            num_tasks=self.num_tasks,
            num_rollouts=self.num_rollouts,
            make=self.make,
            tasks=self.task_list,
            record=lambda batch: self.episodes.extend(batch.all_episodes),
        )
        self.own_checks = dict(env_class(self._spec()).contract_checks(context))
        return f"{len(self.own_checks)} checks"

    def _spec(self) -> EnvSpec:
        if self.spec is None:  # the first check failed, and no other runs then
            raise CheckFailed("the env id did not resolve")
        return self.spec

    def rejects_unknown_config(self) -> None:
        try:
            self.make(agentsgym_check_unknown_key=1)
        except EnvConfigError:
            return
        raise CheckFailed("an unknown env_config key was accepted; configs must forbid extras")

    def datasets(self) -> str:
        self.tasks = check_splits(self.make(), self._spec().id, self.build)
        check_disjoint(self.tasks)  # the tasks stay, for the checks that play them
        return ", ".join(f"{k}: {len(v)} rows" for k, v in self.tasks.items()) or "no datasets"

    def task_list(self, count: int | None = None) -> list[dict[str, Any]]:
        found = self.tasks.get("train") or self.tasks.get("eval")
        if not found:
            raise CheckFailed("the env ships no dataset; cannot pick tasks to play")
        return copy.deepcopy(found[: count or self.num_tasks])

    # ------------------------------------------------------------ playing
    def play(self, tokenizer: Any) -> tuple[MultistepEnv, TrajectoryBatch]:
        env = self.make(tokenizer=tokenizer, plugins=(self.finish_probe, self.hook_timer))
        batch, episodes = self.run_trial(env, self.task_list(), self.agent, self.num_rollouts)
        self.episodes.extend(episodes)
        failed = [e for e in episodes if not e.ok]
        if failed:
            raise CheckFailed(f"{len(failed)} episodes failed, first: {failed[0].error}")
        require(len(batch) > 0, "no trajectories")
        max_steps = env.config.max_steps_per_episode
        for game in games(episodes).values():
            turns = sum(episode.num_turns for episode in game)  # with roles: every role's
            require(all(e.messages for e in game), "an episode has no messages")
            require(
                1 <= turns <= max_steps,
                f"episode took {turns} turns; max_steps_per_episode is {max_steps}",
            )
            require(all(math.isfinite(e.final_reward) for e in game), "non-finite final reward")
        return env, batch

    def plays_without_tokenizer(self) -> str:
        _, batch = self.play(None)
        return f"mean reward {sum(batch.final_rewards) / max(len(batch), 1):.3g}"

    def plays_with_tokenizer(self) -> str:
        if self.tokenizer is None:
            raise CheckSkipped("check_env was given no tokenizer")
        env, batch = self.play(self.tokenizer)
        check_token_rows(batch, env)
        return f"{len(batch)} rows"

    def tools(self) -> str:
        return check_tools(self.make, self.task_list())

    def played(self) -> list[Episode]:
        if not self.episodes:
            raise CheckFailed("no episode was played (see the checks above)")
        return self.episodes

    def infos_are_json(self) -> str:
        episodes = self.played()
        for episode in episodes:
            for index, step in enumerate(episode.steps):
                problem = json_problem(step.info)
                require(
                    not problem,
                    f"step {index} of an episode of task {episode.task_data}: info{problem}; "
                    "step infos are written to dataset files: keep them to str, int, "
                    "float, bool, None, lists and dicts",
                )
        return f"{sum(len(e.steps) for e in episodes)} steps"

    def task_data_unchanged(self) -> None:
        tasks = self.task_list()
        before = json.dumps(tasks, sort_keys=True)
        self.make().run_trial(tasks, self.agent, 1)
        require(
            json.dumps(tasks, sort_keys=True) == before,
            "playing an episode changed its task_data; task_data is shared by every "
            "rollout of a task: copy what the state needs (initialize_episode)",
        )

    def finish_runs_once(self) -> str:
        episodes = self.played()
        probe = self.finish_probe
        if probe.failures:
            raise CheckFailed(f"finish_episode raised: {probe.failures[0]}")
        failed = [e.error for e in episodes if e.error and "finish_episode" in e.error]
        if failed:
            raise CheckFailed(f"finish_episode failed: {failed[0]}")
        expected = Counter(session for session, _ in games(episodes))
        seen = Counter(session for session, _ in probe.calls)
        if seen != expected:
            session = next(s for s in expected | seen if expected[s] != seen[s])
            raise CheckFailed(
                f"session {session} played {expected[session]} episode(s) but finish_episode "
                f"ran {seen[session]} time(s); it must run exactly once per episode"
            )
        told_truncated = {session for session, truncated in probe.calls if truncated}
        require(
            not any(e.truncated and e.session_id not in told_truncated for e in episodes),
            "finish_episode was not told truncated=True for a cut episode",
        )
        implemented = hasattr(env_class(self._spec()), "finish_episode")
        return f"{len(probe.calls)} calls" + (
            "" if implemented else " (the env does not implement it)"
        )

    def truncation(self) -> str:
        probe = FinishProbe()
        try:
            env = self.make(plugins=(probe,), max_steps_per_episode=1)
        except EnvConfigError as exc:
            raise CheckSkipped(f"the env refuses max_steps_per_episode=1 ({exc})") from None
        _, episodes = self.run_trial(env, self.task_list(), self.agent, 1)
        if probe.failures:
            raise CheckFailed(
                f"finish_episode raised for an episode cut after one step: {probe.failures[0]}; "
                "an env must handle being cut at max_steps_per_episode (truncated=True)"
            )
        failed = [e for e in episodes if not e.ok]
        if failed:
            raise CheckFailed(
                f"an episode cut after one step failed: {failed[0].error}; an env must handle "
                "being cut at max_steps_per_episode (finish_episode gets truncated=True)"
            )
        cut = 0
        for game in games(episodes).values():  # with roles: one episode per role
            steps = [step for episode in game for step in episode.steps]
            done = len(steps) == 1 and steps[0].done
            require(len(steps) == 1, f"an episode took {len(steps)} turns, limit 1")
            for episode in game:
                require(
                    episode.truncated == (not done),
                    f"episode done={done} but truncated={episode.truncated}",
                )
            cut += game[0].truncated
        truncated_calls = sum(truncated for _, truncated in probe.calls)
        require(
            truncated_calls == cut,
            f"{cut} episodes were cut but finish_episode saw truncated=True "
            f"{truncated_calls} times",
        )
        return f"{cut} of {len(games(episodes))} episodes cut after one step"

    def deterministic(self) -> str:
        tasks = self.task_list(max(self.num_tasks, 2))
        rollouts = max(self.num_rollouts, 2)
        env = self.make()
        _, sequential = self.run_trial(env, tasks, self.slow(0.0), rollouts, max_concurrency=1)
        jobs = len(tasks) * rollouts
        slow = self.slow(self.agent_delay, rendezvous=min(jobs, 3))
        _, concurrent = self.run_trial(env, tasks, slow, rollouts, max_concurrency=jobs)
        first = {episode_key(e): e for e in sequential}
        second = {episode_key(e): e for e in concurrent}
        require(first, "no episode was played")
        for key in sorted(first.keys() | second.keys()):
            difference = episode_difference(first.get(key), second.get(key))
            if difference:
                task, rollout, index, _ = key
                raise CheckFailed(
                    f"task {task} rollout {rollout} episode {index}: {difference}. Played once "
                    f"alone and once with {jobs} episodes at once (a deterministic agent that "
                    "sleeps between replies), the same task_data gave different episodes. Draw "
                    "randomness from agentsgym.episode_random(task_data) kept in the state "
                    "(never the global random module, or wrap a library that uses it in "
                    "MultistepEnv.global_random), and keep per-episode data in the state, not "
                    "on self"
                )
        return f"{len(first)} episodes, up to {jobs} at once"

    def inline(self) -> str:
        self.played()
        return check_inline_promise(self.make(), self.hook_timer)

    def roles(self) -> str:
        return check_roles(self.make(), self.played())
