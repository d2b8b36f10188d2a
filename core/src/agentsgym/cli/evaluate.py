"""``agentsgym eval ENV_ID``: accuracy, pass@k, cons@k and best@k over a split."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.table import Table

from agentsgym.cli import app, console
from agentsgym.cli.options import parse_key_values, tokenizer_cli_option
from agentsgym.cli.rollout import build_agent, progress_bar, tokenizer_option
from agentsgym.evaluation import EvalReport, evaluate
from agentsgym.runner import DEFAULT_MAX_CONCURRENCY
from agentsgym.factory import make
from agentsgym.io import check_output_path, write_records


@app.command("eval")
def eval_command(
    env_id: str = typer.Argument(..., help="registered env id, e.g. classical/GSM8K-v0"),
    num_rollouts: int = typer.Option(1, "--num-rollouts", "-k", min=1, help="samples per task (k)"),
    num_tasks: int | None = typer.Option(
        None, "--num-tasks", min=1, help="first N tasks (default: all)"
    ),
    split: str = typer.Option("eval", "--split", help="eval or train"),
    agent: str | None = typer.Option(None, "--agent", help="agent name (default: the env's)"),
    agent_option: list[str] | None = typer.Option(
        None, "--agent-option", help="key=value, repeatable"
    ),
    env_config: list[str] | None = typer.Option(None, "--env-config", help="key=value, repeatable"),
    tokenizer: str = tokenizer_cli_option(),
    out: Path = typer.Option(
        Path("eval_results.jsonl"), "--out", help="per-sample FILE.jsonl or FILE.parquet"
    ),
    max_concurrency: int = typer.Option(
        DEFAULT_MAX_CONCURRENCY, "--max-concurrency", min=1, help="episodes in flight at once; size it to your model server (see README)"
    ),
) -> None:
    """Evaluate an agent on ENV_ID: k rollouts per task, per-sample results to --out.

    A summary JSON is written next to the results (FILE.summary.json).
    """
    if split not in ("train", "eval"):
        raise typer.BadParameter("--split must be train or eval")
    out = check_output_path(out)
    env = make(
        env_id,
        tokenizer=tokenizer_option(tokenizer),
        env_config=parse_key_values(env_config, "--env-config"),
    )
    player = build_agent(env_id, agent, agent_option)
    dataset = env.get_train_dataset() if split == "train" else env.get_eval_dataset()
    count = len(dataset) if num_tasks is None else min(num_tasks, len(dataset))
    tasks = [row["task_data"] for row in dataset.select(range(count))]
    if not tasks:
        raise typer.BadParameter(f"the {split} split of {env_id} has no tasks")
    total = len(tasks) * num_rollouts * env.config.episodes_per_trial
    with progress_bar() as progress:
        bar = progress.add_task(f"eval {env_id}", total=total)
        samples, report = evaluate(
            env,
            player,
            tasks,
            num_rollouts,
            max_concurrency=max_concurrency,
            on_episode=lambda _episode: progress.advance(bar),
        )
    path = write_records([s.model_dump() for s in samples], out)
    summary = path.with_name(path.stem + ".summary.json")
    summary.write_text(json.dumps({"split": split, **report.model_dump()}, indent=2) + "\n")
    print_report(report, path, summary)


def print_report(report: EvalReport, results: Path, summary: Path) -> None:
    table = Table(
        title=f"{report.env_id}: {report.num_tasks} tasks x {report.num_rollouts} rollouts"
    )
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_row("accuracy", f"{report.accuracy:.4f}")
    for k, value in report.pass_at_k.items():
        table.add_row(f"pass@{k}", f"{value:.4f}")
    table.add_row(f"cons@{report.num_rollouts}", f"{report.cons_at_k:.4f}")
    table.add_row(f"best@{report.num_rollouts} (reward)", f"{report.best_at_k:.4f}")
    table.add_row("mean reward", f"{report.mean_reward:.4f}")
    table.add_row("mean turns", f"{report.mean_turns:.3g}")
    console.print(table)
    if report.num_failed:
        console.print(
            f"[yellow]{report.num_failed} sample(s) failed[/] and count as wrong; see {results}"
        )
    if report.num_ungraded:
        console.print(
            f"[yellow]{report.num_ungraded} sample(s) could not be graded[/] (a grader timed "
            f"out: the machine was slow, not necessarily the answer wrong); they count as not "
            f"correct; see `graded` in {results}"
        )
    console.print(f"per-sample results: {results}\nsummary: {summary}", highlight=False)
