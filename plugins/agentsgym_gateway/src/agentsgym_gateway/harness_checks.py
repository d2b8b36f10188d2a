"""``agentsgym check-env`` on a harness env: what matters for a program run as an env.

:meth:`HarnessEnv.contract_checks <agentsgym_gateway.harness.HarnessEnv.contract_checks>`
hands these to check_env (:mod:`agentsgym.testing.check_context`). The env's own program
plays the tasks with check_env's agent, through the gateway, once; the checks read
that play: the programs end within ``episode_timeout_seconds`` and exit 0, their calls
reach the gateway and become one episode per program with at most
:data:`ROWS_PER_ROLLOUT_GOAL` rows (segments) each on average, the token streams keep
the fidelity invariants, the verifier returns a finite reward, task_data stays as it was.
Two more runs replace the program: one that crashes after a call (its episode fails
with the exit status and the stderr tail, the run goes on) and one that hangs (it is
stopped at the timeout). check_env's checks that drive the turn hooks or script the
tools are reported as skipped, with the reason.
"""

from __future__ import annotations

import json
import math
import sys
from collections import Counter
from typing import Any

from agentsgym import Episode, TrajectoryBatch
from agentsgym.testing import (
    CheckFailed,
    CheckSkipped,
    EnvCheckContext,
    EnvChecks,
    check_padded_rows,
    require,
)
from agentsgym_gateway.programs import CommandProgram

__all__ = ["CRASH_MARKER", "harness_checks"]

CRASH_MARKER = "agentsgym check-env: this program crashes on purpose"
"""What the crashing program writes to stderr before it exits with status 3."""

ROWS_PER_ROLLOUT_GOAL = 1.25
"""docs/harness.md's goal for the rows (segments) per rollout: 1.0 when every call
extends the one before; above it, calls that start a new segment are trained as rows
of their own, on a format that a model server never showed the model."""
CRASH_STATUS = 3
HANG_TIMEOUT_SECONDS = 1.0
"""The episode_timeout_seconds of the hanging program's run."""

# One chat call through the gateway with the standard library only (a harness env's
# environment need not have openai), then the crash.
_CRASHING_PROGRAM = f"""
import json, os, sys, urllib.request
body = {{"model": os.environ["OPENAI_MODEL"], "messages": [{{"role": "user", "content": "hi"}}]}}
request = urllib.request.Request(
    os.environ["OPENAI_BASE_URL"].rstrip("/") + "/chat/completions",
    data=json.dumps(body).encode(),
    headers={{"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"],
             "Content-Type": "application/json"}},
)
urllib.request.urlopen(request, timeout=600).read()
print({CRASH_MARKER!r}, file=sys.stderr)
sys.exit({CRASH_STATUS})
"""
_HANGING_PROGRAM = "import time; time.sleep(3600)"

_NO_HOOKS = "a harness env has no turn hooks: its episodes are runs of a program"
_NO_TOKENIZER = "check_env was given no tokenizer; a harness env needs one to play"


def harness_checks(context: EnvCheckContext) -> EnvChecks:
    """The checks of a harness env: check_env's, some replaced or skipped, and its own."""
    return _HarnessChecks(context).checks()


def _skipped(reason: str) -> Any:
    def skip() -> None:
        raise CheckSkipped(reason)

    return skip


class _HarnessChecks:
    """The checks of one check_env call on a harness env; they share one play."""

    def __init__(self, context: EnvCheckContext) -> None:
        self.context = context
        self._played: tuple[Any, TrajectoryBatch] | None = None
        self._tasks_changed = False

    def checks(self) -> EnvChecks:
        checks = self._checks()
        if self.context.tokenizer is None:  # nothing is played: no step info to read
            checks["step infos are JSON-serialisable"] = _skipped(_NO_TOKENIZER)
        return checks

    def _checks(self) -> EnvChecks:
        return {
            "episodes play without a tokenizer": _skipped(
                "a harness env needs the model's tokenizer: it pads the episodes and "
                "tokenizes the calls of a backend that reports no ids"
            ),
            "token streams keep the fidelity invariants": self.token_streams,
            "tools are declared and bad calls answered as tool messages": _skipped(
                "the tools are the program's: it runs them and answers their bad calls"
            ),
            "episodes leave task_data unchanged": self.task_data_unchanged,
            "finish_episode runs once per episode": _skipped(_NO_HOOKS),
            "episodes cut at max_steps_per_episode are truncated": _skipped(
                "the program decides how many calls it makes; episode_timeout_seconds "
                "bounds its run (checked below)"
            ),
            "episodes are deterministic for the same task_data, also concurrently": _skipped(
                "a program's runs are the program's: its call ids, clock and threads are "
                "not the env's to seed"
            ),
            "an env with run_hooks_inline never waits in its hooks": _skipped(_NO_HOOKS),
            "programs end within episode_timeout_seconds and exit 0": self.programs_end,
            "each program's calls reach the gateway and become one episode": self.calls,
            f"rows per rollout are at most {ROWS_PER_ROLLOUT_GOAL:g}": self.rows_per_rollout,
            "the verifier returns a finite reward": self.verifier,
            "a crashing program fails its episode with its exit status and stderr, "
            "not the run": self.crash,
            "a program past episode_timeout_seconds is stopped and fails its episode": (self.hang),
        }

    # ------------------------------------------------------------ the env's own program
    def play(self) -> tuple[Any, TrajectoryBatch]:
        """The env's program on the tasks, with check_env's agent (played once)."""
        if self._played is None:
            tokenizer = self._tokenizer()
            tasks = self.context.tasks()
            before = json.dumps(tasks, sort_keys=True)
            env = self.context.make(tokenizer=tokenizer)
            batch = env.run_trial(tasks, self.context.agent, self.context.num_rollouts)
            self._tasks_changed = json.dumps(tasks, sort_keys=True) != before
            self.context.record(batch)  # for check_env's check of the step infos
            self._played = env, batch
        return self._played

    def _tokenizer(self) -> Any:
        if self.context.tokenizer is None:
            raise CheckSkipped(_NO_TOKENIZER)
        return self.context.tokenizer

    def episodes(self) -> list[Episode]:
        return self.play()[1].all_episodes

    def programs_end(self) -> str:
        env, batch = self.play()
        episodes = batch.all_episodes
        require(episodes, "no program ran")
        for episode in episodes:
            if episode.error:
                raise CheckFailed(f"a program's episode failed: {episode.error}")
            code = episode.metrics.get("program_exit_code")
            require(code == 0, f"a program ended with exit code {code}")
        timeout = env.config.episode_timeout_seconds
        return f"{len(episodes)} programs exited 0 within {timeout:g} s"

    def calls(self) -> str:
        episodes = self.episodes()
        sessions = Counter(e.session_id for e in episodes)
        require(
            all(count == 1 for count in sessions.values()),
            "a program session gave more than one episode",
        )
        for episode in episodes:
            require(episode.steps, f"a program made no model call: {episode.error}")
        sources = Counter(step.token_source for e in episodes for step in e.steps)
        segments = sum(len(e.segments) for e in episodes)
        listed = ", ".join(f"{source}: {count}" for source, count in sorted(sources.items()))
        return (
            f"{sum(sources.values())} calls in {len(episodes)} episodes, {segments} segments "
            f"({listed})"
        )

    def rows_per_rollout(self) -> str:
        """Segments per episode against docs/harness.md's goal; the calls that started a
        new segment are named when it is missed."""
        episodes = self.episodes()
        require(episodes, "no program ran")
        rows = sum(len(e.segments) for e in episodes) / len(episodes)
        if rows > ROWS_PER_ROLLOUT_GOAL:
            restarts = [
                (index, step.info.get("call"))
                for index, episode in enumerate(episodes)
                for step in episode.steps
                if step.info.get("new_segment")
            ]
            named = ", ".join(f"episode {e} call {c}" for e, c in restarts[:5])
            raise CheckFailed(
                f"{rows:.2f} rows per rollout, above the goal of {ROWS_PER_ROLLOUT_GOAL:g}: "
                f"{len(restarts)} calls did not extend the conversation before them and "
                f"started a new segment ({named}). Each is a row of its own: the program "
                "rewrote or dropped its history, ran calls in parallel, or the model writes "
                "its replies (a tool call) otherwise than the chat template writes them back "
                "(docs/harness.md, 'From calls to an episode')"
            )
        return f"{rows:.2f} rows per rollout ({len(episodes)} episodes)"

    def token_streams(self) -> str:
        env, batch = self.play()
        failed = batch.failed
        if failed:
            raise CheckFailed(f"{len(failed)} episodes failed, first: {failed[0].error}")
        require(len(batch) > 0, "no trajectories")
        check_padded_rows(batch, env.chat.pad_token_id)
        for episode in batch.all_episodes:
            _check_sampled_once(episode)
        shares = [e.metrics["sampled_token_share"] for e in batch.all_episodes]
        return f"{len(batch)} rows; sampled token share {sum(shares) / len(shares):.3g}"

    def verifier(self) -> str:
        episodes = self.episodes()
        for episode in episodes:
            if episode.error:
                raise CheckFailed(f"no reward: the episode failed: {episode.error}")
            require(
                math.isfinite(episode.final_reward), "the verifier returned a non-finite reward"
            )
            require(
                episode.steps[-1].reward == episode.final_reward,
                "the verifier's reward is not on the last call",
            )
        rewards = sorted({e.final_reward for e in episodes})
        return f"rewards {', '.join(f'{r:g}' for r in rewards)}"

    def task_data_unchanged(self) -> None:
        self.play()
        require(
            not self._tasks_changed,
            "playing an episode changed its task_data; task_data is shared by every "
            "rollout of a task: copy what prepare and verify change",
        )

    # ------------------------------------------------------------ replaced programs
    def run_replaced(self, program: CommandProgram, **config: Any) -> Episode:
        """One episode of the first task with the env's program replaced."""
        env = self.context.make(tokenizer=self._tokenizer(), **config)
        env.program = lambda task_data: program  # type: ignore[method-assign]
        try:
            batch = env.run_trial(self.context.tasks()[:1], self.context.agent, 1)
        except Exception as exc:
            raise CheckFailed(f"the run failed, not only the episode: {exc}") from exc
        return batch.all_episodes[0]

    def crash(self) -> str:
        episode = self.run_replaced(CommandProgram((sys.executable, "-c", _CRASHING_PROGRAM)))
        error = episode.error or ""
        require(
            f"exited with status {CRASH_STATUS}" in error and CRASH_MARKER in error,
            f"the crashed program's episode error does not give its exit status "
            f"({CRASH_STATUS}) and stderr: {error!r}",
        )
        require(episode.final_reward == 0.0, "a crashed program's episode has a reward")
        require(
            episode.num_turns == 1,
            f"the crashed program's call before it crashed was not kept ({episode.num_turns} "
            "calls)",
        )
        return "its episode failed with the exit status and stderr; its call was kept"

    def hang(self) -> str:
        program = CommandProgram((sys.executable, "-c", _HANGING_PROGRAM))
        episode = self.run_replaced(program, episode_timeout_seconds=HANG_TIMEOUT_SECONDS)
        error = episode.error or ""
        require(
            "did not finish within" in error,
            f"a program that hangs was not stopped at episode_timeout_seconds: {error!r}",
        )
        return f"stopped after {HANG_TIMEOUT_SECONDS:g} s, its episode failed"


def _check_sampled_once(episode: Episode) -> None:
    """Each call's completion is agent tokens exactly once: nothing is trained twice."""
    agent_tokens = sum(int(segment.agent_mask.sum()) for segment in episode.segments)
    sampled = sum(step.num_agent_tokens for step in episode.steps)
    require(
        agent_tokens == sampled,
        f"the episode has {agent_tokens} agent tokens but its calls sampled {sampled}",
    )
