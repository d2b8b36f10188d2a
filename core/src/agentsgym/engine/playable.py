"""PlayableEnv: what the engine needs of an env. ``MultistepEnv`` implements it; the
engine cannot import the env, whose ``run_trial`` calls the engine."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import pluggy

    from agentsgym.config import EnvConfig
    from agentsgym.tokenization import ChatTokenizer
    from agentsgym.types import Role


class PlayableEnv(Protocol):
    """An env as the engine plays it (:class:`agentsgym.MultistepEnv` implements it)."""

    config: EnvConfig
    """The validated env_config (step limit, budgets, reward strategy...)."""
    chat: ChatTokenizer | None
    """The env's tokenizer and chat template, or ``None`` to play without tokens."""
    sessions: dict[str, dict[str, Any]]
    """The task of every session being played, by session id."""
    plugin_manager: pluggy.PluginManager
    """The env's own hook relay: the env and the plugins given to it."""
    run_hooks_inline: bool
    roles: tuple[Role, ...]
    """The env's agents when it has several (a game's seats), each with its name, whether
    it trains, its default agent; empty for a single-agent env (it declares nothing)."""
    role_chats: dict[str, ChatTokenizer]
    """The chat tokenizer of each role whose model differs (the others use ``chat``)."""

    @property
    def env_id(self) -> str: ...

    @property
    def hook(self) -> Any: ...

    @property
    def role_names(self) -> tuple[str, ...]:
        """The declared roles' names, in order (empty: one agent)."""
        ...

    @property
    def trainable_roles(self) -> tuple[str, ...]:
        """The roles whose episodes go into training batches (env_config
        ``trainable_roles``, else those declared trainable)."""
        ...

    def new_session(self, task_data: dict[str, Any], session_id: str | None = None) -> str: ...

    def episode_tools(self, task_data: dict[str, Any]) -> Any:
        """The episode's toolbox, or ``None``; it may be ``async def`` (an env whose tools
        live on a server)."""
        ...
