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


def game_of(episode: ViewedEpisode, episodes: Iterable[ViewedEpisode]) -> list[ViewedEpisode]:
    """The rows of every role of ``episode``'s game (same task, rollout and episode of
    the trial; each role's first segment), in file order; ``[episode]`` without a role."""
    if episode.role is None or episode.task_index is None:
        return [episode]

    def key(row: ViewedEpisode) -> tuple[int | None, int | None, int]:
        return row.task_index, row.rollout_index, row.episode_index or 0

    game: dict[str, ViewedEpisode] = {}
    for other in episodes:
        if other.role is not None and other.role not in game and key(other) == key(episode):
            game[other.role] = episode if other.role == episode.role else other
    return list(game.values())
