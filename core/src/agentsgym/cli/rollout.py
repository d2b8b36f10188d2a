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

from agentsgym.cli.agent_choice import AgentChoices, RunAgents
from agentsgym.cli.options import (
    MAX_ROLLOUTS,
    MAX_TASKS,
    ExecutorChoice,
    build_component,
    complete_env_id,
    episode_timeout_option,
    executor_option,
    executor_options_option,
    hook_timeout_option,
    max_concurrency_option,
    max_failure_rate_option,
    num_workers_option,
    overwrite_option,
    parse_key_values,
    ray_address_option,
    resume_option,
    sha256_of,
    time_budgets,
    tokenizer_cli_option,
    tokenizer_option,
)
from agentsgym.cli.running import (
    RunPlan,
    exit_on_failures,
    package_versions,
    plan_split,
    print_failures,
    run_into_output,
)
from agentsgym.cli.terminal import console
from agentsgym.errors import AgentsGymError, DatasetRowError
from agentsgym.executors import build_envs
from agentsgym.output import FinishResult, RunArguments, RunOutput, choose_mode, failure_report
from agentsgym.output.files import check_output_path
from agentsgym.output.records import rollout_rows
from agentsgym.registry import get_registry
from agentsgym.rows import DatasetRow, load_rows

__all__ = ["build_agent", "rollout"]


def resolve_agent_name(env_id: str | None, agent: str | None) -> str:
    """The agent named on the command line, or the env's registered default agent."""
    if agent:
        return agent
    if env_id is None:
        raise typer.BadParameter("give --agent: there is no env to take a default agent from")
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


def rollout(
    env_id: str | None = typer.Argument(
        None,
        help="registered env id, e.g. agentsgym/GuessTheNumber-v0 (or use --dataset)",
        autocompletion=complete_env_id,
    ),
    dataset: Path | None = typer.Option(
        None, "--dataset", help="rows file (.parquet/.jsonl) of {env_class_path, env_config, "
        "task_data}; rows may mix envs",
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
    num_tasks: int | None = typer.Option(
        None, "--num-tasks", min=1, max=MAX_TASKS,
        help="tasks taken from the split (default 8), or the first rows of --dataset "
        "(default: every row)",
    ),
    num_rollouts: int = typer.Option(
        2, "--num-rollouts", min=1, max=MAX_ROLLOUTS, help="rollouts per task"
    ),
    split: str = typer.Option("train", "--split", help="train or eval"),
    agent: list[str] | None = typer.Option(
        None, "--agent", help="agent of every env, or ENV_ID=AGENT for one env (repeatable); "
        "an env without one plays with its default agent",
    ),
    agent_option: list[str] | None = typer.Option(
        None, "--agent-option", help="key=value, repeatable; goes to every agent that takes it"
    ),
    env_config: list[str] | None = typer.Option(None, "--env-config", help="key=value, repeatable"),
    tokenizer: str = tokenizer_cli_option(),
    out: Path = typer.Option(Path("rollouts.parquet"), "--out", help="FILE.parquet or FILE.jsonl"),
    max_concurrency: int = max_concurrency_option(per_worker=True),
    resume: bool = resume_option(),
    overwrite: bool = overwrite_option(),
    hook_timeout: float | None = hook_timeout_option(),
    episode_timeout: float | None = episode_timeout_option(),
    max_failure_rate: float | None = max_failure_rate_option(),
    executor: str = executor_option(),
    num_workers: int | None = num_workers_option(),
    ray_address: str | None = ray_address_option(),
    executor_option: list[str] | None = executor_options_option(),
) -> None:
    """Play episodes of ENV_ID (or of a rows file) and write one row per trajectory."""
    if split not in ("train", "eval"):
        raise typer.BadParameter("--split must be train or eval")
    if (env_id is None) == (dataset is None):
        raise typer.BadParameter("give either ENV_ID or --dataset FILE")
    if dataset is not None and env_config:
        raise typer.BadParameter(
            "--env-config applies to ENV_ID; the rows of --dataset carry their own env_config"
        )
    mode = choose_mode(resume=resume, overwrite=overwrite)
    out = check_output_path(out)
    budgets = time_budgets(hook_timeout, episode_timeout)
    where = ExecutorChoice.parse(executor, num_workers, ray_address, executor_option)
    choices = AgentChoices.parse(agent)
    options = parse_key_values(agent_option, "--agent-option")
    if dataset is not None:
        plan = plan_rows(
            dataset, num_tasks=num_tasks, num_rollouts=num_rollouts, agents=choices,
            agent_options=options, tokenizer=tokenizer, budgets=budgets,
            allow_class_paths=allow_class_paths, local=not where.executor.remote,
            allow_remote=True if allow_remote_envs else None,
        )
    else:
        assert env_id is not None
        plan = plan_split(
            env_id, split=split, num_tasks=num_tasks or DEFAULT_NUM_TASKS,
            num_rollouts=num_rollouts, agents=choices, agent_options=options,
            env_config={**parse_key_values(env_config, "--env-config"), **budgets},
            tokenizer=tokenizer_option(tokenizer), local=not where.executor.remote,
            description=f"rollouts of {env_id}",
        )
    result, output = run_into_output(
        "rollout", plan, out, mode=mode, make_rows=rollout_rows,
        max_concurrency=max_concurrency, executor=where,
        settings={
            "max_concurrency": max_concurrency, "max_failure_rate": max_failure_rate, **budgets
        },
    )
    report = failure_report(result.trial_errors())
    print_summary(result, output)
    print_failures(report)
    exit_on_failures(report, max_failure_rate)


DEFAULT_NUM_TASKS = 8


def plan_rows(
    path: Path,
    *,
    num_tasks: int | None,
    num_rollouts: int,
    agents: AgentChoices,
    agent_options: dict[str, Any],
    tokenizer: str,
    budgets: dict[str, float],
    allow_class_paths: bool,
    local: bool = True,
    allow_remote: bool | None = None,
) -> RunPlan:
    """The trials of ``num_rollouts`` rollouts of every row of a file (or its first
    ``num_tasks``); each env plays with its own agent (see :mod:`.agent_choice`)."""
    rows = read_rows(path)
    if num_tasks is not None:
        rows = rows[:num_tasks]
    if not rows:
        raise DatasetRowError(f"rows file {str(path)!r} has no rows")
    if budgets:
        rows = [
            row.model_copy(update={"env_config": {**row.env_config, **budgets}}) for row in rows
        ]
    envs = build_envs(
        rows,
        tokenizer=tokenizer_option(tokenizer),
        allow_class_paths=allow_class_paths or None,
        allow_remote=allow_remote,
    )
    env_ids = [row.env_class_path for row in rows]
    players = RunAgents.choose(agents, env_ids, agent_options, build=local)
    return RunPlan(
        rows=rows,
        num_rollouts=num_rollouts,
        envs=envs,
        agents=players,
        arguments=RunArguments(
            dataset=str(path), dataset_sha256=sha256_of(path), num_tasks=len(rows),
            num_rollouts=num_rollouts, env_config=budgets, agent=players.single,
            env_agents={} if players.single else players.by_env, agent_options=agent_options,
            tokenizer=tokenizer_option(tokenizer),
        ),
        description=f"rollouts of {path.name}",
        tokenizer=tokenizer_option(tokenizer),
        allow_class_paths=allow_class_paths or None,
        versions=package_versions(*sorted({s.distribution for s in _specs(envs.values())})),
    )


def _specs(envs: Any) -> list[Any]:
    return [env.spec for env in envs if getattr(env, "spec", None) is not None]


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
    """Reward, turns and token figures over every trajectory in the output, and one
    line per env when the output holds several."""
    ok = [row for row in result.rows if row.get("error") is None]
    if not ok:
        console.print(
            f"no trajectory succeeded; the {len(result.rows)} failed ones are in {result.path}",
            highlight=False,
        )
    else:
        failed = len(result.rows) - len(ok)
        title = f"{len(ok)} trajectories written to {result.path}"
        table = Table(title=title + (f" ({failed} failed)" if failed else ""))
        for column in ("per episode", "mean", "min", "max"):
            table.add_column(column, justify="right" if column != "per episode" else "left")
        columns: dict[str, list[float]] = {
            "reward": [float(r["final_reward"]) for r in ok],
            "turns": [float(r["num_turns"]) for r in ok],
        }
        if all(r.get("num_tokens") is not None for r in ok):
            columns["tokens"] = [float(r["num_tokens"]) for r in ok]
            columns["agent tokens"] = [float(r["num_agent_tokens"]) for r in ok]
        for name, values in columns.items():
            table.add_row(
                name, f"{statistics.fmean(values):.2f}", f"{min(values):g}", f"{max(values):g}"
            )
        console.print(table)
    print_env_summary(result.rows)
    if output.resumed_from is not None:
        console.print(
            f"{result.trials} trials in {result.path}: {output.trials_written} played now, "
            f"{result.trials - output.trials_written} by the run it resumed",
            highlight=False,
        )


def env_summary(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per env: trajectories, failed ones, mean reward and turns of the others."""
    by_env: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_env.setdefault(str(row.get("env_id")), []).append(row)
    summary = []
    for env_id, env_rows in sorted(by_env.items()):
        ok = [r for r in env_rows if r.get("error") is None]
        summary.append(
            {
                "env_id": env_id,
                "trajectories": len(env_rows),
                "failed": len(env_rows) - len(ok),
                "mean_reward": statistics.fmean(float(r["final_reward"]) for r in ok)
                if ok else None,
                "mean_turns": statistics.fmean(float(r["num_turns"]) for r in ok) if ok else None,
            }
        )
    return summary


def print_env_summary(rows: list[dict[str, Any]]) -> None:
    """The per-env table of a run that played several envs (a mixed rows file)."""
    summary = env_summary(rows)
    if len(summary) < 2:
        return
    table = Table(title="per env")
    for column in ("env", "trajectories", "failed", "mean reward", "mean turns"):
        table.add_column(column, justify="left" if column == "env" else "right")
    for item in summary:
        table.add_row(
            item["env_id"],
            str(item["trajectories"]),
            str(item["failed"]),
            "-" if item["mean_reward"] is None else f"{item['mean_reward']:.3f}",
            "-" if item["mean_turns"] is None else f"{item['mean_turns']:.2f}",
        )
    console.print(table)
