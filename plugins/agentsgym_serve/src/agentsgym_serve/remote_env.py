"""RemoteEnv: an env served by ``agentsgym serve``, played like a local one.

Its episode hooks are ``async def`` and call the server's ``/agentsgym/v1``
endpoints; everything else happens here, in the runner, exactly as for a local env:
the chat template, the token stream, per-token rewards, padding, the token checks.
The server sends back what the env's hooks returned (messages, step reward, reward
terms, info, finish terms) after the same checks the runner makes, so for the same
tasks and agent a remote episode is the local episode, token for token.

One remote session per episode: ``initialize_episode`` creates it and starts the
episode in one call, ``step_episode`` applies an action, ``finish_episode`` ends the
episode and closes the session. Each call carries the session's token and counters
(episode, step), is retried after a network fault (see
:mod:`agentsgym_serve.transport`), and each reply is checked to answer that very
call, so a dropped, duplicated or delayed reply can neither apply an action twice
nor land on another episode. A call that still fails fails its episode, which is
recorded with the error like any failed episode.

The config is the server's: the constructor asks the server to validate the
``env_config`` it is given (a bad key is refused there, with the same message as
locally) and takes the effective config from its answer, so ``max_steps_per_episode``
and the reward strategy are the served env's. Two keys are the client's own and are
not sent as config: ``retry_window_seconds``, how long a failed call is retried (see
:class:`~agentsgym_serve.retry_policy.RetryPolicy`), and ``role``, the role played on
a server of an env with roles (see below); dataset rows keep them.

**Roles.** A server of an env with roles (a game) lets its client play one role while
its own agents play the others (:mod:`agentsgym_serve.role_agents`). ``role`` names
the one played here (default: the server's for this config), and this env declares
that one role: its episodes, rows (the ``role`` column) and groups are the role's, and
its agent is told the role (``EpisodeContext.role``). The episode recorded here is
that role's view, token for token what a local run records for the role, its rewards
included: the game's outcome arrives with the ``finish_episode`` reply and is this
env's ``role_rewards``, on its last action and in ``metrics["outcome"]``, as locally.
The server's step limit counts every role's actions. The served env's
``trainable_roles`` are the server's business: the one role played here is trained.

**Truncation is the server's.** A step the server answers ``truncated`` (its step
limit ended the episode, on this client's step or on its agents' turns after it)
comes back with ``info["truncated"]`` (:data:`agentsgym.TRUNCATED_KEY`), and the
episode ends there as truncated: this client never works the limit out again.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import ConfigDict

from agentsgym import (
    TRUNCATED_KEY,
    AgentAction,
    EnvConfig,
    RewardTerm,
    Role,
    StepResult,
    hookimpl,
)
from agentsgym.errors import EnvConfigError
from agentsgym.runtime import redact_text
from agentsgym_serve.call_failures import RemoteCallError
from agentsgym_serve.errors import RemoteEnvError
from agentsgym_serve.remote_client import RemoteClientEnv, RemoteEpisodeState
from agentsgym_serve.retry_policy import RETRY_WINDOW_KEY, Retry, RetryPolicy, client_policy
from agentsgym_serve.schemas import MAX_ERROR_TEXT, PROTOCOL, V1_PREFIX
from agentsgym_serve.transport import Transport
from agentsgym_serve.urls import is_remote_url, split_protocol

if TYPE_CHECKING:
    import datasets

SETUP_TIMEOUT_SECONDS = 60.0
ROLE_KEY = "role"
"""The client's env_config key (and the create's field): the role played on a server
of an env with roles."""
OUTCOME_TERM = "outcome"
"""The finish reply's term that is the game's outcome for the role played here."""


class RemoteEnvConfig(EnvConfig):
    """The served env's effective config: its own keys are kept as they came."""

    model_config = ConfigDict(extra="allow", frozen=True)


@dataclass(kw_only=True)
class RemoteEpisode(RemoteEpisodeState):
    """The state of a remote episode: the server's handle, and what it last sent."""

    id: int
    token: str
    episode: int
    terms: dict[str, float] = field(default_factory=dict)
    observation: str = ""
    role: str | None = None
    outcome: float | None = None
    """The game's outcome for this role, once the finish reply brought it."""
    turns: int = 0
    """Actions sent (tool turns included): the next action's step index."""
    answered: dict[str, Any] | None = None
    """The server's answer to the action the toolbox sent, when it was the env's step:
    ``step_episode`` takes it instead of sending the action again."""

    def describe(self) -> str:
        return f"session {self.id}"


class RemoteEnv(RemoteClientEnv):
    """An env on an ``agentsgym serve`` server (see the module docstring).

    :param url: the server, ``http://host:port`` (a path prefix is kept).
    :param tokenizer: as for any env: the runner tokenizes here, not on the server.
    :param env_config: layered over the served config by the server, which validates
        it (unless it locks its config, then leave it out); its
        ``retry_window_seconds`` stays here and sets ``retry``'s window.
    :param plugins: extra plugins for this env's hook relay (run here).
    :param retry: how calls are retried and bounded.
    :param info: the server's ``/agentsgym/v1/env`` reply, when already fetched.
    """

    config_class: ClassVar[type[EnvConfig]] = RemoteEnvConfig

    def __init__(
        self,
        url: str,
        tokenizer: Any = None,
        env_config: dict[str, Any] | None = None,
        *,
        plugins: Iterable[object] = (),
        retry: RetryPolicy | None = None,
        info: dict[str, Any] | None = None,
    ) -> None:
        protocol, base = split_protocol(url)
        if protocol == "agentgym":
            raise RemoteEnvError(
                f"{redact_text(url)} names a server of AgentGym's protocol; use AgentGymEnv "
                "(or agentsgym.make, which picks the class)"
            )
        self.url = self.address = base
        self.requested_config = dict(env_config or {})
        window = self.requested_config.pop(RETRY_WINDOW_KEY, None)
        role = self.requested_config.pop(ROLE_KEY, None)
        self.client_config = {RETRY_WINDOW_KEY: window} if window is not None else {}
        if role is not None:
            self.client_config[ROLE_KEY] = role
        self.role: str | None = None if role is None else str(role)
        self.transport = Transport(base, client_policy(retry, window))
        try:
            self.server_info = info if info is not None else self.fetch_info()
            self._check_role()
            reply = self._validate_config()
        except BaseException:
            self.transport.close()  # now, not when the collector gets to it
            raise
        if self.role is None and reply.get(ROLE_KEY) is not None:
            self.role = str(reply[ROLE_KEY])  # the server's default role for this config
        # The one role played here (the served env's other roles are the server's).
        self.roles = (Role(self.role),) if self.role is not None else ()
        config = {k: v for k, v in reply["env_config"].items() if k != "trainable_roles"}
        super().__init__(tokenizer, config, plugins=plugins)

    def _validate_config(self) -> dict[str, Any]:
        try:
            return self.transport.call_sync(  # type: ignore[no-any-return]
                "POST",
                f"{V1_PREFIX}/env/config",
                {"env_config": self.requested_config},
                retry=Retry.IDEMPOTENT,
                timeout=SETUP_TIMEOUT_SECONDS,
            )
        except RemoteCallError as exc:
            if exc.code == "bad_env_config":
                raise EnvConfigError(exc.detail) from None
            raise

    def _check_role(self) -> None:
        """A ``role`` the server cannot let a client play is refused now, not per episode."""
        if self.role is None:
            return
        roles = list(self.server_info.get("client_roles") or ())
        if self.role not in roles:
            served = str(self.server_info.get("env_id"))
            can = f"roles a client may play there: {', '.join(roles)}" if roles else "no roles"
            raise RemoteEnvError(
                f"env_config role={self.role!r}: {redact_text(self.url)} serves {served} with "
                f"{can}; choose one of them, or leave role out"
            )

    def fetch_info(self) -> dict[str, Any]:
        """``GET /agentsgym/v1/env``: what the server serves."""
        info = self.transport.call_sync(
            "GET", f"{V1_PREFIX}/env", retry=Retry.IDEMPOTENT, timeout=SETUP_TIMEOUT_SECONDS
        )
        if not isinstance(info, dict) or info.get("protocol") != PROTOCOL:
            raise RemoteEnvError(
                f"{redact_text(self.url)} does not speak {PROTOCOL} (its /agentsgym/v1/env "
                f"answered {str(info)[:200]!r}); for a server of AgentGym's protocol use "
                f"agentgym+{redact_text(self.url)}"
            )
        return info

    @property
    def env_id(self) -> str:
        """The served env's id (what a local episode of it records, not the URL), unless
        this env was made from a registered id that points at the server."""
        if self.spec is not None and not is_remote_url(self.spec.id):
            return self.spec.id
        return str(self.server_info["env_id"])

    @property
    def default_agent(self) -> str | None:
        """The served env's default agent, as the server reports it (unless this env was
        made from a registered id that names one): ``rollout URL`` plays with it."""
        if self.spec is not None and self.spec.default_agent is not None:
            return self.spec.default_agent
        agent = self.server_info.get("default_agent")
        return str(agent) if agent else None

    # ------------------------------------------------------------------ hooks
    def _timeout(self) -> float:
        return self.config.hook_timeout_seconds

    async def _call(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        reply = await self.transport.call(
            "POST", V1_PREFIX + path, body, retry=Retry.IDEMPOTENT, timeout=self._timeout()
        )
        if not isinstance(reply, dict):
            raise RemoteEnvError(f"{path} answered {str(reply)[:200]!r}, not a JSON object")
        return reply

    @hookimpl
    async def initialize_episode(
        self, session_id: str, task_data: dict[str, Any], rollout_seed: int
    ) -> RemoteEpisode:
        body = {
            "request_id": uuid.uuid4().hex,
            "env_config": self.requested_config,
            "task_data": task_data,
            "session_id": session_id,
            "rollout_seed": rollout_seed,  # the server's agents play this rollout
        }
        if self.role is not None:  # only then: a server before roles refuses the field
            body[ROLE_KEY] = self.role
        reply = await self._call("/sessions", body)
        _expect(reply, "/sessions", episode=1)
        if reply.get(ROLE_KEY) != self.role:
            raise RemoteEnvError(
                f"/sessions answered for role {reply.get(ROLE_KEY)!r}, but this env plays "
                f"{self.role!r}; the episode is stopped"
            )
        return RemoteEpisode(
            id=int(reply["id"]),
            token=str(reply["token"]),
            episode=1,
            prompt=list(reply["messages"]),
            observation=str(reply.get("observation", "")),
            role=reply.get(ROLE_KEY),
        )

    async def episode_tools(self, task_data: dict[str, Any]) -> RemoteToolbox | None:  # type: ignore[override]
        """The served episode's tools (``None`` when the served env has none): their
        schemas, asked of the server, render this env's prompts as the served env's do."""
        if not self.server_info.get("has_tools"):
            return None
        body = {"env_config": self.requested_config, "task_data": task_data}
        schemas = (await self._call("/tools", body)).get("tools")
        return None if schemas is None else RemoteToolbox(self, schemas)

    async def send(self, state: RemoteEpisode, reply: AgentAction) -> dict[str, Any]:
        """Send the next action (its text, its calls, its ids); the server's answer."""
        path = f"/sessions/{state.id}/step"
        body = {
            "token": state.token,
            "episode": state.episode,
            "step": state.turns,
            "action": reply.text,
            "truncated": reply.truncated,
            "token_ids": reply.token_ids,
        }
        if reply.tool_calls:  # a served tool env answers them (without, it reads the text)
            body["tool_calls"] = reply.tool_calls
        answer = await self._call(path, body)
        _expect(answer, path, session=state.id, episode=state.episode, step=state.turns)
        state.turns += 1
        return answer

    @hookimpl
    async def step_episode(
        self, state: RemoteEpisode, action: str, step: int, reply: AgentAction
    ) -> StepResult:
        answer, state.answered = state.answered, None
        if answer is None:  # not sent by the toolbox (an env without tools)
            answer = await self.send(state, reply)
        if answer["step"] != step:
            raise RemoteEnvError(
                f"step {step} of {state.describe()} was answered as step {answer['step']}; "
                "the episode is stopped"
            )
        state.advance(list(answer["messages"]), step)
        state.terms = {str(k): float(v) for k, v in answer["reward_terms"].items()}
        state.observation = str(answer.get("observation", ""))
        done, info = bool(answer["done"]), answer["info"]
        if answer["truncated"] and not done:  # the server's verdict, not decided again here
            info = {**info, TRUNCATED_KEY: True}
        return StepResult(state, answer["reward"], done, info)

    @hookimpl
    def turn_role(self) -> str | None:
        # Only asked when this env plays a role: the server's agents take the other turns.
        return self.role

    @hookimpl
    def reward_shaping(self, state: RemoteEpisode) -> list[RewardTerm] | None:
        # The server ran the env's reward_shaping; its terms arrived with the step.
        return [RewardTerm(name, value) for name, value in state.terms.items()] or None

    @hookimpl
    async def finish_episode(
        self, state: RemoteEpisode | None, truncated: bool, error: str | None
    ) -> list[RewardTerm] | None:
        if state is None:  # no session: creating it failed, and the server cleaned up
            return None
        path = f"/sessions/{state.id}/finish"
        answer = await self._call(
            path,
            {
                "token": state.token,
                "episode": state.episode,
                "truncated": truncated,
                "error": error[:MAX_ERROR_TEXT] if error is not None else None,
                "close": True,
            },
        )
        _expect(answer, path, session=state.id, episode=state.episode)
        terms = {str(k): float(v) for k, v in answer["reward_terms"].items()}
        if self.role is not None:  # the game's outcome: this env's role_rewards
            state.outcome = terms.pop(OUTCOME_TERM, None)
        return [RewardTerm(name, value) for name, value in terms.items()] or None

    @hookimpl
    def role_rewards(self, state: RemoteEpisode) -> dict[str, float] | None:
        if self.role is None or state.outcome is None:
            return None
        return {self.role: state.outcome}

    # ------------------------------------------------------------------ datasets
    def _tasks(self, split: str) -> list[dict[str, Any]]:
        tasks: list[dict[str, Any]] = []
        while True:
            body: dict[str, Any] = {
                "env_config": self.requested_config,
                "offset": len(tasks),
                "limit": 10_000,
            }
            if self.role is not None:  # the tasks as this role may see them
                body[ROLE_KEY] = self.role
            page = self.transport.call_sync(
                "POST",
                f"{V1_PREFIX}/datasets/{split}",
                body,
                retry=Retry.IDEMPOTENT,
                timeout=SETUP_TIMEOUT_SECONDS,
            )
            tasks.extend(page["tasks"])
            if not page["tasks"] or len(tasks) >= page["total"]:
                return tasks

    def get_train_dataset(self) -> datasets.Dataset:
        """The served env's train split; rows name this server (or its registered id)."""
        return self.make_dataset(self._split("train"))

    def get_eval_dataset(self) -> datasets.Dataset:
        """The served env's eval split; rows name this server (or its registered id)."""
        return self.make_dataset(self._split("eval"))

    def _split(self, split: str) -> list[dict[str, Any]]:
        try:
            return self._tasks(split)
        except RemoteCallError as exc:
            if exc.code == "no_such_task":
                raise NotImplementedError(exc.detail) from None
            raise

    def row_env_config(self) -> dict[str, Any]:
        """What rows keep: the config asked of the server (it fills in the rest, as
        served then) and the client's own keys (``retry_window_seconds``, ``role``)."""
        return {**self.requested_config, **self.client_config}


class RemoteToolbox:
    """A served episode's tools (the toolbox of :meth:`RemoteEnv.episode_tools`): their
    schemas, and every action sent to the server, whose toolbox answers the calls it
    reads (a tool turn: the reply as it read it and the tool messages, as a local
    toolbox answers) or whose env steps it (``None``: ``step_episode`` takes the answer
    already given)."""

    def __init__(self, env: RemoteEnv, schemas: list[dict[str, Any]]) -> None:
        self.env = env
        self.schemas = tuple(schemas)

    async def respond(
        self, action: AgentAction, state: RemoteEpisode
    ) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
        answer = await self.env.send(state, action)
        if answer.get("tool_call_reply") is None:
            state.answered = answer
            return None
        return dict(answer["tool_call_reply"]), [dict(m) for m in answer["tool_results"]]


def _expect(reply: dict[str, Any], path: str, **wanted: int) -> None:
    """Refuse a reply that answers another session, episode or step than this call's."""
    names = {"session": "id"}
    for what, value in wanted.items():
        got = reply.get(names.get(what, what))
        if got != value:
            raise RemoteEnvError(
                f"{path} answered for {what} {got!r} instead of {value!r}: a reply meant for "
                "another call (a proxy mixing up connections?); the episode is stopped so "
                "that nothing is applied to the wrong session"
            )
