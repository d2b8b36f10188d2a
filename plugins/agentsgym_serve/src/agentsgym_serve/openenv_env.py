"""OpenEnvEnv: any OpenEnv server played as an agentsgym env.

``agentsgym.make("openenv+ws://host:port")`` (or ``openenv+http://``, ``+https://``,
``+wss://``) gives an :class:`OpenEnvEnv`. Each episode holds one WebSocket session
(openenv-core's own ``GenericEnvClient``): the reset opens it, the steps go over it,
``finish_episode`` closes it. The runner tokenizes, assigns per-token rewards and
checks the token stream, as for every env; the server sends observations, reward
and done, mapped by env_config (:class:`OpenEnvConfig`):

* **reset**: the task's ``task_data`` is the reset's kwargs (``{"seed": 3}``, or
  ``{"data_idx": 3}`` / ``{"task_data": {...}}`` for an ``agentsgym serve`` server),
  over ``reset_fields``, over the rollout's seed (``rollout_seed``, which an
  ``agentsgym serve`` server seeds its agents with; openenv-core drops a reset kwarg
  its env does not take; ``rollout_seed_field: null`` leaves it out);
* **observation -> messages** and **reply -> action**: see
  :mod:`agentsgym_serve.openenv_mapping` (chat or TextArena-shaped ``messages``, a
  field or nested field, only the new part of a growing one; the reply as text or as
  JSON, a dict-valued field or the whole action). The conversation starts with
  ``system_prompt`` and ``conversation_start``;
* **reward and done**: the reply's ``reward`` (``None`` is 0), or its increase with
  ``reward_mode: cumulative``; ``done`` as sent. An observation that says
  ``truncated`` (``agentsgym serve`` at its step limit) ends the episode there as
  truncated (the step's ``info["truncated"]``, :data:`agentsgym.TRUNCATED_KEY`), as
  locally: the server's limit is the one that counts. The observation's ``info`` (or
  its other fields) becomes the step's ``info``.

**Faults.** Connecting, and a reset whose connection failed (nothing was played
yet, so sending it again on a new session is the same start), are retried with
backoff within ``retry_window_seconds``, as is a server at capacity
(``CAPACITY_REACHED``). A step is never retried: a WebSocket session dies with its
connection, so a dropped step fails the episode with an error saying so; a server
error fails it with the server's message. Failed episodes are recorded
(``batch.failed``), never dropped.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentsgym import TRUNCATED_KEY, StepResult, hookimpl
from agentsgym.runtime import Attempts, redact_text, retry_async
from agentsgym_serve.errors import RemoteEnvError
from agentsgym_serve.openenv_mapping import OpenEnvConfig, action_of, observation_messages
from agentsgym_serve.remote_client import RemoteClientEnv, RemoteEpisodeState
from agentsgym_serve.retry_policy import RetryPolicy, client_policy
from agentsgym_serve.urls import normalise_url

if TYPE_CHECKING:
    import datasets

logger = logging.getLogger("agentsgym_serve.client")

OPENENV_PREFIX = "openenv+"
_SCHEMES = {"ws": "http", "wss": "https", "http": "http", "https": "https"}


def split_openenv_url(url: str) -> str:
    """The server's ``http(s)://`` base of an ``openenv+ws://`` (etc.) URL."""
    scheme, rest = _scheme_and_rest(url)
    return normalise_url(f"{_SCHEMES[scheme]}://{rest}")


def canonical_openenv_url(url: str) -> str:
    """The URL as an env id: ``openenv+SCHEME://host:port[/path]``, normalised, with the
    scheme the user wrote (``ws``, ``wss``, ``http``, ``https``): rows and episodes
    record the URL as given."""
    scheme = _scheme_and_rest(url)[0]
    base = split_openenv_url(url)
    return f"{OPENENV_PREFIX}{scheme}{base[len(_SCHEMES[scheme]) :]}"


def _scheme_and_rest(url: str) -> tuple[str, str]:
    text = url.strip()
    if text[: len(OPENENV_PREFIX)].lower() == OPENENV_PREFIX:
        text = text[len(OPENENV_PREFIX) :]
    scheme, sep, rest = text.partition("://")
    if not sep or scheme.lower() not in _SCHEMES:
        raise ValueError(
            f"{url!r} is not an OpenEnv server URL; expected openenv+ws://host:port "
            "(or openenv+wss://, openenv+http://, openenv+https://)"
        )
    return scheme.lower(), rest


@dataclass(kw_only=True)
class OpenEnvEpisode(RemoteEpisodeState):
    """An episode's session on the server: its openenv-core client."""

    client: Any
    observation: dict[str, Any] = field(default_factory=dict)
    observation_text: str = ""
    """The observation field's whole text (what ``observation_new_only`` compares with)."""


class OpenEnvEnv(RemoteClientEnv):
    """An env on an OpenEnv server (see the module docstring).

    :param url: ``openenv+ws://host:port`` (or ``+wss``, ``+http``, ``+https``).
    :param tokenizer: as for any env.
    :param env_config: :class:`OpenEnvConfig` keys.
    :param retry: the retry window and backoff of connecting and resetting.
    """

    config_class = OpenEnvConfig
    config: OpenEnvConfig

    def __init__(
        self,
        url: str,
        tokenizer: Any = None,
        env_config: dict[str, Any] | None = None,
        *,
        plugins: Iterable[object] = (),
        retry: RetryPolicy | None = None,
    ) -> None:
        super().__init__(tokenizer, env_config, plugins=plugins)
        self.url = split_openenv_url(url)
        self.address = canonical_openenv_url(url)  # as given: openenv+ws://, not http
        self.retry = client_policy(retry, self.config.retry_window_seconds)
        self._start = self.config.opening()

    # ------------------------------------------------------------------ calls
    def _client(self) -> Any:
        from openenv.core import GenericEnvClient

        return GenericEnvClient(
            base_url=self.url,
            connect_timeout_s=self.retry.connect_timeout,
            message_timeout_s=self.config.message_timeout_seconds,
        )

    async def _open_and_reset(self, kwargs: dict[str, Any]) -> tuple[Any, Any]:
        """A connected client and its reset's result, retried while that is safe."""

        async def attempt() -> tuple[Any, Any]:
            client = self._client()
            try:
                await client.connect()
                return client, await client.reset(**kwargs)
            except BaseException:
                await _quietly_close(client)
                raise

        return await retry_async(
            attempt,
            self.retry,
            retryable=_retryable_reset,
            give_up=self._reset_failed,
            on_retry=self._log_retry,
        )

    def _reset_failed(self, exc: Exception, how: Attempts) -> RemoteEnvError:
        why = f" after {how.attempts} attempts (retry window)" if how.exhausted else ""
        return RemoteEnvError(
            f"reset on OpenEnv server {redact_text(self.url)} failed{why}: "
            f"{type(exc).__name__}: {redact_text(str(exc))[:1000]}"
        )

    def _log_retry(self, exc: Exception, attempts: int, wait: float) -> None:
        logger.info(
            "OpenEnv reset on %s failed, retrying in %.2f s: %s",
            redact_text(self.url),
            wait,
            redact_text(str(exc)),
        )

    # ------------------------------------------------------------------ hooks
    @hookimpl
    async def initialize_episode(
        self, task_data: dict[str, Any], rollout_seed: int
    ) -> OpenEnvEpisode:
        seed = self.config.reset_seed(rollout_seed)
        kwargs = {**seed, **self.config.reset_fields, **task_data}
        client, result = await self._open_and_reset(kwargs)
        observation = _as_dict(result.observation)
        score = _reward(result.reward)
        messages, text = observation_messages(observation, self.config, "")
        return OpenEnvEpisode(
            client=client,
            prompt=[*self._start, *messages],
            score=score,
            observation=observation,
            observation_text=text,
        )

    @hookimpl
    async def step_episode(self, state: OpenEnvEpisode, action: str, step: int) -> StepResult:
        payload = action_of(action, self.config)
        try:
            result = await state.client.step(payload)
        except Exception as exc:  # noqa: BLE001 (never retried: see the module docstring)
            await _quietly_close(state.client)
            dropped = "server error" if isinstance(exc, RuntimeError) else "connection failed"
            raise RemoteEnvError(
                f"step {step} on OpenEnv server {redact_text(self.url)} failed ({dropped}; a "
                f"step is not sent twice): {type(exc).__name__}: {redact_text(str(exc))[:1000]}"
            ) from None
        observation = _as_dict(result.observation)
        reward = state.reward(_reward(result.reward), self.config.reward_mode)
        truncated = observation.get(TRUNCATED_KEY) is True  # agentsgym serve's step limit
        done = bool(result.done) and not truncated
        info = observation.get("info")
        if not isinstance(info, dict):
            info = {k: v for k, v in observation.items() if k not in ("messages",)}
        if truncated:  # the server's verdict: the episode ends here, as truncated
            info = {**info, TRUNCATED_KEY: True}
        messages, state.observation_text = observation_messages(
            observation, self.config, state.observation_text
        )
        state.advance(messages, step)
        state.observation = observation
        return StepResult(state, reward, done, dict(info))

    @hookimpl
    async def finish_episode(self, state: OpenEnvEpisode | None) -> None:
        if state is not None:
            await _quietly_close(state.client)

    # ------------------------------------------------------------------ datasets
    def get_train_dataset(self) -> datasets.Dataset:
        """Tasks ``{"seed": 0..dataset_size-1}``, as rows that name this server."""
        if self.config.dataset_size is None:
            raise NotImplementedError(
                "an OpenEnv server does not list its tasks; set dataset_size in env_config"
            )
        return self.make_dataset({"seed": i} for i in range(self.config.dataset_size))


def _retryable_reset(exc: Exception) -> bool:
    """A failed connect or reset that may be sent again (nothing was played yet)."""
    if isinstance(exc, RuntimeError):  # the server answered an error
        return "CAPACITY_REACHED" in str(exc)
    return isinstance(exc, (ConnectionError, OSError, asyncio.TimeoutError)) or (
        type(exc).__module__.startswith("websockets")
    )


async def _quietly_close(client: Any) -> None:
    try:
        await client.close()
    except Exception as exc:  # noqa: BLE001 (the episode's outcome stands)
        logger.debug("closing an OpenEnv session failed: %s", exc)


def _as_dict(observation: Any) -> dict[str, Any]:
    return observation if isinstance(observation, dict) else {"observation": observation}


def _reward(value: Any) -> float:
    if value is None:
        return 0.0
    try:
        return float(value)
    except (TypeError, ValueError):
        raise RemoteEnvError(f"the server sent a non-numeric reward: {value!r}") from None
