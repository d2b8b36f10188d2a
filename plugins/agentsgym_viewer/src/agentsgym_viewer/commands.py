"""``agentsgym view FILE``: look at the episodes of a rollout or eval file.

In a terminal it pages through the selected episodes; when stdout or stdin is not a
terminal (a pipe, a test) it prints the selection and exits. ``--html OUT.html``
writes a self-contained page with the same view instead.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import typer
from rich.rule import Rule
from rich.text import Text

from agentsgym import DEFAULT_TOKENIZER
from agentsgym.cli import console, err_console
from agentsgym_viewer import (
    EpisodeFilter,
    Pager,
    TokenDecoder,
    TrajectoryFile,
    ViewedEpisode,
    check_tokenizer,
    episode_table,
    load_decoder,
    load_trajectories,
    render_episode,
    write_html,
)

logger = logging.getLogger(__name__)


def view(
    file: Path = typer.Argument(..., help="a rollout or eval file (.parquet or .jsonl)"),
    episode: int | None = typer.Option(
        None, "--episode", "-e", min=0, help="show episode #N (row N of the file) only"
    ),
    env: str | None = typer.Option(None, "--env", help="only episodes of this env id"),
    min_reward: float | None = typer.Option(None, "--min-reward", help="final reward >= this"),
    max_reward: float | None = typer.Option(None, "--max-reward", help="final reward <= this"),
    failed: bool = typer.Option(False, "--failed", help="only episodes that ended with an error"),
    search: str | None = typer.Option(
        None, "--search", help="text in the messages, error, task data or ids (any case)"
    ),
    tokenizer: str = typer.Option(
        DEFAULT_TOKENIZER,
        "--tokenizer",
        help="tokenizer the file was made with (name or path), to show token text; "
        "'none' shows ids",
    ),
    tokens: bool = typer.Option(True, "--tokens/--no-tokens", help="show the token view"),
    list_only: bool = typer.Option(
        False, "--list", help="print the list of selected episodes only"
    ),
    html: Path | None = typer.Option(
        None,
        "--html",
        help="write a self-contained HTML page (same view, live filters) to this file",
    ),
    interactive: bool | None = typer.Option(
        None,
        "--interactive/--no-interactive",
        help="page through episodes (default: when stdin and stdout are a terminal)",
    ),
) -> None:
    """Show the episodes of a rollout or eval file: messages, rewards, coloured tokens.

    Filters (--env, --min-reward, --max-reward, --failed, --search) select the
    episodes shown, and the episodes written to the --html page.
    """
    trajectories = load_trajectories(file)
    selection = _select(
        trajectories,
        EpisodeFilter(
            env=env, min_reward=min_reward, max_reward=max_reward, failed=failed, search=search
        ),
        env,
    )
    chosen = _chosen(trajectories, episode)
    needs_text = (tokens or html is not None) and not list_only
    decoder = _decoder(tokenizer, trajectories) if needs_text and trajectories.has_tokens else None

    if html is not None:
        pages = [chosen] if chosen is not None else selection
        if not pages:
            _no_match(trajectories)
        path = write_html(trajectories, html, pages, decoder)
        console.print(f"wrote {len(pages)} episodes to {path}", highlight=False)
        return

    if interactive is None:
        interactive = console.is_terminal and sys.stdin.isatty()
    if list_only:
        if not selection:
            _no_match(trajectories)
        console.print(episode_table(selection, _list_title(trajectories, selection)))
        return
    if interactive:
        if chosen is not None and chosen not in selection:
            selection = [chosen]
        if not selection:
            _no_match(trajectories)
        Pager(selection, console, decoder=decoder, show_tokens=tokens).run(
            chosen.index if chosen is not None else None
        )
        return
    if chosen is not None:
        _print_episode(chosen, decoder, tokens)
        return
    if not selection:
        _no_match(trajectories)
    console.print(episode_table(selection, _list_title(trajectories, selection)))
    for item in selection:
        console.print(Rule())
        _print_episode(item, decoder, tokens)


def _select(
    trajectories: TrajectoryFile, filters: EpisodeFilter, env: str | None
) -> list[ViewedEpisode]:
    if env is not None and env not in trajectories.env_ids:
        known = ", ".join(trajectories.env_ids) or "none recorded"
        raise typer.BadParameter(
            f"{trajectories.path.name} has no episode of env {env!r}; its envs: {known}",
            param_hint="--env",
        )
    return filters.apply(trajectories.episodes)


def _chosen(trajectories: TrajectoryFile, index: int | None) -> ViewedEpisode | None:
    if index is None:
        return None
    chosen = trajectories.by_index(index)
    if chosen is None:
        last = trajectories.episodes[-1].index
        raise typer.BadParameter(
            f"{trajectories.path.name} has no readable episode #{index} (its episodes are "
            f"#0 to #{last})",
            param_hint="--episode",
        )
    return chosen


def _decoder(tokenizer: str, trajectories: TrajectoryFile) -> TokenDecoder | None:
    """The decoder for token text, or None (ids) when it does not fit the file."""
    decoder = load_decoder(tokenizer)
    if decoder is None:
        return None
    problem = check_tokenizer(decoder, trajectories.episodes)
    if problem is not None:
        logger.warning(
            "%s; showing token ids instead. Pass --tokenizer with the tokenizer the file was "
            "made with (or --tokenizer none).",
            problem,
        )
        return None
    return decoder


def _print_episode(episode: ViewedEpisode, decoder: TokenDecoder | None, tokens: bool) -> None:
    console.print(
        render_episode(episode, decoder, show_tokens=tokens, color=console.color_system is not None)
    )


def _list_title(trajectories: TrajectoryFile, selection: list[ViewedEpisode]) -> str:
    total = len(trajectories.episodes)
    return (
        f"{trajectories.path.name}: {len(selection)} of {total} episodes ({trajectories.kind} file)"
    )


def _no_match(trajectories: TrajectoryFile) -> None:
    err_console.print(
        Text(
            f"no episode of {trajectories.path.name} ({len(trajectories.episodes)} episodes) "
            "matches these filters",
            "yellow",
        )
    )
    raise typer.Exit(1)
