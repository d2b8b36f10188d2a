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
from rich.table import Table
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
    game_of,
    group_games,
    load_decoder,
    load_trajectories,
    render_game,
    side_by_side,
    write_html,
)

logger = logging.getLogger(__name__)


def view(
    file: Path = typer.Argument(..., help="a rollout or eval file (.parquet or .jsonl)"),
    episode: int | None = typer.Option(
        None,
        "--episode",
        "-e",
        min=0,
        help="show episode #N (row N of the file) only, whatever the filters; --search "
        "then highlights and counts its matches (or says it has none)",
    ),
    env: str | None = typer.Option(None, "--env", help="only episodes of this env id"),
    min_reward: float | None = typer.Option(None, "--min-reward", help="final reward >= this"),
    max_reward: float | None = typer.Option(None, "--max-reward", help="final reward <= this"),
    failed: bool = typer.Option(
        False,
        "--failed",
        help="only episodes that ended with an error: an exception or a timeout in the env or "
        "the agent (a wrong answer is not a failure: see --wrong)",
    ),
    wrong: bool = typer.Option(
        False,
        "--wrong",
        help="only episodes whose answer was not judged correct (failed ones included; "
        "the rule is above)",
    ),
    search: str | None = typer.Option(
        None,
        "--search",
        help="text in the messages, error, task data or ids (any case); matches are highlighted",
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

    Filters (--env, --min-reward, --max-reward, --failed, --wrong, --search)
    select the episodes shown and the episodes written to the --html page.
    --episode N shows #N whatever they say (a note says when #N does not pass
    them); paging, it starts at #N among the selection.

    --wrong judges an answer as `agentsgym eval` scores it. Eval file: the row
    has correct=false (failed and ungraded samples too, as in the accuracy).
    Rollout file: the episode failed, or its steps report info "correct" but
    never true, or none reports it and its final reward is not above 0.
    """
    if list_only and episode is not None:
        raise typer.BadParameter(
            "--list lists the selected episodes and --episode shows one: give one of them",
            param_hint="--episode",
        )
    trajectories = load_trajectories(file)
    filters = EpisodeFilter(
        env=env,
        min_reward=min_reward,
        max_reward=max_reward,
        failed=failed,
        wrong=wrong,
        search=search,
    )
    selection = _select(trajectories, filters, env)
    chosen = _chosen(trajectories, episode)
    if chosen is not None:
        _note_unselected(chosen, filters)
    needs_text = (tokens or html is not None) and not list_only
    decoder = _decoder(tokenizer, trajectories) if needs_text and trajectories.has_tokens else None

    if html is not None:  # --episode N: its game's rows too, as the terminal shows it
        pages = game_of(chosen, trajectories.episodes) if chosen is not None else selection
        if not pages:
            _no_match(trajectories, filters)
        path = write_html(trajectories, html, pages, decoder, search=search)
        console.print(f"wrote {len(pages)} episodes to {path}", highlight=False)
        return

    if interactive is None:
        interactive = console.is_terminal and sys.stdin.isatty()
    if list_only:
        if not selection:
            _no_match(trajectories, filters)
        console.print(_table(trajectories, selection))
        return
    if interactive:
        if chosen is not None and chosen not in selection:
            selection = game_of(chosen, trajectories.episodes)  # its game, as printed
        if not selection:
            _no_match(trajectories, filters)
        Pager(selection, console, decoder=decoder, show_tokens=tokens, search=search).run(
            chosen.index if chosen is not None else None
        )
        return
    if chosen is not None:
        _print_episode(chosen, decoder, tokens, search, game_of(chosen, trajectories.episodes))
        return
    if not selection:
        _no_match(trajectories, filters)
    console.print(_table(trajectories, selection))
    for game in group_games(selection):  # the roles of a game side by side
        console.print(Rule())
        _print_episode(game[0], decoder, tokens, search, side_by_side(game[0], game))


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


def _note_unselected(chosen: ViewedEpisode, filters: EpisodeFilter) -> None:
    """Say so when --episode shows an episode the selecting filters leave out.

    --search is left aside: the episode view itself says how many matches it has.
    """
    selecting = filters.model_copy(update={"search": None})
    if selecting.active and not selecting.matches(chosen):
        err_console.print(
            Text(
                f"episode #{chosen.index} does not pass the filters given; it is shown because "
                "--episode names it",
                "yellow",
            )
        )


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


def _print_episode(
    episode: ViewedEpisode,
    decoder: TokenDecoder | None,
    tokens: bool,
    search: str | None,
    game: list[ViewedEpisode] | None = None,
) -> None:
    """One episode, or the roles of its game side by side (``game``)."""
    console.print(
        render_game(
            game or [episode],
            decoder,
            show_tokens=tokens,
            color=console.color_system is not None,
            search=search,
        )
    )


def _table(trajectories: TrajectoryFile, selection: list[ViewedEpisode]) -> Table:
    """The list of the selection, titled with the file and captioned with its run."""
    total = len(trajectories.episodes)
    title = (
        f"{trajectories.path.name}: {len(selection)} of {total} episodes ({trajectories.kind} file)"
    )
    run = trajectories.run
    return episode_table(selection, title, f"run: {run.describe()}" if run is not None else None)


def _no_match(trajectories: TrajectoryFile, filters: EpisodeFilter) -> None:
    message = (
        f"no episode of {trajectories.path.name} ({len(trajectories.episodes)} episodes) "
        "matches these filters"
    )
    if filters.failed:
        # Wrong answers are not failures; a user looking for the bad episodes of an eval
        # run usually means those.
        wrong = filters.model_copy(update={"failed": False, "wrong": True})
        count = len(wrong.apply(trajectories.episodes))
        if count:
            message += (
                f"; none failed (ended with an error), but {count} "
                f"{'has an answer' if count == 1 else 'have answers'} judged wrong: "
                "--wrong shows them"
            )
    err_console.print(Text(message, "yellow"))
    raise typer.Exit(1)
