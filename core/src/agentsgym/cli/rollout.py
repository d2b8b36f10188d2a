"""``agentsgym rollout ENV_ID``: play episodes, write one row per trajectory as it ends.

Rows stream to ``--out`` as trials finish (see :mod:`agentsgym.output`): a killed
run keeps every finished trial, ``--resume`` plays only the missing ones, and an
existing output is replaced only with ``--overwrite``.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from agentsgym.cli import app, console
from agentsgym.cli.options import (
    MAX_CONCURRENCY,
    MAX_ROLLOUTS,
    MAX_TASKS,
    build_component,
    episode_timeout_option,
    hook_timeout_option,
    max_failure_rate_option,
    overwrite_option,
    parse_key_values,
    resume_option,
    sha256_of,
    time_budgets,
    tokenizer_cli_option,
)
from agentsgym.cli.running import (
    RunPlan,
    exit_on_failures,
    package_versions,
    print_failures,
    progress_bar,
    run_into_output,
)
from agentsgym.dataset_runner import build_envs
from agentsgym.errors import AgentsGymError, DatasetRowError
from agentsgym.factory import make
from agentsgym.io import check_output_path
from agentsgym.output import FinishResult, RunArguments, RunOutput, choose_mode, failure_report
from agentsgym.output.records import rollout_rows
from agentsgym.registry import get_registry
from agentsgym.rows import DatasetRow, load_rows
from agentsgym.runner import DEFAULT_MAX_CONCURRENCY, TrialJob

__all__ = ["build_agent", "progress_bar", "rollout", "tokenizer_option"]


def resolve_agent_name(env_id: str | None, agent: str | None) -> str:
    """The agent named on the command line, or the env's registered default agent."""
    if agent:
        return agent
    if env_id is None:
        raise typer.BadParameter("--dataset needs --agent: rows may name several envs")
    # An id typed on the command line is the user's own choice, a server URL included.
    name = get_registry().resolve(env_id, allow_remote=True).default_agent
    if name is None:
        raise typer.BadParameter(
            f"{env_id} registers no default agent; choose one with --agent "
            "(see `agentsgym list-agents`)"
        )
    return name


def build_agent(env_id: str | None, agent: str | None, agent_options: list[str] | None) -> Any:
    """Build the agent of the command line; unknown or bad options are an AgentError."""
    name = resolve_agent_name(env_id, agent)
    spec = get_registry().agent(name)
    return build_component(spec, parse_key_values(agent_options, "--agent-option"))


def tokenizer_option(value: str) -> str | None:
    return None if value.lower() == "none" else value


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
    allow_remote_envs: bool = typer.Option(
        False,
        "--allow-remote-envs",
        help="let dataset rows name env server URLs (only some: AGENTSGYM_ALLOW_REMOTE_ENVS="
        "URL,URL); see docs/serving.md",
    ),
    num_tasks: int = typer.Option(
        8, "--num-tasks", min=1, max=MAX_TASKS, help="tasks taken from the split"
    ),
    num_rollouts: int = typer.Option(
        2, "--num-rollouts", min=1, max=MAX_ROLLOUTS, help="rollouts per task"
    ),
    split: str = typer.Option("train", "--split", help="train or eval"),
    agent: str | None = typer.Option(None, "--agent", help="agent name (default: the env's)"),
    agent_option: list[str] | None = typer.Option(None, "--agent-option", help="key=value, repeatable"),
    env_config: list[str] | None = typer.Option(None, "--env-config", help="key=value, repeatable"),
    tokenizer: str = tokenizer_cli_option(),
    out: Path = typer.Option(Path("rollouts.parquet"), "--out", help="FILE.parquet or FILE.jsonl"),
    max_concurrency: int = typer.Option(
        DEFAULT_MAX_CONCURRENCY, "--max-concurrency", min=1, max=MAX_CONCURRENCY,
        help="episodes in flight at once; size it to your model server (see README)",
    ),
    resume: bool = resume_option(),
    overwrite: bool = overwrite_option(),
    hook_timeout: float | None = hook_timeout_option(),
    episode_timeout: float | None = episode_timeout_option(),
    max_failure_rate: float | None = max_failure_rate_option(),
) -> None:
    """Play episodes of ENV_ID (or of a rows file) and write one row per trajectory."""
    if split not in ("train", "eval"):
        raise typer.BadParameter("--split must be train or eval")
    if (env_id is None) == (dataset is None):
        raise typer.BadParameter("give either ENV_ID or --dataset FILE")
    mode = choose_mode(resume=resume, overwrite=overwrite)
    out = check_output_path(out)
    budgets = time_budgets(hook_timeout, episode_timeout)
    if dataset is not None:
        plan = plan_rows(
            dataset, num_tasks=num_tasks, num_rollouts=num_rollouts, agent=agent,
            agent_options=agent_option, tokenizer=tokenizer, budgets=budgets,
            allow_class_paths=allow_class_paths, allow_remote=True if allow_remote_envs else None,
        )
    else:
        assert env_id is not None
        plan = plan_env(
            env_id, num_tasks=num_tasks, num_rollouts=num_rollouts, split=split, agent=agent,
            agent_options=agent_option, env_config=env_config, tokenizer=tokenizer,
            budgets=budgets,
        )
    result, output = run_into_output(
        "rollout", plan, out, mode=mode, make_rows=rollout_rows,
        max_concurrency=max_concurrency,
        settings={
            "max_concurrency": max_concurrency, "max_failure_rate": max_failure_rate, **budgets
        },
    )
    report = failure_report(result.trial_errors())
    print_summary(result, output)
    print_failures(report)
    exit_on_failures(report, max_failure_rate)


def plan_env(
    env_id: str,
    *,
    num_tasks: int,
    num_rollouts: int,
    split: str,
    agent: str | None,
    agent_options: list[str] | None,
    env_config: list[str] | None,
    tokenizer: str,
    budgets: dict[str, float],
) -> RunPlan:
    """The trials of ``num_rollouts`` rollouts of the first ``num_tasks`` tasks of a split."""
    config = parse_key_values(env_config, "--env-config")
    env = make(env_id, tokenizer=tokenizer_option(tokenizer), env_config={**config, **budgets})
    agent_name = resolve_agent_name(env_id, agent)
    options = parse_key_values(agent_options, "--agent-option")
    player = build_component(get_registry().agent(agent_name), options)
    rows = env.get_train_dataset() if split == "train" else env.get_eval_dataset()
    tasks = [row["task_data"] for row in rows.select(range(min(num_tasks, len(rows))))]
    if not tasks:
        raise AgentsGymError(f"the {split} split of {env_id} has no tasks")
    jobs = [
        TrialJob(env, task, task_index, rollout_index)
        for task_index, task in enumerate(tasks)
        for rollout_index in range(num_rollouts)
    ]
    spec = getattr(env, "spec", None)
    return RunPlan(
        jobs=jobs,
        agent=player,
        arguments=RunArguments(
            env_id=env_id, split=split, num_tasks=len(tasks), num_rollouts=num_rollouts,
            env_config={**config, **budgets}, agent=agent_name, agent_options=options,
            tokenizer=tokenizer_option(tokenizer),
        ),
        description=f"rollouts of {env_id}",
        versions=package_versions(getattr(spec, "distribution", None)),
    )


def plan_rows(
    path: Path,
    *,
    num_tasks: int,
    num_rollouts: int,
    agent: str | None,
    agent_options: list[str] | None,
    tokenizer: str,
    budgets: dict[str, float],
    allow_class_paths: bool,
    allow_remote: bool | None = None,
) -> RunPlan:
    """The trials of ``num_rollouts`` rollouts of the first ``num_tasks`` rows of a file."""
    agent_name = resolve_agent_name(None, agent)
    rows = read_rows(path)[:num_tasks]
    if not rows:
        raise DatasetRowError(f"rows file {str(path)!r} has no rows")
    if budgets:
        rows = [
            row.model_copy(update={"env_config": {**row.env_config, **budgets}}) for row in rows
        ]
    options = parse_key_values(agent_options, "--agent-option")
    envs = build_envs(
        rows,
        tokenizer=tokenizer_option(tokenizer),
        allow_class_paths=allow_class_paths or None,
        allow_remote=allow_remote,
    )
    player = build_component(get_registry().agent(agent_name), options)
    jobs = [
        TrialJob(envs[row.env_key()], row.task_data, index, rollout)
        for index, row in enumerate(rows)
        for rollout in range(num_rollouts)
    ]
    return RunPlan(
        jobs=jobs,
        agent=player,
        arguments=RunArguments(
            dataset=str(path), dataset_sha256=sha256_of(path), num_tasks=len(rows),
            num_rollouts=num_rollouts, env_config=budgets, agent=agent_name,
            agent_options=options, tokenizer=tokenizer_option(tokenizer),
        ),
        description=f"rollouts of {path.name}",
        versions=package_versions(),
    )


def read_rows(path: Path) -> list[DatasetRow]:
    """The rows of a rows file; a file that cannot be read is a DatasetRowError."""
    try:
        return load_rows(path)
    except AgentsGymError:
        raise
    except UnicodeDecodeError as exc:
        raise DatasetRowError(
            f"rows file {str(path)!r} is not UTF-8 text ({exc.reason} at byte {exc.start}); "
            "a .jsonl rows file holds one JSON object per line"
        ) from None
    except Exception as exc:  # pyarrow and the OS raise many kinds for a damaged file
        raise DatasetRowError(
            f"cannot read rows file {str(path)!r}: {type(exc).__name__}: {exc}. Give a .jsonl "
            "file of JSON objects or a .parquet file written by agentsgym.rows_to_dataset"
        ) from None


def print_summary(result: FinishResult, output: RunOutput) -> None:
    """Reward, turns and token figures over every trajectory in the output."""
    ok = [row for row in result.rows if row.get("error") is None]
    if not ok:
        console.print(
            f"no trajectory succeeded; the {len(result.rows)} failed ones are in {result.path}",
            highlight=False,
        )
        return
    failed = len(result.rows) - len(ok)
    title = f"{len(ok)} trajectories written to {result.path}"
    table = Table(title=title + (f" ({failed} failed)" if failed else ""))
    for column in ("per episode", "mean", "min", "max"):
        table.add_column(column, justify="right" if column != "per episode" else "left")
    columns: dict[str, list[float]] = {
        "reward": [float(r["final_reward"]) for r in ok],
        "turns": [float(r["num_turns"]) for r in ok],
    }
    if ok and all(r.get("num_tokens") is not None for r in ok):
        columns["tokens"] = [float(r["num_tokens"]) for r in ok]
        columns["agent tokens"] = [float(r["num_agent_tokens"]) for r in ok]
    for name, values in columns.items():
        if values:
            table.add_row(
                name, f"{statistics.fmean(values):.2f}", f"{min(values):g}", f"{max(values):g}"
            )
    console.print(table)
    if output.resumed_from is not None:
        console.print(
            f"{result.trials} trials in {result.path}: {output.trials_written} played now, "
            f"{result.trials - output.trials_written} by the run it resumed",
            highlight=False,
        )


# `finish-output` belongs with the commands that write outputs; importing it registers it.
from agentsgym.cli import finish_output as _finish_output  # noqa: E402,F401
