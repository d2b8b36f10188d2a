"""check_env's view of an env with several roles: episodes grouped into games (one
episode per role), and the per-role check (every role plays, in every game, with a
token stream of its own that keeps the invariants)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from agentsgym.testing.check_report import require
from agentsgym.trajectory import Episode

__all__ = ["check_roles", "games"]

GameKey = tuple[str, int]


def games(episodes: Iterable[Episode]) -> dict[GameKey, list[Episode]]:
    """Episodes by game, ``(session_id, episode_index)``: one episode per role of an env
    with roles, one episode otherwise."""
    found: dict[GameKey, list[Episode]] = {}
    for episode in episodes:
        found.setdefault((episode.session_id, episode.episode_index), []).append(episode)
    return found


def check_roles(env: Any, episodes: list[Episode]) -> str:
    """Fail the running check unless every game holds one episode per declared role,
    every role acted in some game, and each role's token stream keeps the invariants."""
    roles = tuple(env.role_names)
    played = games(episodes)
    acted = dict.fromkeys(roles, 0)
    for game in played.values():
        require(
            [e.role for e in game] == list(roles),
            f"a game has the episodes of roles {[e.role for e in game]}, expected {list(roles)}",
        )
        require(sum(e.num_turns for e in game) >= 1, "a game ended before any role acted")
        for episode in game:
            acted[str(episode.role)] += episode.num_turns > 0
            episode.check()
            for message in episode.messages[1:]:
                require(
                    message.get("role") != "system",
                    f"role {episode.role!r} was shown a system message after its first "
                    "prompt; a role's system prompt opens its own conversation",
                )
    idle = [role for role, count in acted.items() if not count]
    require(
        not idle,
        f"role {idle[0]!r} never acted in {len(played)} games; turn_role must give every "
        "declared role its turns"
        if idle
        else "",
    )
    trainable = ", ".join(env.trainable_roles) or "none"
    return f"roles {', '.join(roles)} (trainable: {trainable}) in {len(played)} games"
