"""The self-contained HTML page of ``agentsgym view --html OUT.html``.

One file, no network: the CSS and JavaScript are inlined from ``static/`` and the
episodes are embedded as JSON in a ``<script type="application/json">`` element. The
JSON is escaped so that no episode text can end that element or start markup
(``<``, ``>``, ``&`` and the JavaScript line separators become ``\\uXXXX``), and the
page's script inserts episode text with ``textContent`` only; a Content-Security-
Policy forbids every network request.

Token ids are embedded once per episode, with the text of every distinct id in one
shared vocabulary; agent masks as ``"0011..."`` strings and per-token rewards as
``[position, value]`` pairs of the non-zero ones, which keeps large files small. The
page draws only the selected episode, the list and the token view in chunks.

Whether an episode is wrong (``--wrong``) is judged here, by
:attr:`ViewedEpisode.wrong`, and embedded, so the page applies the very same rule.
The page opens with the command's ``--search`` in its search box; the matches of the
search box are highlighted in the episode shown, with a line counting them.

In a file of an env with roles, selecting a row shows its game: the embedded rows of
every role side by side, a column each with its own header, rewards and tokens (the
selected row's column marked), as the terminal draws them.
"""

from __future__ import annotations

import html
import json
import math
import re
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from agentsgym_viewer.errors import ViewOutputError
from agentsgym_viewer.filtering import group_games, side_by_side
from agentsgym_viewer.loading import TrajectoryFile
from agentsgym_viewer.model import ViewedEpisode
from agentsgym_viewer.tokens import TokenDecoder

_JSON_ESCAPES = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}
_JSON_UNSAFE = re.compile("[<>&\u2028\u2029]")
_PLACEHOLDER = re.compile(r"__(TITLE|CSS|JS|DATA)__")


def script_json(value: Any) -> str:
    """JSON that is safe inside a ``<script>`` element (no ``</script>``, no ``<!--``)."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return _JSON_UNSAFE.sub(lambda m: _JSON_ESCAPES[m.group()], text)


def episode_data(episode: ViewedEpisode, game: Sequence[ViewedEpisode] = ()) -> dict[str, Any]:
    """One episode as the page's script reads it (short keys: the page may be large);
    ``game``: the rows the page draws beside it, a row per role (see
    :func:`~agentsgym_viewer.filtering.side_by_side`)."""
    tokens = episode.tokens
    spans = episode.turn_token_spans()
    data: dict[str, Any] = {
        "i": episode.index,
        "env": episode.env_id,
        "sid": episode.session_id,
        "task": episode.task_index,
        "rollout": episode.rollout_index,
        "ep": episode.episode_index or 0,
        "seg": episode.segment_index or 0,
        "nseg": episode.num_segments or 1,
        "role": episode.role,
        "game": [row.index for row in game] if len(game) > 1 else None,
        "r": _finite(episode.final_reward),
        "turns": episode.num_turns,
        "trunc": episode.truncated,
        "cut": len(episode.cut_replies),
        "tt": episode.truncation,
        "free": episode.free_shot,
        "err": episode.error,
        "unscored": episode.unscored,
        "correct": episode.correct,
        "wrong": episode.wrong,
        "answer": episode.answer,
        "graded": episode.graded,
        "terms": {k: _finite(v) for k, v in episode.episode_reward_terms().items()},
        "tj": episode.task_json,
        # role shown (a tool result's with the tool's name), content, tool calls
        "msgs": [[m.role, m.content, m.call_texts, m.title] for m in episode.messages],
        # reward, terms, info but the judgements, and the judgements:
        # [score, model, reused, prompt, reply]
        "steps": [
            [
                None if s.reward is None else _finite(s.reward),
                {k: _finite(v) for k, v in s.reward_terms.items()},
                _plain(s.other_info),
                [
                    [
                        None if j.score is None else _finite(j.score),
                        j.model,
                        j.reused,
                        j.prompt,
                        j.reply,
                    ]
                    for j in s.judgements
                ],
            ]
            for s in episode.steps()
        ],
        "tok": None,
        "tr": None,
        "tc": None,
    }
    if tokens is not None:
        nonzero = np.flatnonzero(tokens.rewards).tolist()
        data["tok"] = {
            "ids": tokens.ids.tolist(),
            "mask": (tokens.agent_mask + ord("0")).tobytes().decode("ascii"),
            "rw": [[pos, _finite(tokens.rewards[pos].item())] for pos in nonzero],
        }
        rewards = episode.turn_token_rewards()
        if spans is not None and rewards is not None:
            data["tr"] = [_finite(r) for r in rewards]
            data["tc"] = [end - start for start, end in spans]
    return data


def page_data(
    trajectories: TrajectoryFile,
    episodes: Sequence[ViewedEpisode],
    decoder: TokenDecoder | None,
    search: str | None = None,
) -> dict[str, Any]:
    """Everything the page shows: file facts, the token vocabulary and the episodes."""
    games = {e.index: game for game in group_games(episodes) for e in game}
    return {
        "file": trajectories.path.name,
        "kind": trajectories.kind,
        "run": trajectories.run.describe() if trajectories.run is not None else None,
        "search": search or "",
        "num_rows": trajectories.num_rows,
        "warnings": list(trajectories.warnings),
        "decoded": decoder is not None,
        "tokenizer": decoder.name if decoder is not None else None,
        "vocab": {str(k): v for k, v in decoder.vocabulary(episodes).items()} if decoder else {},
        "envs": sorted({e.env_id for e in episodes if e.env_id is not None}),
        "episodes": [episode_data(e, side_by_side(e, games[e.index])) for e in episodes],
    }


def render_page(
    trajectories: TrajectoryFile,
    episodes: Sequence[ViewedEpisode] | None = None,
    decoder: TokenDecoder | None = None,
    *,
    search: str | None = None,
) -> str:
    """The page's HTML for ``episodes`` (default: every episode of the file), opened
    with ``search`` in its search box."""
    chosen = trajectories.episodes if episodes is None else episodes
    static = resources.files("agentsgym_viewer") / "static"
    parts = {
        "TITLE": html.escape(f"agentsgym view \u2014 {trajectories.path.name}"),
        "CSS": (static / "viewer.css").read_text(encoding="utf-8"),
        "JS": (static / "viewer.js").read_text(encoding="utf-8"),
        "DATA": script_json(page_data(trajectories, chosen, decoder, search)),
    }
    template = (static / "page.html").read_text(encoding="utf-8")
    # One pass, so that no inserted text is searched for placeholders again.
    return _PLACEHOLDER.sub(lambda m: parts[m.group(1)], template)


def write_html(
    trajectories: TrajectoryFile,
    out: str | Path,
    episodes: Sequence[ViewedEpisode] | None = None,
    decoder: TokenDecoder | None = None,
    *,
    search: str | None = None,
) -> Path:
    """Write the page to ``out`` (a ``.html`` file); returns its path."""
    path = Path(out)
    if path.suffix.lower() not in (".html", ".htm"):
        raise ViewOutputError(f"--html {str(path)!r} must end in .html")
    if path.is_dir():
        raise ViewOutputError(f"--html {str(path)!r} is a folder; give a file name ending in .html")
    page = render_page(trajectories, episodes, decoder, search=search)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(page, encoding="utf-8")
    except OSError as exc:
        raise ViewOutputError(f"cannot write {str(path)!r}: {exc}") from None
    return path


def _plain(value: Any) -> Any:
    """``value`` as plain JSON data: unknown objects as text, NaN and infinities as null."""
    value = json.loads(json.dumps(value, default=str))

    def clean(item: Any) -> Any:
        if isinstance(item, float):
            return _finite(item)
        if isinstance(item, list):
            return [clean(v) for v in item]
        if isinstance(item, dict):
            return {k: clean(v) for k, v in item.items()}
        return item

    return clean(value)


def _finite(value: float) -> float | None:
    """JSON has no NaN/Infinity: such a reward is shown as empty."""
    return value if math.isfinite(value) else None
