"""``agentsgym rollout ENV_ID`` (or ``--dataset FILE``): play episodes, and stream one row
per trajectory to a resumable ``--out`` as it ends (see :mod:`.running`)."""

# ruff: noqa: B008 - typer declares a command's options as its parameters' defaults
from __future__ import annotations

import hashlib
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
    resume_option,
    retry_failed_option,
    time_budgets,
    tokenizer_cli_option,
    tokenizer_option,
)
from agentsgym.cli.running import (
    RunPlan,
    check_output_after_inputs,
    exit_on_failures,
    plan_split,
    print_failures,
    run_into_output,
)
from agentsgym.cli.terminal import console
from agentsgym.errors import AgentsGymError, DatasetRowError
from agentsgym.executors import build_envs
from agentsgym.game_outcomes import win_draw_loss
from agentsgym.output import FinishResult, RunOutput, choose_mode, failure_report
from agentsgym.output.records import rollout_rows
from agentsgym.redaction import redact_text
from agentsgym.registry import get_registry
from agentsgym.rows import DatasetRow, load_rows

__all__ = ["agent_name", "build_agent", "rollout"]

DEFAULT_NUM_TASKS = 8


def agent_name(env_id: str | None, agent: str | None) -> str:
    """The agent of the command line (``--agent``), else the env's default agent; a
    usage error that says what to give when there is neither."""
    if agent:
        return agent
    if env_id is None:
        raise typer.BadParameter("give --agent: there is no env to take a default agent from")
    # An id typed on the command line is the user's own choice, a server URL included.
    spec = get_registry().resolve(env_id, allow_class_paths=True, allow_remote=True)
    if spec.default_agent is None:
        raise typer.BadParameter(
            f"{env_id} registers no default agent; choose one with --agent "
            "(see `agentsgym list-agents`)"
        )
    return spec.default_agent


def build_agent(env_id: str | None, agent: str | None, agent_options: list[str] | None) -> Any:
    """Build the agent of the command line, else the env's default agent; unknown or bad
    options are an AgentError."""
    spec = get_registry().agent(agent_name(env_id, agent))
    return build_component(spec, parse_key_values(agent_options, "--agent-option"))


def rollout(
    env_id: str | None = typer.Argument(
        None,
        help="registered env id, e.g. agentsgym/GuessTheNumber-v0 (or use --dataset)",
        autocompletion=complete_env_id,
    ),
    dataset: Path | None = typer.Option(
        None,
        "--dataset",
        help="rows file (.parquet/.jsonl) of {env_class_path, env_config, "
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
        None,
        "--num-tasks",
        min=1,
        max=MAX_TASKS,
        help="tasks taken from the split (default 8), or the first rows of --dataset "
        "(default: every row)",
    ),
    num_rollouts: int = typer.Option(
        2, "--num-rollouts", min=1, max=MAX_ROLLOUTS, help="rollouts per task"
    ),
    split: str = typer.Option("train", "--split", help="train or eval"),
    agent: list[str] | None = typer.Option(
        None,
        "--agent",
        help="agent of every env, ENV_ID=AGENT for one env, or ROLE=AGENT for one role of "
        "an env with roles (repeatable; a role has no '/'); an env without one plays with "
        "its default agent",
    ),
    agent_option: list[str] | None = typer.Option(
        None,
        "--agent-option",
        help="key=value, repeatable; goes to every agent that takes it (ROLE.key=value: "
        "to that role's agent only)",
    ),
    env_config: list[str] | None = typer.Option(None, "--env-config", help="key=value, repeatable"),
    tokenizer: str = tokenizer_cli_option(),
    out: Path = typer.Option(Path("rollouts.parquet"), "--out", help="FILE.parquet or FILE.jsonl"),
    max_concurrency: int = max_concurrency_option(per_worker=True),
    resume: bool = resume_option(),
    retry_failed: bool = retry_failed_option(),
    overwrite: bool = overwrite_option(),
    hook_timeout: float | None = hook_timeout_option(),
    episode_timeout: float | None = episode_timeout_option(),
    max_failure_rate: float | None = max_failure_rate_option(),
    executor: str = executor_option(),
    num_workers: int | None = num_workers_option(),
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
    mode = choose_mode(resume=resume, overwrite=overwrite, retry_failed=retry_failed)
    budgets = time_budgets(hook_timeout, episode_timeout)
    where = ExecutorChoice.parse(executor, num_workers, executor_option)
    choices = AgentChoices.parse(agent)
    options = parse_key_values(agent_option, "--agent-option")
    settings = {"max_concurrency": max_concurrency, "max_failure_rate": max_failure_rate, **budgets}

    def plan_run(local: bool) -> RunPlan:
        if dataset is not None:
            return plan_rows(
                dataset,
                num_tasks=num_tasks,
                num_rollouts=num_rollouts,
                agents=choices,
                agent_options=options,
                tokenizer=tokenizer_option(tokenizer),
                budgets=budgets,
                allow_class_paths=allow_class_paths,
                local=local,
                allow_remote=True if allow_remote_envs else None,
            )
        assert env_id is not None
        return plan_split(
            env_id,
            split=split,
            num_tasks=num_tasks or DEFAULT_NUM_TASKS,
            num_rollouts=num_rollouts,
            agents=choices,
            agent_options=options,
            env_config={**parse_key_values(env_config, "--env-config"), **budgets},
            tokenizer=tokenizer_option(tokenizer),
            local=local,
            description=f"rollouts of {env_id}",
        )

    # an existing --out is refused before a model loads, after the inputs' own errors
    out = check_output_after_inputs(out, mode=mode, plan=plan_run)
    plan = plan_run(not where.executor.remote)
    result, output = run_into_output(
        "rollout",
        plan,
        out,
        mode=mode,
        make_rows=rollout_rows,
        max_concurrency=max_concurrency,
        executor=where,
        settings=settings,
        retry_failed=retry_failed,
    )
    report = failure_report(result.trial_errors())
    print_summary(result, output)
    print_failures(report)
    exit_on_failures(report, max_failure_rate)


def plan_rows(
    path: Path,
    *,
    num_tasks: int | None,
    num_rollouts: int,
    agents: AgentChoices,
    agent_options: dict[str, Any],
    tokenizer: str | None,
    budgets: dict[str, float],
    allow_class_paths: bool,
    local: bool,
    allow_remote: bool | None,
) -> RunPlan:
    """``num_rollouts`` trials of every row of a rows file (or of its first ``num_tasks``);
    each env plays with its own agent (see :mod:`.agent_choice`)."""
    rows = read_rows(path)[:num_tasks]  # num_tasks None: every row
    if not rows:
        raise DatasetRowError(f"rows file {str(path)!r} has no rows")
    if budgets:
        rows = [r.model_copy(update={"env_config": {**r.env_config, **budgets}}) for r in rows]
    class_paths = allow_class_paths or None
    envs = build_envs(
        rows, tokenizer=tokenizer, allow_class_paths=class_paths, allow_remote=allow_remote
    )
    env_ids = [row.env_class_path for row in rows]
    by_id = {env_id: env for (env_id, _), env in envs.items()}  # roles are an env's, not a config's
    players = RunAgents.choose(agents, env_ids, agent_options, build=local, envs=by_id)
    return RunPlan(
        rows=rows,
        num_rollouts=num_rollouts,
        envs=envs,
        agents=players,
        agent_options=agent_options,
        description=f"rollouts of {path.name}",
        tokenizer=tokenizer,
        allow_class_paths=class_paths,
        allow_remote=allow_remote,
        source={"dataset": str(path), "dataset_sha256": sha256_of(path), "env_config": budgets},
    )


def sha256_of(path: Path) -> str:
    """The sha256 of a file's content (a rows file's identity on --resume)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


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
    except Exception as exc:  # noqa: BLE001 - a damaged file raises many kinds (pyarrow, OS)
        raise DatasetRowError(
            f"cannot read rows file {str(path)!r}: {type(exc).__name__}: {exc}. Give a .jsonl "
            "file of JSON objects or a .parquet file written by agentsgym.runtime.rows_to_dataset"
        ) from None


def print_summary(result: FinishResult, output: RunOutput) -> None:
    """Reward, turns and token figures over every trajectory in the output, a table per
    role of a game (its rewards are its own: an average over roles means nothing) and
    per env when the output holds several."""
    ok = [row for row in result.rows if row.get("error") is None]
    roles = any(row.get("role") is not None for row in result.rows)
    if ok:
        failed = len(result.rows) - len(ok)
        title = f"{len(ok)} trajectories written to {result.path}"
        title += f" ({failed} failed)" if failed else ""
        table = _table(title, "per episode", "mean", "min", "max")
        columns = {} if roles else {"reward": "final_reward"}  # a game's: per role, below
        columns["turns"] = "num_turns"
        if all(r.get("num_tokens") is not None for r in ok):
            columns.update({"tokens": "num_tokens", "agent tokens": "num_agent_tokens"})
        for name, key in columns.items():
            values = [float(r[key]) for r in ok]
            table.add_row(
                name, f"{statistics.fmean(values):.2f}", f"{min(values):g}", f"{max(values):g}"
            )
        console.print(table)
    else:
        console.print(
            f"no trajectory succeeded; the {len(result.rows)} failed ones are in {result.path}",
            highlight=False,
        )
    if roles:
        print_role_summary(result.rows)
    print_env_summary(result.rows)
    if output.resumed_from is not None:
        console.print(
            f"{result.trials} trials in {result.path}: {output.trials_written} played now, "
            f"{result.trials - output.trials_written} by the run it resumed",
            highlight=False,
        )


def print_role_summary(rows: list[dict[str, Any]]) -> None:
    """Per role of a game (per env and role, when the run played several envs): its
    trajectories, mean reward and, where the game gives outcomes, win, draw and loss
    rates (a failed game is a loss, as in ``agentsgym eval``)."""
    several = len({row.get("env_id") for row in rows}) > 1
    by_role: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        if row.get("role") is not None and row.get("segment_index", 0) == 0:
            name = (
                f"{redact_text(str(row.get('env_id')))} {row['role']}" if several else row["role"]
            )
            by_role.setdefault(name, []).append(row)
    table = _table(
        "per role", "role", "trajectories", "failed", "mean reward", "win", "draw", "loss"
    )
    for name, role_rows in by_role.items():
        ok = [r for r in role_rows if r.get("error") is None]
        outcomes = [
            None if r.get("error") else (r.get("metrics") or {}).get("outcome") for r in role_rows
        ]
        rates = ["-"] * 3
        if any(outcome is not None for outcome in outcomes):
            rates = [f"{rate:.2f}" for rate in win_draw_loss(outcomes)]
        table.add_row(
            name,
            str(len(role_rows)),
            str(len(role_rows) - len(ok)),
            _mean(ok, "final_reward", ".3f"),
            *rates,
        )
    console.print(table)


def print_env_summary(rows: list[dict[str, Any]]) -> None:
    """Per env of a run that played several (a mixed rows file): trajectories and figures."""
    by_env: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_env.setdefault(str(row.get("env_id")), []).append(row)
    if len(by_env) < 2:
        return
    table = _table("per env", "env", "trajectories", "failed", "mean reward", "mean turns")
    for env_id, env_rows in sorted(by_env.items()):
        ok = [r for r in env_rows if r.get("error") is None]
        table.add_row(
            redact_text(env_id),
            str(len(env_rows)),
            str(len(env_rows) - len(ok)),
            _mean(ok, "final_reward", ".3f"),
            _mean(ok, "num_turns", ".2f"),
        )
    console.print(table)


def _mean(rows: list[dict[str, Any]], key: str, spec: str) -> str:
    return format(statistics.fmean(float(r[key]) for r in rows), spec) if rows else "-"


def _table(title: str, label: str, *figures: str) -> Table:
    """A table of a label column and right-aligned figure columns."""
    table = Table(title=title)
    table.add_column(label)
    for column in figures:
        table.add_column(column, justify="right")
    return table
