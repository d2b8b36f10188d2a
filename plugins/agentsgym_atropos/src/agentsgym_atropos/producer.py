"""An Atropos producer: agentsgym envs as an environment of Atropos's API server.

Atropos (NousResearch) runs environments as services that push *scored groups* to
its API server, from which a trainer pulls batches. :class:`AtroposProducer` plays
groups of ``group_size`` rollouts of an env's tasks with the agentsgym runner and
pushes each group as it finishes, the way atroposlib's own ``BaseEnv`` does:

1. ``POST /register-env`` until the trainer has started (the server answers "wait
   for trainer to start" until the trainer's first ``GET /batch``);
2. ``GET /info`` for the trainer's batch size;
3. while running: ``GET /status-env`` and pause (no new groups) while this env's
   queue holds ``max_batches_offpolicy`` batches or more (backpressure), stop when
   the server's step reaches ``num_steps`` or ``max_groups`` groups were pushed;
   else start groups, up to ``max_concurrency`` rollouts in flight;
4. ``POST /scored_data`` for every finished group; ``POST /disconnect-env`` at the end.

How agentsgym's fields map onto Atropos's ``ScoredDataGroup`` (one group = one task,
one sequence per scored episode):

* ``tokens``: the episode's token ids, exactly as the model saw and generated them;
* ``masks``: Atropos's labels convention: the token id where the model generated the
  token (agentsgym's ``agent_token_mask`` is 1), ``-100`` elsewhere;
* ``scores``: the episode's ``final_reward``;
* ``advantages`` (``advantages="per_token"``): agentsgym's per-token rewards,
  normalised over the group's agent tokens (as ``per-token-grpo`` does), 0.0 on env
  tokens; ``None`` by default, so the trainer computes group advantages from scores;
* ``inference_logprobs``: the sampled logprobs, one per token as atroposlib's
  ``ManagedServer`` writes them (the sampled value on model tokens, ``1.0`` on the
  masked ones), when every sequence of the group has them; else ``None`` (a 0.0
  would claim probability 1 for a token whose logprob is unknown);
* ``messages``: the episode's conversation;
* ``group_overrides["agentsgym"]``: the env id, task and session ids, so a trainer
  can trace a sequence back.

Where they differ: an episode that a chat template which is not prefix-preserving
split into several views becomes one sequence per view (each with the episode's
score), so that group holds more than ``group_size`` sequences; the API server then
holds it back until groups add up to the registered size, so use a prefix-preserving
(training) chat template with Atropos. A group with a failed episode is not pushed
(GRPO needs whole groups); it is counted in :attr:`AtroposProducer.stats` and logged.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from agentsgym.engine import DEFAULT_MAX_CONCURRENCY, arun_trial
from agentsgym.errors import AgentsGymError

if TYPE_CHECKING:
    from agentsgym import MultistepEnv
    from agentsgym.trajectory import TrajectoryGroup

logger = logging.getLogger(__name__)

IGNORE_INDEX = -100
MASKED_LOGPROB = 1.0
"""atroposlib's placeholder logprob on tokens the model did not generate."""
Advantages = Literal["none", "per_token"]


class AtroposError(AgentsGymError):
    """The Atropos API server could not be reached, or refused what was sent."""


@dataclass
class ProducerStats:
    """What a producer did (also logged)."""

    groups_pushed: int = 0
    sequences_pushed: int = 0
    groups_dropped: int = 0
    pauses: int = 0
    episodes_failed: int = 0
    errors: list[str] = field(default_factory=list)


def to_scored_data_group(
    group: TrajectoryGroup, *, advantages: Advantages = "none", env_id: int | None = None
) -> dict[str, Any]:
    """One task's group as Atropos's ``ScoredDataGroup`` (see the module docstring)."""
    tokens: list[list[int]] = []
    masks: list[list[int]] = []
    scores: list[float] = []
    messages: list[list[dict[str, Any]]] = []
    logprobs: list[list[float]] = []
    rewards: list[np.ndarray] = []
    agent_masks: list[np.ndarray] = []
    all_logprobs = True
    for episode, index in group.rows:
        segment = episode.segments[index]
        ids = segment.token_ids.astype(np.int64)
        agent = segment.agent_mask.astype(bool)
        tokens.append(ids.tolist())
        masks.append(np.where(agent, ids, IGNORE_INDEX).tolist())
        scores.append(float(episode.final_reward))
        messages.append([dict(m) for m in episode.messages])
        sampled = segment.logprobs
        if sampled is None:
            all_logprobs = False
        else:
            logprobs.append(np.where(agent, sampled, MASKED_LOGPROB).tolist())
        rewards.append(np.asarray(episode.segment_rewards[index], dtype=np.float64))
        agent_masks.append(agent)
    data: dict[str, Any] = {
        "tokens": tokens,
        "masks": masks,
        "scores": scores,
        "messages": messages,
        "advantages": group_advantages(rewards, agent_masks) if advantages == "per_token" else None,
        "inference_logprobs": logprobs if all_logprobs and logprobs else None,
        "group_overrides": {
            "agentsgym": {
                "env_id": group.env_id,
                "task_index": group.task_index,
                "task_data": group.task_data,
                "session_ids": [e.session_id for e, _ in group.rows],
            }
        },
    }
    if env_id is not None:
        data["env_id"] = env_id
    return data


def group_advantages(rewards: Sequence[np.ndarray], agent_masks: Sequence[np.ndarray]) -> list[list[float]]:
    """Per-token rewards minus the mean over the group's agent tokens, over their std."""
    values = np.concatenate([r[m] for r, m in zip(rewards, agent_masks)]) if rewards else np.zeros(0)
    mean = float(values.mean()) if values.size else 0.0
    std = float(values.std()) if values.size > 1 else 0.0
    return [
        np.where(m, (r - mean) / (std + 1e-4), 0.0).tolist() for r, m in zip(rewards, agent_masks)
    ]


class AtroposProducer:
    """Plays an env's tasks in groups and pushes them to an Atropos API server.

    :param env: the env (built with the trainer model's tokenizer).
    :param agent: who plays (an agent object, e.g. the ``openai`` agent on the
        inference server Atropos's trainer updates).
    :param api_url: the API server, e.g. ``http://localhost:8000``.
    :param tasks: task_data to cycle through (default: the env's train dataset).
    :param group_size: rollouts per task, one group (GRPO's group).
    :param max_groups: stop after pushing this many groups (default: run until the
        server's step reaches its ``num_steps``).
    :param max_batches_offpolicy: pause while this env's queue holds this many of the
        trainer's batches (as atroposlib's ``BaseEnv``).
    :param max_concurrency: rollouts in flight at once.
    :param name: the name the env registers under (``desired_name``).
    :param weight: the env's sampling weight on the server.
    :param max_token_length: the longest sequence this env produces (registration).
    :param advantages: ``"none"`` (scores only) or ``"per_token"``.
    :param seed: shuffles the tasks and seeds the agents' rollout seeds.
    :param poll_seconds: how often to ask the server while waiting or paused.
    :param register_timeout: how long to wait for the trainer to start.
    """

    def __init__(
        self,
        env: MultistepEnv,
        agent: Any,
        api_url: str,
        *,
        tasks: Sequence[dict[str, Any]] | None = None,
        group_size: int = 8,
        max_groups: int | None = None,
        max_batches_offpolicy: int = 3,
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
        name: str | None = None,
        weight: float = 1.0,
        max_token_length: int = 8192,
        advantages: Advantages = "none",
        seed: int = 0,
        poll_seconds: float = 1.0,
        register_timeout: float = 600.0,
        request_timeout: float = 60.0,
        on_group: Callable[[TrajectoryGroup, dict[str, Any]], None] | None = None,
    ) -> None:
        if env.chat is None:
            raise AtroposError(
                "Atropos trainers train on tokens: build the env with the model's tokenizer"
            )
        if group_size < 1 or (max_groups is not None and max_groups < 1):
            raise ValueError("group_size and max_groups must be at least 1")
        if advantages not in ("none", "per_token"):
            raise ValueError(f"advantages must be 'none' or 'per_token', got {advantages!r}")
        self.env = env
        self.agent = agent
        self.api_url = api_url.rstrip("/")
        self.tasks = list(tasks) if tasks is not None else list(env.get_train_dataset()["task_data"])
        if not self.tasks:
            raise AtroposError(f"{env.env_id} has no tasks to play")
        self.group_size = group_size
        self.max_groups = max_groups
        self.max_batches_offpolicy = max_batches_offpolicy
        self.max_concurrency = max_concurrency
        self.name = name or env.env_id
        self.weight = weight
        self.max_token_length = max_token_length
        self.advantages: Advantages = advantages
        self.seed = seed
        self.poll_seconds = poll_seconds
        self.register_timeout = register_timeout
        self.request_timeout = request_timeout
        self.on_group = on_group
        self.stats = ProducerStats()
        self.env_id: int | None = None
        self.batch_size = -1
        self.num_steps: int | None = None
        self._rng = random.Random(seed)
        self._order: list[int] = []
        self._session: Any = None

    # ------------------------------------------------------------------ http
    async def _request(self, method: str, path: str, payload: Any = None) -> Any:
        import aiohttp

        try:
            async with self._session.request(
                method, self.api_url + path, json=payload
            ) as response:
                text = await response.text()
                if response.status >= 400:
                    raise AtroposError(
                        f"{method} {self.api_url}{path} answered HTTP {response.status}: {text[:300]}"
                    )
                return await response.json(content_type=None)
        except aiohttp.ClientError as exc:
            raise AtroposError(
                f"cannot reach the Atropos API server at {self.api_url} ({type(exc).__name__}: "
                f"{exc}); start it with `run-api --port N` and pass --api-url"
            ) from exc
        except asyncio.TimeoutError as exc:
            raise AtroposError(f"{self.api_url}{path} did not answer in time") from exc

    async def register(self) -> None:
        """Register as an env, waiting for the trainer to start; read the batch size."""
        deadline = time.monotonic() + self.register_timeout
        while True:
            answer = await self._request(
                "POST",
                "/register-env",
                {
                    "max_token_length": self.max_token_length,
                    "desired_name": self.name,
                    "weight": self.weight,
                    "group_size": self.group_size,
                    "min_batch_allocation": None,
                },
            )
            if answer.get("status") == "success":
                self.env_id = int(answer["env_id"])
                steps = answer.get("num_steps")
                self.num_steps = int(steps) if isinstance(steps, int) and steps > 0 else None
                break
            if time.monotonic() > deadline:
                raise AtroposError(
                    f"the Atropos API server at {self.api_url} kept answering "
                    f"{answer.get('status')!r} for {self.register_timeout:g}s: start the "
                    "trainer (it registers with POST /register and pulls GET /batch) first"
                )
            logger.info("waiting for the trainer to start (%s)", answer.get("status"))
            await asyncio.sleep(self.poll_seconds)
        info = await self._request("GET", "/info")
        self.batch_size = int(info.get("batch_size", -1))
        if self.batch_size > 0 and self.group_size > self.batch_size:
            raise AtroposError(
                f"group_size {self.group_size} exceeds the trainer's batch size "
                f"{self.batch_size}; lower --group-size"
            )
        logger.info(
            "registered with %s as env %d (%s); trainer batch size %d",
            self.api_url, self.env_id, self.name, self.batch_size,
        )

    async def status(self) -> dict[str, Any]:
        return await self._request("GET", "/status-env", {"env_id": self.env_id})  # type: ignore[no-any-return]

    def _should_pause(self, status: dict[str, Any]) -> bool:
        if self.batch_size <= 0 or self.max_batches_offpolicy <= 0:
            return False
        queued = int(status.get("queue_size", 0)) * self.group_size
        return queued >= self.max_batches_offpolicy * self.batch_size

    def _finished(self, status: dict[str, Any]) -> bool:
        if self.max_groups is not None and self.stats.groups_pushed >= self.max_groups:
            return True
        step = status.get("current_step")
        return self.num_steps is not None and isinstance(step, int) and step >= self.num_steps

    # ------------------------------------------------------------------ playing
    def _next_task(self) -> tuple[int, dict[str, Any]]:
        if not self._order:
            self._order = list(range(len(self.tasks)))
            self._rng.shuffle(self._order)
        index = self._order.pop(0)
        return index, self.tasks[index]

    async def _play_group(self, task_index: int, task: dict[str, Any]) -> None:
        batch = await arun_trial(
            self.env,
            [task],
            self.agent,
            self.group_size,
            max_concurrency=self.max_concurrency,
            seed=self.seed + task_index,
        )
        group = batch.groups[0]
        group.task_index = task_index
        if group.failed or len(group.episodes) < self.group_size:
            self.stats.groups_dropped += 1
            self.stats.episodes_failed += len(group.failed)
            first = group.failed[0].error if group.failed else "missing rollouts"
            logger.warning("group of task %d not pushed: %s", task_index, first)
            return
        if self.max_groups is not None and self.stats.groups_pushed >= self.max_groups:
            return
        data = to_scored_data_group(group, advantages=self.advantages, env_id=self.env_id)
        await self._request("POST", "/scored_data", data)
        self.stats.groups_pushed += 1
        self.stats.sequences_pushed += len(data["tokens"])
        if self.on_group is not None:
            self.on_group(group, data)

    async def run(self) -> ProducerStats:
        """Register, produce until done, disconnect; returns what was done."""
        import aiohttp

        self._session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=self.request_timeout)
        )
        groups_in_flight = max(1, self.max_concurrency // self.group_size)
        running: set[asyncio.Task[None]] = set()
        try:
            await self.register()
            while True:
                status = await self.status()
                if self._finished(status):
                    break
                if self._should_pause(status):
                    self.stats.pauses += 1
                    logger.info("the trainer's queue is full (%s); pausing", status.get("queue_size"))
                else:
                    wanted = groups_in_flight - len(running)
                    if self.max_groups is not None:
                        wanted = min(wanted, self.max_groups - self.stats.groups_pushed - len(running))
                    for _ in range(max(0, wanted)):
                        running.add(asyncio.ensure_future(self._play_group(*self._next_task())))
                if not running:
                    await asyncio.sleep(self.poll_seconds)
                    continue
                done, _ = await asyncio.wait(
                    running, timeout=self.poll_seconds, return_when=asyncio.FIRST_COMPLETED
                )
                for task in done:
                    running.discard(task)
                    task.result()  # a push that failed stops the producer, loudly
            for task in running:
                task.cancel()
            await asyncio.gather(*running, return_exceptions=True)
            if self.env_id is not None:
                await self._request("POST", "/disconnect-env", {"env_id": self.env_id})
        finally:
            for task in running:
                task.cancel()
            await self._session.close()
        logger.info(
            "pushed %d groups (%d sequences) to %s; %d groups dropped, %d pauses",
            self.stats.groups_pushed, self.stats.sequences_pushed, self.api_url,
            self.stats.groups_dropped, self.stats.pauses,
        )
        return self.stats


def produce(
    env: MultistepEnv, agent: Any, api_url: str, **options: Any
) -> ProducerStats:
    """:class:`AtroposProducer` as a plain call (see its options)."""
    from agentsgym.aio import run_sync

    return run_sync(AtroposProducer(env, agent, api_url, **options).run())
