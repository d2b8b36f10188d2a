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

:mod:`agentsgym_atropos.scored_data` says how a group maps onto Atropos's
``ScoredDataGroup``. A group with a failed episode is not pushed (GRPO needs whole
groups); it is counted in :attr:`AtroposProducer.stats` and logged. When
``max_dropped_in_a_row`` groups in a row were dropped so (every episode failing: an
agent that cannot reach its model, an env that breaks), the producer stops with an
:class:`~agentsgym_atropos.api_client.AtroposError` quoting the last failure, as
``rollout`` stops at ``--max-failure-rate``, instead of playing on for ever.

Outages of the API server are retried for ``outage_window`` seconds
(:mod:`agentsgym_atropos.api_client`); groups that finished meanwhile wait in memory
and are pushed when the server answers again, and :attr:`AtroposProducer.stats` says
what was pushed and what was left if it stays away longer. A restarted server has
forgotten the env's registration: the producer then registers again (waiting, as at
the start, for the trainer to come back) and goes on under its new env id
(:mod:`agentsgym_atropos.registration`).

Everything the producer logs or raises, and the trace it adds to each group
(``group_overrides["agentsgym"]``), passes through :func:`agentsgym.output.redact`:
a key in the API URL's userinfo or in task data stays out of logs and trainers.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from agentsgym.runtime import DEFAULT_MAX_CONCURRENCY, arun_trial, redact_text
from agentsgym_atropos.api_client import (
    DEFAULT_OUTAGE_WINDOW,
    AtroposAPI,
    AtroposError,
)
from agentsgym_atropos.registration import Registration
from agentsgym_atropos.scored_data import Advantages, to_scored_data_group
from agentsgym_atropos.stats import DEFAULT_MAX_DROPPED_IN_A_ROW, ProducerStats

if TYPE_CHECKING:
    from agentsgym import MultistepEnv, TrajectoryGroup

logger = logging.getLogger(__name__)


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
    :param advantages: ``"none"`` or ``"per_token"``.
    :param seed: shuffles the tasks and seeds the agents' rollout seeds.
    :param poll_seconds: how often to ask the server while waiting or paused.
    :param register_timeout: how long to wait for the trainer to start.
    :param request_timeout: seconds one attempt of a request may take.
    :param outage_window: how long a failing request is retried (connection errors,
        timeouts, HTTP 5xx) before the producer gives up with
        :class:`AtroposOutageError`; ``0`` gives up at the first failure.
    :param max_dropped_in_a_row: stop with an :class:`AtroposError` once this many
        groups in a row had a failed episode (``0``: never stop for that).
    :param clock, sleep: the monotonic clock and the sleep of the retry loop; a test
        passes a fake pair to play an outage without waiting for it.
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
        outage_window: float = DEFAULT_OUTAGE_WINDOW,
        max_dropped_in_a_row: int = DEFAULT_MAX_DROPPED_IN_A_ROW,
        on_group: Callable[[TrajectoryGroup, dict[str, Any]], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    ) -> None:
        if env.chat is None:
            raise AtroposError(
                "Atropos trainers train on tokens: build the env with the model's tokenizer"
            )
        if group_size < 1 or (max_groups is not None and max_groups < 1):
            raise ValueError("group_size and max_groups must be at least 1")
        if advantages not in ("none", "per_token"):
            raise ValueError(f"advantages must be 'none' or 'per_token', got {advantages!r}")
        if outage_window < 0:
            raise ValueError(f"outage_window must be >= 0 seconds, got {outage_window}")
        if max_dropped_in_a_row < 0:
            raise ValueError(f"max_dropped_in_a_row must be >= 0, got {max_dropped_in_a_row}")
        self.env = env
        self.agent = agent
        self.api_url = api_url.rstrip("/")
        self.shown_url = redact_text(self.api_url)
        """The API URL as logs and messages show it (userinfo redacted)."""
        self.tasks = (
            list(tasks) if tasks is not None else list(env.get_train_dataset()["task_data"])
        )
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
        self.outage_window = outage_window
        self.max_dropped_in_a_row = max_dropped_in_a_row
        self._dropped_in_a_row = 0
        self._last_failure = ""
        self.on_group = on_group
        self.stats = ProducerStats()
        self._rng = random.Random(seed)
        self._clock = clock
        self._order: list[int] = []
        self.api = AtroposAPI(
            self.api_url,
            request_timeout=request_timeout,
            outage_window=outage_window,
            on_retry=self._count_retry,
            clock=clock,
            sleep=sleep,
            # Its own generator: how often the server failed must not change the tasks.
            rng=random.Random(seed),
        )
        self.registration = Registration(
            self.api,
            self.stats,
            name=self.name,
            weight=weight,
            group_size=group_size,
            max_token_length=max_token_length,
            register_timeout=register_timeout,
            poll_seconds=poll_seconds,
            clock=clock,
        )

    def _count_retry(self) -> None:
        self.stats.retries += 1

    # ------------------------------------------------------------------ the server
    async def register(self) -> None:
        """Register as an env, waiting for the trainer to start; read the batch size."""
        await self.registration.register()

    async def status(self) -> dict[str, Any]:
        """This env's status on the server, registering again if the server forgot it."""
        return await self.registration.status()

    async def disconnect(self) -> None:
        """Say goodbye to the server; best effort (every group was pushed by then)."""
        await self.registration.disconnect()

    @property
    def env_id(self) -> int | None:
        """This env's id on the API server (``None`` until registered)."""
        return self.registration.env_id

    @property
    def batch_size(self) -> int:
        """The trainer's batch size (``-1`` until registered)."""
        return self.registration.batch_size

    @property
    def num_steps(self) -> int | None:
        """The trainer's last step, if it said."""
        return self.registration.num_steps

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
            self._last_failure = redact_text(str(first))
            self._dropped_in_a_row += 1
            logger.warning("group of task %d not pushed: %s", task_index, self._last_failure)
            return
        self._dropped_in_a_row = 0
        if self.max_groups is not None and self.stats.groups_pushed >= self.max_groups:
            self.stats.groups_discarded += 1
            return
        data = to_scored_data_group(group, advantages=self.advantages, env_id=self.env_id)
        try:
            await self.api.request("POST", "/scored_data", data)
        except BaseException:  # cancelled, or the server stayed away too long
            self.stats.groups_discarded += 1
            raise
        self.stats.groups_pushed += 1
        self.stats.sequences_pushed += len(data["tokens"])
        if self.on_group is not None:
            self.on_group(group, data)

    def _start_groups(self, running: set[asyncio.Task[None]]) -> None:
        groups_in_flight = max(1, self.max_concurrency // self.group_size)
        wanted = groups_in_flight - len(running)
        if self.max_groups is not None:
            wanted = min(wanted, self.max_groups - self.stats.groups_pushed - len(running))
        for _ in range(max(0, wanted)):
            running.add(asyncio.ensure_future(self._play_group(*self._next_task())))
            self.stats.groups_started += 1

    async def _produce(self, running: set[asyncio.Task[None]]) -> None:
        """The main loop: ask for status, pause or start groups, collect finished ones."""
        while True:
            status = await self.status()
            if self._finished(status):
                return
            if self._should_pause(status):
                self.stats.pauses += 1
                logger.info("the trainer's queue is full (%s); pausing", status.get("queue_size"))
            else:
                self._start_groups(running)
            if not running:
                await asyncio.sleep(self.poll_seconds)
                continue
            done, _ = await asyncio.wait(
                running, timeout=self.poll_seconds, return_when=asyncio.FIRST_COMPLETED
            )
            for task in done:
                running.discard(task)
                task.result()  # a push that failed for good stops the producer, loudly
            self._check_failures()

    def _check_failures(self) -> None:
        """Stop once ``max_dropped_in_a_row`` groups in a row had a failed episode."""
        bound = self.max_dropped_in_a_row
        if not bound or self._dropped_in_a_row < bound:
            return
        raise AtroposError(
            f"the last {self._dropped_in_a_row} groups all had a failed episode, so none "
            f"was pushed ({self.stats.groups_pushed} pushed in all); the last failure: "
            f"{self._last_failure}. Fix what fails (the log has every group's), or raise "
            "--max-dropped-groups"
        )

    async def run(self) -> ProducerStats:
        """Register, produce until done, disconnect; returns what was done.

        Raises :class:`AtroposOutageError` when the server stayed away longer than
        the outage window (and :class:`AtroposError` when it refused a request);
        :attr:`stats` then holds what was pushed before, and what was left.
        """
        await self.api.open()
        running: set[asyncio.Task[None]] = set()
        try:
            await self.register()
            await self._produce(running)
            await self._stop(running)
            await self.disconnect()
        except BaseException as exc:
            if isinstance(exc, Exception):
                self.stats.errors.append(redact_text(str(exc)))
            raise
        finally:
            await self._stop(running)
            await self.api.close()
            self._log_summary()
        return self.stats

    async def _stop(self, running: set[asyncio.Task[None]]) -> None:
        """Cancel the groups still in flight and wait for them to wind down."""
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
        running.clear()

    def _log_summary(self) -> None:
        stats = self.stats
        logger.info(
            "pushed %d groups (%d sequences) to %s; %d dropped (a failed episode), %d "
            "discarded and %d unfinished when it stopped; %d retries, %d pauses, %d "
            "registrations",
            stats.groups_pushed,
            stats.sequences_pushed,
            self.shown_url,
            stats.groups_dropped,
            stats.groups_discarded,
            stats.groups_unfinished,
            stats.retries,
            stats.pauses,
            stats.registrations,
        )


def produce(env: MultistepEnv, agent: Any, api_url: str, **options: Any) -> ProducerStats:
    """:class:`AtroposProducer` as a plain call (see its options)."""
    from agentsgym.runtime import run_sync

    return run_sync(AtroposProducer(env, agent, api_url, **options).run())
