"""What the clients of env servers share: one base, a small adapter per protocol.

An env on a server is played like a local one: the runner renders, tokenizes and
rewards here; the server only applies actions. Three protocols are spoken, each by an
adapter over this base (:class:`~agentsgym_serve.remote_env.RemoteEnv`, agentsgym's
own; :class:`~agentsgym_serve.agentgym_env.AgentGymEnv`;
:class:`~agentsgym_serve.openenv_env.OpenEnvEnv`). The base holds what they have in
common:

* where the server is, once: :attr:`RemoteClientEnv.location`, what dataset rows
  name (the registered id that points at the server, else its URL as given,
  credentials included, so that a row plays again), :attr:`~RemoteClientEnv.env_id`,
  what episodes and logs name (the same, with URL credentials redacted), and
  ``make_dataset``, rows that name the location;
* the episode state (:class:`RemoteEpisodeState`): the prompt the server last sent,
  for which step, and the score so far for servers that report a cumulative reward;
* ``format_prompt``: that prompt, refused when the runner asks for another step's;
* closing the connections (the retrying :class:`~agentsgym_serve.transport.Transport`
  of HTTP protocols; OpenEnv's sessions close with their episodes).

:class:`ConversationConfig` holds the env_config keys of the protocols that send
text, not chat messages (AgentGym's, OpenEnv's): how the conversation starts, the
reset's extra fields, how to read the reward, the dataset's size and the retry window.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, field_validator

from agentsgym import EnvConfig, Messages, MultistepEnv, hookimpl
from agentsgym.runtime import redact_text
from agentsgym_serve.errors import RemoteEnvError
from agentsgym_serve.schemas import ChatMessage
from agentsgym_serve.transport import Transport

if TYPE_CHECKING:
    import datasets

AGENTGYM_ROLES = {"human": "user", "gpt": "assistant", "system": "system"}
"""AgentGym's conversation roles (``{from: human|gpt, value}``) as chat roles."""


@dataclass(kw_only=True)
class RemoteEpisodeState:
    """An episode on a server: what it last sent, and the score so far.

    :ivar prompt: the messages of the next prompt (the server's, as the runner sees them).
    :ivar prompt_step: the step that prompt is for.
    :ivar score: the server's cumulative reward so far (``reward_mode: cumulative``).
    """

    prompt: Messages
    prompt_step: int = 0
    score: float = 0.0

    def describe(self) -> str:
        """The episode as errors name it."""
        return "the session"

    def advance(self, prompt: Messages, step: int) -> None:
        """The server answered step ``step``: ``prompt`` is for the next one."""
        self.prompt = prompt
        self.prompt_step = step + 1

    def reward(self, value: float, mode: Literal["step", "cumulative"]) -> float:
        """The step reward of a reported ``value``: itself, or its increase over the
        score so far when the server reports a cumulative score."""
        if mode == "step":
            return value
        reward, self.score = value - self.score, value
        return reward


class RemoteClientEnv(MultistepEnv):
    """The base of an env played on a server (see the module docstring).

    An adapter sets :attr:`url` (the server's base URL), :attr:`address` (the server's
    URL as rows name it) and :attr:`transport` (when it speaks HTTP), and implements
    ``initialize_episode``, ``step_episode`` and ``finish_episode`` for its protocol
    with a :class:`RemoteEpisodeState`.
    """

    url: str
    address: str
    """The server's URL as dataset rows name it: with the protocol's prefix
    (``agentgym+``, ``openenv+ws``), and credentials, if it has them."""
    transport: Transport | None = None

    @property
    def location(self) -> str:
        """What dataset rows name to play on this server: the registered id that points
        at it, else :attr:`address`. A row must play again, so a URL keeps its
        credentials here; what is shown or logged is :attr:`env_id`."""
        if self.spec is not None and "://" not in self.spec.id:
            return self.spec.id
        return self.address

    @property
    def env_id(self) -> str:
        """What episodes record and logs name: :attr:`location`, URL credentials redacted."""
        return redact_text(self.location)

    def make_dataset(self, task_data_list: Iterable[dict[str, Any]]) -> datasets.Dataset:
        """Rows that play ``task_data_list`` on this server (they name :attr:`location`)."""
        from agentsgym.runtime import rows_to_dataset

        config = self.row_env_config()
        return rows_to_dataset(
            {"env_class_path": self.location, "env_config": config, "task_data": task}
            for task in task_data_list
        )

    @hookimpl
    def format_prompt(self, state: RemoteEpisodeState, step: int) -> Messages:
        if state.prompt_step != step or not state.prompt:
            raise RemoteEnvError(
                f"the runner asked for the prompt of step {step}, but {state.describe()} "
                f"sent the prompt of step {state.prompt_step}"
            )
        return [dict(m) for m in state.prompt]  # type: ignore[misc]

    def close(self) -> None:
        """Close this env's connections (the runner's event loop's included)."""
        if self.transport is not None:
            self.transport.close()

    async def aclose(self) -> None:
        """Close the connections of the running event loop (``asyncio.run`` callers)."""
        if self.transport is not None:
            await self.transport.aclose()


class ConversationConfig(EnvConfig):
    """env_config keys of a text protocol (AgentGym's, OpenEnv's): see the module
    docstring; each protocol's config adds its own."""

    system_prompt: str | None = Field(
        None, description="a system message that starts every conversation"
    )
    conversation_start: list[ChatMessage] = Field(
        default_factory=list,
        description="messages before the first observation, e.g. AgentGym's instructions "
        "as a user turn and its canned assistant reply: [{role: user, content: ...}, "
        "{role: assistant, content: 'OK. ...'}] (AgentGym's {from: human|gpt, value} "
        "form is taken too)",
    )
    reset_fields: dict[str, Any] = Field(
        default_factory=dict,
        description="more fields of every reset, under the task's own (e.g. AgentGym's "
        "{'world_type': 'Text'})",
    )
    reward_mode: Literal["step", "cumulative"] = Field(
        "step",
        description="'step': the reported reward is this step's; 'cumulative': it is the "
        "score so far, and the step reward is its increase",
    )
    dataset_size: int | None = Field(
        None,
        ge=0,
        description="tasks on the server: get_train_dataset() gives tasks 0..n-1 (AgentGym's "
        "data_idx, OpenEnv's seed)",
    )
    retry_window_seconds: float | None = Field(
        None,
        ge=0,
        description="how long a failed call that may be retried is retried (default: the "
        "retry policy's, 60 s, enough for a server restart); 0 never retries",
    )
    rollout_seed_field: str | None = Field(
        "rollout_seed",
        min_length=1,
        description="the reset field that carries the rollout's seed (its agents' "
        "EpisodeContext.seed), for a server whose own agents play other roles (agentsgym "
        "serve seeds them with it, so a task's rollouts differ); null: not sent",
    )

    def reset_seed(self, rollout_seed: int) -> dict[str, Any]:
        """The reset's field that tells the server the rollout's seed (none when off)."""
        if self.rollout_seed_field is None:
            return {}
        return {self.rollout_seed_field: rollout_seed}

    @field_validator("conversation_start", mode="before")
    @classmethod
    def _agentgym_messages(cls, value: Any) -> Any:
        # AgentGym's clients write ConversationMessage({"from": "human"|"gpt", "value":
        # ..., "loss": ...}); those are taken as they are written there.
        if isinstance(value, list):
            return [_chat_message(m) for m in value]
        return value

    def opening(self) -> Messages:
        """The messages before the first observation."""
        start: Messages = []
        if self.system_prompt is not None:
            start.append({"role": "system", "content": self.system_prompt})
        start += [m.model_dump() for m in self.conversation_start]  # type: ignore[misc]
        return start


def _chat_message(message: Any) -> Any:
    if isinstance(message, dict) and "from" in message and "role" not in message:
        role = AGENTGYM_ROLES.get(str(message["from"]), str(message["from"]))
        return {"role": role, "content": message.get("value", "")}
    return message
