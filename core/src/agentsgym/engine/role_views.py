"""The per-role views of an episode with several roles, and the checks of what the
role hooks (``turn_role``, ``role_rewards``) return.

A view is what one role's model sees and does: its own conversation, token stream and
steps, recorded as an :class:`~agentsgym.trajectory.Episode` of its own. An env without
roles has one view, role ``None``: the episode as it always was.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentsgym.errors import EpisodeError
from agentsgym.trajectory import Episode

if TYPE_CHECKING:
    from agentsgym.engine.playable import PlayableEnv
    from agentsgym.tokenization import AgentSpan, ChatTokenizer, EpisodeTokenizer


@dataclass(slots=True)
class RoleView:
    """One role's side of an episode (see the module docstring). ``outcome``: what
    ``role_rewards`` gave the role, kept in its metrics even when it never acted."""

    episode: Episode
    chat: ChatTokenizer | None
    tokens: EpisodeTokenizer | None = None
    spans: list[AgentSpan] = field(default_factory=list)
    outcome: float | None = None

    @classmethod
    def new(
        cls,
        env: PlayableEnv,
        session_id: str,
        task_data: dict[str, Any],
        role: str | None,
        chat: ChatTokenizer | None,
    ) -> RoleView:
        episode = Episode(
            session_id=session_id,
            env_id=env.env_id,
            task_data=task_data,
            tokenized=chat is not None,
            role=role,
        )
        return cls(episode, chat)


def check_turn_role(named: Any, roles: tuple[str, ...], env: PlayableEnv) -> str:
    """What ``turn_role`` returned, once it is one of the env's roles."""
    if named is None:
        raise EpisodeError(
            f"{type(env).__name__} declares the roles {', '.join(roles)} but no turn_role "
            "implementation said whose turn it is; implement turn_role(state, step)"
        )
    if named not in roles:
        raise EpisodeError(
            f"{type(env).__name__}.turn_role returned {named!r:.80}; it must return one of "
            f"its declared roles: {', '.join(roles)}"
        )
    return str(named)


def role_reward_values(returned: Any, roles: tuple[str, ...], env: PlayableEnv) -> dict[str, float]:
    """What ``role_rewards`` returned, as ``{role: finite float}`` (``None``: nothing)."""
    if returned is None:
        return {}
    if not isinstance(returned, dict):
        raise EpisodeError(
            f"{type(env).__name__}.role_rewards returned {returned!r:.80}; it must return "
            "a dict {role: reward} or None"
        )
    values: dict[str, float] = {}
    for role, value in returned.items():
        if role not in roles:
            raise EpisodeError(
                f"{type(env).__name__}.role_rewards gave a reward to {role!r:.40}; its "
                f"roles are {', '.join(roles)}"
            )
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
        ):
            raise EpisodeError(
                f"{type(env).__name__}.role_rewards gave {role!r} the reward {value!r:.40}; "
                "each reward must be a finite number"
            )
        values[role] = float(value)
    return values
