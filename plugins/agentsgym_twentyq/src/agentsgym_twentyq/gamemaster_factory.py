"""Building the gamemaster an env_config asks for."""

from __future__ import annotations

import re
from typing import Any

import agentsgym
from agentsgym.errors import EnvConfigError
from agentsgym_twentyq.agent_gamemaster import AgentGamemaster
from agentsgym_twentyq.config import RULES_GAMEMASTER, TwentyQuestionsConfig
from agentsgym_twentyq.gamemaster import Gamemaster, RulesGamemaster


def as_gamemaster(obj: Any) -> Gamemaster:
    """A :class:`Gamemaster` from a gamemaster or from an agent (wrapped)."""
    if isinstance(obj, Gamemaster):
        return obj
    return AgentGamemaster(obj)


def build_gamemaster(config: TwentyQuestionsConfig) -> Gamemaster:
    """The rules gamemaster, or the registered agent named by ``config.gamemaster``.

    Built when the env is built, so a misspelt agent name or a bad option fails at
    once with the agent registry's "did you mean" hint, not mid-rollout.
    """
    if config.gamemaster == RULES_GAMEMASTER:
        return RulesGamemaster()
    try:
        agent = agentsgym.make_agent(config.gamemaster, **config.gamemaster_options)
        return AgentGamemaster(
            agent, name=config.gamemaster, check=what_to_check(config.gamemaster_options)
        )
    except Exception as exc:  # any failure to build it is a problem of this env_config
        raise EnvConfigError(
            f"env_config gamemaster={config.gamemaster!r} with gamemaster_options "
            f"{sorted(config.gamemaster_options)}: {str(exc).rstrip('.')}. Use 'rules' for "
            "the offline gamemaster or a name from `agentsgym list-agents`."
        ) from exc


SHOWN_OPTIONS = ("base_url", "model")  # where the gamemaster is; never a key or token
_USERINFO = re.compile(r"(?<=://)[^/@\s]*@")


def what_to_check(options: dict[str, Any]) -> str:
    """What a user should look at when the gamemaster agent cannot answer: the server
    its options point at (a URL's userinfo left out)."""
    shown = [
        f"{key}={_USERINFO.sub('', str(options[key]))!r}" for key in SHOWN_OPTIONS if key in options
    ]
    if not shown:
        return "env_config gamemaster and gamemaster_options"
    return f"env_config gamemaster_options {', '.join(shown)}: is the server up there?"
