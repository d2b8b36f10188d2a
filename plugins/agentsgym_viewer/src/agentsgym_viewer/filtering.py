"""Which episodes to show: the filters the terminal view and the HTML page share.

The HTML page implements the same rules in JavaScript (``static/viewer.js``,
``matches``); the browser test checks that both select the same episodes.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agentsgym_viewer.errors import ViewFilterError
from agentsgym_viewer.model import ViewedEpisode


class EpisodeFilter(BaseModel):
    """Every condition given must hold; an empty filter keeps every episode."""

    model_config = ConfigDict(frozen=True)

    env: str | None = Field(default=None, description="exact env id")
    min_reward: float | None = Field(default=None, description="final reward >= this")
    max_reward: float | None = Field(default=None, description="final reward <= this")
    failed: bool = Field(
        default=False,
        description="only episodes that ended with an error (an exception or a timeout in the "
        "env or the agent); a wrong answer is not a failure",
    )
    wrong: bool = Field(
        default=False,
        description="only episodes whose answer was not judged correct (ViewedEpisode.wrong)",
    )
    search: str | None = Field(
        default=None,
        description="case-insensitive text in the messages, error, task data, env or session id",
    )

    @model_validator(mode="after")
    def _range_not_empty(self) -> EpisodeFilter:
        if (
            self.min_reward is not None
            and self.max_reward is not None
            and self.min_reward > self.max_reward
        ):
            raise ViewFilterError(
                f"--min-reward {self.min_reward:g} is above --max-reward {self.max_reward:g}; "
                "no episode can match: swap them"
            )
        return self

    @property
    def active(self) -> bool:
        return any(
            (
                self.env,
                self.min_reward is not None,
                self.max_reward is not None,
                self.failed,
                self.wrong,
                self.search,
            )
        )

    def matches(self, episode: ViewedEpisode) -> bool:
        if self.env is not None and episode.env_id != self.env:
            return False
        if self.min_reward is not None and episode.final_reward < self.min_reward:
            return False
        if self.max_reward is not None and episode.final_reward > self.max_reward:
            return False
        if self.failed and not episode.failed:
            return False
        if self.wrong and not episode.wrong:
            return False
        return not self.search or self.search.lower() in episode.search_text()

    def apply(self, episodes: Iterable[ViewedEpisode]) -> list[ViewedEpisode]:
        """The episodes that match, in file order."""
        return [e for e in episodes if self.matches(e)]


GameKey = tuple[int, int | None, int]


def game_key(episode: ViewedEpisode) -> GameKey | None:
    """What the rows of one game share (task, rollout, episode of the trial); ``None``
    for a row without a role (or without a task index): a game of its own."""
    if episode.role is None or episode.task_index is None:
        return None
    return episode.task_index, episode.rollout_index, episode.episode_index or 0


def group_games(episodes: Iterable[ViewedEpisode]) -> list[list[ViewedEpisode]]:
    """The rows of each game (every role's rows, segments included), games in order of
    their first row and rows in file order; a row without a role is a game alone. One
    pass, so a file of many games is grouped in linear time."""
    groups: dict[GameKey | tuple[str, int], list[ViewedEpisode]] = {}
    for episode in episodes:
        key = game_key(episode)
        groups.setdefault(key if key is not None else ("row", episode.index), []).append(episode)
    return list(groups.values())


def side_by_side(episode: ViewedEpisode, game: Iterable[ViewedEpisode]) -> list[ViewedEpisode]:
    """What a view draws of ``episode``'s game (``game``: its rows): a row per role in
    file order, ``episode`` for its own role and the first segment of every other."""
    shown: dict[str | None, ViewedEpisode] = {}
    for other in game:
        if other.role not in shown:
            shown[other.role] = episode if other.role == episode.role else other
    return list(shown.values()) or [episode]


def game_of(episode: ViewedEpisode, episodes: Iterable[ViewedEpisode]) -> list[ViewedEpisode]:
    """The rows of every role of ``episode``'s game (same task, rollout and episode of
    the trial; each role's first segment), in file order; ``[episode]`` without a role."""
    key = game_key(episode)
    if key is None:
        return [episode]
    return side_by_side(episode, (other for other in episodes if game_key(other) == key))
