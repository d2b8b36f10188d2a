"""An env's registration with Atropos's API server: register (waiting for the trainer),
read this env's status, register again when a restarted server has forgotten the env,
and say goodbye.

A restarted ``run-api`` has lost every registration: it answers ``GET /status-env``
with HTTP 500 while ``GET /status`` works. That is told apart from an outage (a
gateway's 5xx, a server that is down: ``/status`` fails too), which is waited out.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from agentsgym_atropos.api_client import AtroposAPI, AtroposError, TransientError
from agentsgym_atropos.stats import ProducerStats

logger = logging.getLogger("agentsgym_atropos.producer")

DISCONNECT_WINDOW = 10.0
"""How long the goodbye (``/disconnect-env``) is retried: everything was pushed by
then, so it is not worth holding the run up."""
FORGOTTEN_STATUS = 500
"""What atroposlib's ``run-api`` answers ``/status-env`` for an env it does not know."""


class _EnvForgotten(AtroposError):
    """The API server answers, but no longer knows this env (it restarted)."""


class Registration:
    """This env on the API server: its id there, and the trainer's batch size and steps.

    :param stats: the producer's, which counts registrations.
    :param name, weight, group_size, max_token_length: what the env registers with.
    :param register_timeout: how long to wait for the trainer to start.
    :param poll_seconds: how often to ask while waiting.
    :param clock: the monotonic clock of the wait.
    """

    def __init__(
        self,
        api: AtroposAPI,
        stats: ProducerStats,
        *,
        name: str,
        weight: float,
        group_size: int,
        max_token_length: int,
        register_timeout: float,
        poll_seconds: float,
        clock: Callable[[], float],
    ) -> None:
        self.api = api
        self.stats = stats
        self.name = name
        self.weight = weight
        self.group_size = group_size
        self.max_token_length = max_token_length
        self.register_timeout = register_timeout
        self.poll_seconds = poll_seconds
        self._clock = clock
        self.env_id: int | None = None
        self.batch_size = -1
        self.num_steps: int | None = None

    async def register(self) -> None:
        """Register as an env, waiting for the trainer to start; read the batch size."""
        deadline = self._clock() + self.register_timeout
        while True:
            answer = await self.api.request(
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
                self.stats.registrations += 1
                break
            if self._clock() > deadline:
                raise AtroposError(
                    f"the Atropos API server at {self.api.shown_url} kept answering "
                    f"{answer.get('status')!r} for {self.register_timeout:g}s: start the "
                    "trainer (it registers with POST /register and pulls GET /batch) first"
                )
            logger.info("waiting for the trainer to start (%s)", answer.get("status"))
            await asyncio.sleep(self.poll_seconds)
        info = await self.api.request("GET", "/info")
        self.batch_size = int(info.get("batch_size", -1))
        if self.batch_size > 0 and self.group_size > self.batch_size:
            raise AtroposError(
                f"group_size {self.group_size} exceeds the trainer's batch size "
                f"{self.batch_size}; lower --group-size"
            )
        logger.info(
            "registered with %s as env %d (%s); trainer batch size %d",
            self.api.shown_url,
            self.env_id,
            self.name,
            self.batch_size,
        )

    async def status(self) -> dict[str, Any]:
        """This env's status on the server, registering again if the server forgot it."""
        while True:
            try:
                return await self.api.request(  # type: ignore[no-any-return]
                    "GET", "/status-env", attempt=self._status_attempt
                )
            except _EnvForgotten as exc:
                logger.warning(
                    "the Atropos API server at %s no longer knows env %s (%s): it restarted; "
                    "registering again",
                    self.api.shown_url,
                    self.env_id,
                    exc,
                )
                await self.register()

    async def _status_attempt(self) -> Any:
        try:
            return await self.api.attempt("GET", "/status-env", {"env_id": self.env_id})
        except TransientError as exc:
            if exc.status == FORGOTTEN_STATUS and await self._server_answers():
                raise _EnvForgotten(str(exc)) from exc
            raise

    async def _server_answers(self) -> bool:
        """Whether the server is up (its ``/status`` answers), whatever it knows."""
        try:
            await self.api.attempt("GET", "/status")
        except AtroposError:
            return False
        return True

    async def disconnect(self) -> None:
        """Say goodbye to the server; best effort (every group was pushed by then)."""
        if self.env_id is None:
            return
        try:
            await self.api.request(
                "POST",
                "/disconnect-env",
                {"env_id": self.env_id},
                window=min(self.api.outage_window, DISCONNECT_WINDOW),
            )
        except AtroposError as exc:
            logger.warning("could not disconnect from %s: %s", self.api.shown_url, exc)
