"""PlayableEnv: what the engine needs of an env. ``MultistepEnv`` implements it; the
engine cannot import the env, whose ``run_trial`` calls the engine."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import pluggy

    from agentsgym.config import EnvConfig
    from agentsgym.tokenization import ChatTokenizer


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

    @property
    def env_id(self) -> str: ...

    @property
    def hook(self) -> Any: ...

    def new_session(self, task_data: dict[str, Any], session_id: str | None = None) -> str: ...

    def episode_tools(self, task_data: dict[str, Any]) -> Any: ...
