"""Looking at trajectories: ``agentsgym view FILE`` in a terminal or as an HTML page.

Rollout files (``agentsgym rollout --out``) and eval files (``agentsgym eval --out``),
parquet or JSON lines, load into :class:`ViewedEpisode` rows
(:func:`load_trajectories`); :class:`EpisodeFilter` selects some;
:func:`render_episode` draws one for a rich console and :func:`write_html` writes a
self-contained page with the same view and live filters. See ``docs/viewer.md``.
"""

from __future__ import annotations

from agentsgym_viewer.errors import (
    TrajectoryFileError,
    ViewerError,
    ViewFilterError,
    ViewOutputError,
)
from agentsgym_viewer.filtering import EpisodeFilter, game_of, group_games, side_by_side
from agentsgym_viewer.html import render_page, write_html
from agentsgym_viewer.loading import TrajectoryFile, load_trajectories
from agentsgym_viewer.model import (
    RunRecord,
    TokenFields,
    ViewedEpisode,
    ViewedMessage,
    ViewedStep,
)
from agentsgym_viewer.pager import Pager
from agentsgym_viewer.terminal import episode_table, render_episode, render_game
from agentsgym_viewer.tokens import TokenDecoder, check_tokenizer, load_decoder

__all__ = [
    "EpisodeFilter",
    "Pager",
    "RunRecord",
    "TokenDecoder",
    "TokenFields",
    "TrajectoryFile",
    "TrajectoryFileError",
    "ViewFilterError",
    "ViewOutputError",
    "ViewedEpisode",
    "ViewedMessage",
    "ViewedStep",
    "ViewerError",
    "check_tokenizer",
    "episode_table",
    "game_of",
    "group_games",
    "load_decoder",
    "load_trajectories",
    "render_episode",
    "render_game",
    "render_page",
    "side_by_side",
    "write_html",
]
