"""AgentGymEnv: an env on a server of AgentGym's protocol, played by the runner.

AgentGym's env servers (``agentenv-*``) speak five calls: ``/create`` -> an id,
``/reset {id, data_idx}`` and ``/step {id, action}`` -> ``{observation, reward,
done}``, ``/observation``, ``/close``. Text in, text out: no chat messages, no system
prompt, no info. This env turns that into an agentsgym episode:

* the task is ``task_data["data_idx"]``, the index the server's dataset knows; the
  reset also carries the rollout's seed (``rollout_seed``: an ``agentsgym serve``
  server seeds its agents of the other roles with it; servers that read no such field
  ignore it; ``rollout_seed_field: null`` leaves it out);
* the conversation starts with ``system_prompt`` (a system message, if given), then
  ``conversation_start`` (AgentGym's clients put the task instructions there as a
  user turn and a canned assistant "OK"), then the reset's observation as a user
  message; each later observation is a user message;
* the action sent is the agent's reply, or the last match of ``action_regex`` in it
  (group 1 when the pattern has a group), as AgentGym's clients extract ``Action:``;
* the step reward is the reply's ``reward_field`` (``reward``, or ``score`` for
  servers that report it there), or its increase when ``reward_mode`` is
  ``cumulative``; the reply's other fields go to the step's ``info``; ``done`` ends
  the episode, unless the reply also says ``truncated`` (``agentsgym serve`` at its
  step limit): then it ends truncated, as locally (:data:`agentsgym.TRUNCATED_KEY`);
* the runner tokenizes, assigns per-token rewards and pads, as for any env.

These servers cannot recognise a repeated call, so only calls that are safe to
repeat are retried after a fault that may have reached the server: ``/reset``
(starting a task again is the same start) and ``/close``. ``/create`` and
``/step`` are retried only when the request never left; otherwise the episode fails
rather than risk a step applied twice. Retries go on for ``retry_window_seconds``
(60 s by default: a server restart). Servers that answer an error as a 200 with an
``error`` field (as AgentGym's do) fail the episode with that error.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import Field, field_validator

from agentsgym import TRUNCATED_KEY, StepResult, hookimpl
from agentsgym.runtime import redact_text
from agentsgym_serve.call_failures import RemoteCallError
from agentsgym_serve.errors import RemoteEnvError
from agentsgym_serve.remote_client import ConversationConfig, RemoteClientEnv, RemoteEpisodeState
from agentsgym_serve.retry_policy import Retry, RetryPolicy, client_policy
from agentsgym_serve.transport import Transport
from agentsgym_serve.urls import AGENTGYM_PREFIX, split_protocol

if TYPE_CHECKING:
    import datasets

logger = logging.getLogger("agentsgym_serve.client")

TASK_KEY = "data_idx"


class AgentGymConfig(ConversationConfig):
    """env_config of an :class:`AgentGymEnv`: how to talk to one AgentGym server (the
    conversation, reset, reward, dataset and retry keys are :class:`ConversationConfig`'s)."""

    reset_index_field: str = Field(
        TASK_KEY,
        min_length=1,
        description="the /reset body field that carries task_data['data_idx'] (ALFWorld's "
        "server calls it 'game')",
    )
    create_body: dict[str, Any] | None = Field(
        None, description="a JSON body for /create (most servers take none)"
    )
    reward_field: str = Field(
        "reward", min_length=1, description="the reply field holding the reward ('score')"
    )
    action_regex: str | None = Field(
        None,
        description="send only the last match of this pattern in the reply (group 1 if it "
        r"has one), e.g. 'Action:\s*(.*?)(?=\n|$)'; without a match the reply is sent as is",
    )

    @field_validator("action_regex")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"action_regex {value!r} is not a valid pattern: {exc}") from None
        return value


@dataclass(kw_only=True)
class AgentGymEpisode(RemoteEpisodeState):
    """The state of an episode on an AgentGym server: its instance id."""

    id: int
    observation: str = ""

    def describe(self) -> str:
        return f"instance {self.id}"


class AgentGymEnv(RemoteClientEnv):
    """An env on a server of AgentGym's protocol (see the module docstring).

    :param url: the server, ``http://host:port`` or ``agentgym+http://host:port``.
    :param tokenizer: as for any env.
    :param env_config: :class:`AgentGymConfig` keys.
    :param plugins: extra plugins for this env's hook relay.
    :param retry: how calls are retried and bounded.
    """

    config_class = AgentGymConfig
    config: AgentGymConfig

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
        _, self.url = split_protocol(url)
        self.address = f"{AGENTGYM_PREFIX}{self.url}"
        policy = client_policy(retry, self.config.retry_window_seconds)
        self.transport = Transport(self.url, policy)
        self._action = re.compile(self.config.action_regex) if self.config.action_regex else None
        self._start = self.config.opening()

    # ------------------------------------------------------------------ calls
    async def _post(self, path: str, body: Any, retry: Retry) -> Any:
        reply = await self.transport.call(
            "POST", path, body, retry=retry, timeout=self.config.hook_timeout_seconds
        )
        if isinstance(reply, dict) and "error" in reply and "observation" not in reply:
            raise RemoteEnvError(
                f"{redact_text(self.url)}{path} answered an error: {str(reply['error'])[:1000]}"
            )
        return reply

    def _reward(self, reply: dict[str, Any], path: str, *, required: bool) -> float:
        field_name = self.config.reward_field
        if field_name not in reply:
            if not required:
                return 0.0
            raise RemoteEnvError(
                f"{path} answered without a {field_name!r} field ({', '.join(reply)}); set "
                "reward_field in env_config to the field that holds the reward"
            )
        try:
            return float(reply[field_name])
        except (TypeError, ValueError):
            raise RemoteEnvError(
                f"{path} answered a non-numeric {field_name!r}: {reply[field_name]!r}"
            ) from None

    # ------------------------------------------------------------------ hooks
    @hookimpl
    async def initialize_episode(
        self, task_data: dict[str, Any], rollout_seed: int
    ) -> AgentGymEpisode:
        index = task_data.get(TASK_KEY)
        if isinstance(index, bool) or not isinstance(index, int) or index < 0:
            raise RemoteEnvError(
                f"an AgentGym server's task is task_data['{TASK_KEY}'], a task index (an "
                f"integer >= 0); this task_data has {TASK_KEY}={index!r}"
            )
        created = await self._post("/create", self.config.create_body, Retry.UNSENT)
        session = created.get("id") if isinstance(created, dict) else created
        if isinstance(session, bool) or not isinstance(session, int):
            raise RemoteEnvError(f"/create answered {str(created)[:200]!r}, not an id")
        try:
            body = {
                "id": session,
                self.config.reset_index_field: index,
                **self.config.reset_seed(rollout_seed),
                **self.config.reset_fields,
            }
            reply = await self._post("/reset", body, Retry.IDEMPOTENT)
            observation = _observation(reply, "/reset")
            score = self._reward(reply, "/reset", required=False)
        except BaseException:
            await self._close(session)
            raise
        prompt = [*self._start, {"role": "user", "content": observation}]
        return AgentGymEpisode(id=session, prompt=prompt, score=score, observation=observation)

    @hookimpl
    async def step_episode(self, state: AgentGymEpisode, action: str, step: int) -> StepResult:
        sent = self._extract(action)
        reply = await self._post("/step", {"id": state.id, "action": sent}, Retry.UNSENT)
        observation = _observation(reply, "/step")
        if "done" not in reply:
            raise RemoteEnvError(f"/step answered without a 'done' field: {str(reply)[:200]!r}")
        reward = state.reward(self._reward(reply, "/step", required=True), self.config.reward_mode)
        info = {k: v for k, v in reply.items() if k not in ("observation", "done")}
        if sent != action:
            info["action_sent"] = sent
        state.advance([{"role": "user", "content": observation}], step)
        state.observation = observation
        # agentsgym serve says `truncated` beside `done` (its step limit ended the
        # episode): the step's info then carries it, and the episode ends truncated
        done = bool(reply["done"]) and info.get(TRUNCATED_KEY) is not True
        return StepResult(state, reward, done, info)

    @hookimpl
    async def finish_episode(self, state: AgentGymEpisode | None) -> None:
        if state is not None:
            await self._close(state.id)

    async def _close(self, session: int) -> None:
        try:
            await self._post("/close", {"id": session}, Retry.IDEMPOTENT)
        except (RemoteEnvError, RemoteCallError) as exc:  # the episode's outcome stands
            logger.warning(
                "closing instance %s on %s failed: %s", session, redact_text(self.url), exc
            )

    def _extract(self, action: str) -> str:
        if self._action is None:
            return action
        matches = list(self._action.finditer(action))
        if not matches:
            return action
        last = matches[-1]
        return last.group(1) if last.re.groups else last.group(0)

    # ------------------------------------------------------------------ datasets
    def get_train_dataset(self) -> datasets.Dataset:
        """``data_idx`` 0..dataset_size-1, as rows that name this server."""
        size = self.config.dataset_size
        if size is None:
            raise NotImplementedError(
                "an AgentGym server does not say how many tasks it has; set dataset_size in "
                "env_config"
            )
        return self.make_dataset({TASK_KEY: index} for index in range(size))


def _observation(reply: Any, path: str) -> str:
    if not isinstance(reply, dict) or "observation" not in reply:
        raise RemoteEnvError(f"{path} answered {str(reply)[:200]!r}, without an 'observation'")
    observation = reply["observation"]
    if isinstance(observation, str):
        return observation
    return json.dumps(observation, ensure_ascii=False)
