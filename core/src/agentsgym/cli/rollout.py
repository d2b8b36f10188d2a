"""``agentsgym rollout ENV_ID``: play episodes, write one row per trajectory."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from agentsgym.cli import app, console
from agentsgym.cli.options import parse_key_values, tokenizer_cli_option
from agentsgym.dataset_runner import run_dataset
from agentsgym.runner import DEFAULT_MAX_CONCURRENCY
from agentsgym.factory import make
from agentsgym.io import check_output_path, write_records
from agentsgym.registry import get_registry
from agentsgym.rows import load_rows
from agentsgym.trajectory import Episode, TrajectoryBatch


def build_agent(env_id: str, agent: str | None, agent_options: list[str] | None) -> Any:
    """The agent named on the command line, or the env's registered default agent."""
    registry = get_registry()
    name = agent or registry.resolve(env_id).default_agent
    if name is None:
        raise typer.BadParameter(
            f"{env_id} registers no default agent; choose one with --agent "
            "(see `agentsgym list-agents`)"
        )
    return registry.agent(name).build(**parse_key_values(agent_options, "--agent-option"))


def tokenizer_option(value: str) -> str | None:
    return None if value.lower() == "none" else value


def progress_bar() -> Progress:
    return Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    )


@app.command()
def rollout(
    env_id: str | None = typer.Argument(
        None, help="registered env id, e.g. agentsgym/GuessTheNumber-v0 (or use --dataset)"
    ),
    dataset: Path | None = typer.Option(
        None, "--dataset", help="rows file (.parquet/.jsonl) of {env_class_path, env_config, task_data}; rows may mix envs",
    ),
    allow_class_paths: bool = typer.Option(
        False, "--allow-class-paths", help="let dataset rows name module:Class paths (imports code)"
    ),
    num_tasks: int = typer.Option(8, "--num-tasks", min=1, help="tasks taken from the split"),
    num_rollouts: int = typer.Option(2, "--num-rollouts", min=1, help="rollouts per task"),
    split: str = typer.Option("train", "--split", help="train or eval"),
    agent: str | None = typer.Option(None, "--agent", help="agent name (default: the env's)"),
    agent_option: list[str] | None = typer.Option(None, "--agent-option", help="key=value, repeatable"),
    env_config: list[str] | None = typer.Option(None, "--env-config", help="key=value, repeatable"),
    tokenizer: str = tokenizer_cli_option(),
    out: Path = typer.Option(Path("rollouts.parquet"), "--out", help="FILE.parquet or FILE.jsonl"),
    max_concurrency: int = typer.Option(
        DEFAULT_MAX_CONCURRENCY, "--max-concurrency", min=1, help="episodes in flight at once; size it to your model server (see README)"
    ),
) -> None:
    """Play episodes of ENV_ID (or of a rows file) and write one row per trajectory."""
    if split not in ("train", "eval"):
        raise typer.BadParameter("--split must be train or eval")
    if (env_id is None) == (dataset is None):
        raise typer.BadParameter("give either ENV_ID or --dataset FILE")
    out = check_output_path(out)
    finished: list[Episode] = []
    try:
        if dataset is not None:
            batch = _rollout_rows(
                dataset, num_tasks=num_tasks, num_rollouts=num_rollouts, agent=agent,
                agent_options=agent_option, tokenizer=tokenizer,
                allow_class_paths=allow_class_paths, max_concurrency=max_concurrency,
                collect=finished.append,
            )
        else:
            assert env_id is not None
            batch = _rollout_env(
                env_id, num_tasks=num_tasks, num_rollouts=num_rollouts, split=split, agent=agent,
                agent_options=agent_option, env_config=env_config, tokenizer=tokenizer,
                max_concurrency=max_concurrency, collect=finished.append,
            )
    except KeyboardInterrupt:
        _save_interrupted(finished, out)
        raise typer.Exit(130) from None
    path = write_records(batch.to_records(), out)
    print_summary(batch, path)


def _save_interrupted(finished: list[Episode], out: Path) -> None:
    """Write the episodes that finished before Ctrl-C, so no played episode is lost."""
    if not finished:
        console.print("[yellow]interrupted[/] before any episode finished; nothing written")
        return
    path = write_records([e.to_record() for e in finished], out)
    console.print(
        f"[yellow]interrupted[/]: wrote the {len(finished)} episodes that had finished to {path} "
        "(ungrouped: a task may have fewer rollouts than asked); waiting for the agent "
        "calls in flight to return (Ctrl-C again to quit at once)",
        highlight=False,
    )


def _rollout_env(
    env_id: str,
    *,
    num_tasks: int,
    num_rollouts: int,
    split: str,
    agent: str | None,
    agent_options: list[str] | None,
    env_config: list[str] | None,
    tokenizer: str,
    max_concurrency: int,
    collect: Callable[[Episode], None],
) -> TrajectoryBatch:
    env = make(
        env_id, tokenizer=tokenizer_option(tokenizer),
        env_config=parse_key_values(env_config, "--env-config"),
    )
    player = build_agent(env_id, agent, agent_options)
    rows = env.get_train_dataset() if split == "train" else env.get_eval_dataset()
    tasks = [row["task_data"] for row in rows.select(range(min(num_tasks, len(rows))))]
    total = len(tasks) * num_rollouts * env.config.episodes_per_trial
    with progress_bar() as progress:
        bar = progress.add_task(f"rollouts of {env_id}", total=total)

        def on_episode(episode: Episode) -> None:
            collect(episode)
            progress.advance(bar)

        return env.run_trial(
            tasks, player, num_rollouts, max_concurrency=max_concurrency, on_episode=on_episode
        )


def _rollout_rows(
    path: Path,
    *,
    num_tasks: int,
    num_rollouts: int,
    agent: str | None,
    agent_options: list[str] | None,
    tokenizer: str,
    allow_class_paths: bool,
    max_concurrency: int,
    collect: Callable[[Episode], None],
) -> TrajectoryBatch:
    rows = load_rows(path)[:num_tasks]
    if agent is None:
        raise typer.BadParameter("--dataset needs --agent: rows may name several envs")
    player = get_registry().agent(agent).build(**parse_key_values(agent_options, "--agent-option"))
    with progress_bar() as progress:
        bar = progress.add_task(f"rollouts of {path.name}", total=None)

        def on_episode(episode: Episode) -> None:
            collect(episode)
            progress.advance(bar)

        return run_dataset(
            rows,
            player,
            num_rollouts,
            tokenizer=tokenizer_option(tokenizer),
            allow_class_paths=allow_class_paths or None,
            max_concurrency=max_concurrency,
            on_episode=on_episode,
        )


def print_summary(batch: TrajectoryBatch, path: Path) -> None:
    episodes = batch.episodes
    table = Table(title=f"{len(episodes)} trajectories written to {path}")
    for column in ("per episode", "mean", "min", "max"):
        table.add_column(column, justify="right" if column != "per episode" else "left")
    columns: dict[str, list[float]] = {
        "reward": [e.final_reward for e in episodes],
        "turns": [float(e.num_turns) for e in episodes],
    }
    if batch.tokenized:
        columns["tokens"] = [float(e.num_tokens) for e in episodes]
        columns["agent tokens"] = [float(e.num_agent_tokens) for e in episodes]
    for name, values in columns.items():
        if values:
            table.add_row(
                name, f"{statistics.fmean(values):.2f}", f"{min(values):g}", f"{max(values):g}"
            )
    console.print(table)
    if batch.failed:
        console.print(f"[yellow]{len(batch.failed)} episode(s) failed[/]; their errors are in the file:")
        for episode in batch.failed[:5]:
            console.print(f"  {episode.session_id}: {episode.error}", highlight=False)
