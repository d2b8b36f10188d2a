"""``agentsgym eval ENV_ID``: accuracy, pass@k, cons@k and best@k over a split.

Per-sample results stream to ``--out`` as trials finish (see :mod:`agentsgym.output`);
the summary (``results.summary.json`` beside ``results.jsonl``) is computed when the run ends, over every sample
in the output, those of a resumed run included.

Secrets given in ``--env-config`` or ``--agent-option`` (an ``api_key`` at any depth, a
``base_url`` with userinfo) reach no file eval writes: the run record and the lock are
redacted by :mod:`agentsgym.output`, sample errors by :mod:`.samples`, and the summary
is redacted as it is written, whatever a future field of it holds.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.table import Table

from agentsgym import Episode
from agentsgym.cli import (
    MAX_ROLLOUTS,
    MAX_TASKS,
    AgentChoices,
    ExecutorChoice,
    FinishResult,
    OutputPaths,
    RunPlan,
    check_output_after_inputs,
    choose_mode,
    complete_env_id,
    console,
    episode_timeout_option,
    executor_option,
    executor_options_option,
    exit_on_failures,
    failure_report,
    hook_timeout_option,
    log_samples_option,
    max_concurrency_option,
    max_failure_rate_option,
    num_workers_option,
    overwrite_option,
    parse_key_values,
    plan_split,
    print_failures,
    project_option,
    report_to_option,
    resume_option,
    retry_failed_option,
    run_into_output,
    run_name_option,
    time_budgets,
    tokenizer_cli_option,
    tokenizer_option,
    tracker_class,
)
from agentsgym.errors import AgentsGymError, OutputError
from agentsgym.runtime import TrialJob, redact
from agentsgym_eval.samples import EvalReport, samples_from_rows, summarize, trial_samples
from agentsgym_eval.tracking import report_summary


def eval_command(
    env_id: str = typer.Argument(
        ..., help="registered env id, e.g. classical/GSM8K-v0", autocompletion=complete_env_id
    ),
    num_rollouts: int = typer.Option(
        1, "--num-rollouts", "-k", min=1, max=MAX_ROLLOUTS, help="samples per task (k)"
    ),
    num_tasks: int | None = typer.Option(
        None, "--num-tasks", min=1, max=MAX_TASKS, help="first N tasks (default: all)"
    ),
    split: str = typer.Option("eval", "--split", help="eval or train"),
    agent: list[str] | None = typer.Option(
        None,
        "--agent",
        help="agent name (default: the env's); ROLE=NAME for one role of an env with roles "
        "(repeatable)",
    ),
    agent_option: list[str] | None = typer.Option(
        None, "--agent-option", help="key=value, repeatable (ROLE.key=value: one role's agent)"
    ),
    env_config: list[str] | None = typer.Option(None, "--env-config", help="key=value, repeatable"),
    tokenizer: str = tokenizer_cli_option(),
    out: Path = typer.Option(
        Path("eval_results.jsonl"), "--out", help="per-sample FILE.jsonl or FILE.parquet"
    ),
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
    report_to: str = report_to_option(),
    project: str = project_option(),
    run_name: str | None = run_name_option(),
    log_samples: int = log_samples_option(),
) -> None:
    """Evaluate an agent on ENV_ID: k rollouts per task, per-sample results to --out.

    A summary JSON is written next to the results (results.summary.json for
    --out results.jsonl); with
    --report-to, the summary goes to that experiment tracker too.
    """
    if split not in ("train", "eval"):
        raise typer.BadParameter("--split must be train or eval")
    mode = choose_mode(resume=resume, overwrite=overwrite, retry_failed=retry_failed)
    budgets = time_budgets(hook_timeout, episode_timeout)
    where = ExecutorChoice.parse(executor, num_workers, executor_option)

    def plan_run(local: bool) -> RunPlan:
        return plan_split(
            env_id,
            split=split,
            num_tasks=num_tasks,
            num_rollouts=num_rollouts,
            agents=AgentChoices.parse(agent),
            agent_options=parse_key_values(agent_option, "--agent-option"),
            env_config={**parse_key_values(env_config, "--env-config"), **budgets},
            tokenizer=tokenizer_option(tokenizer),
            local=local,
            description=f"eval {env_id}",
        )

    # an existing --out is refused before a model loads, after the inputs' own errors
    out = check_output_after_inputs(out, mode=mode, plan=plan_run, with_summary=True)
    tracker_class(report_to)  # a tracker that is not installed: refused before a model loads
    plan = plan_run(not where.executor.remote)
    result, _ = run_into_output(
        "eval",
        plan,
        out,
        mode=mode,
        make_rows=sample_rows,
        max_concurrency=max_concurrency,
        executor=where,
        retry_failed=retry_failed,
        settings={
            "max_concurrency": max_concurrency,
            "max_failure_rate": max_failure_rate,
            **budgets,
        },
    )
    report = write_summary(result)
    print_report(report, result.path, OutputPaths(result.path).summary)
    tracked = report_summary(
        report_to,
        report,
        samples_from_rows(result.rows),
        project=project,
        run_name=run_name,
        config=result.manifest.arguments.model_dump(),
        num_samples=log_samples,
    )
    if tracked is not None:
        console.print(
            f"summary logged to {report_to}: run {tracked} of project {project}", highlight=False
        )
    failures = failure_report(result.trial_errors())
    print_failures(failures)
    exit_on_failures(failures, max_failure_rate)


def sample_rows(job: TrialJob, episodes: list[Episode]) -> list[dict[str, object]]:
    """The per-sample rows of one finished trial: one, or one per role (with ``role``,
    ``outcome`` and ``trial_rows``, which --resume reads); a single-agent env's row has
    none of those keys."""
    samples = trial_samples(episodes)
    if samples[0].role is None:
        return [samples[0].model_dump(exclude={"role", "outcome"})]
    return [{**sample.model_dump(), "trial_rows": len(samples)} for sample in samples]


def write_summary(result: FinishResult) -> EvalReport:
    """Score every sample in a finished eval output and write the summary beside it
    (``results.summary.json`` for ``results.jsonl``)."""
    if not result.complete:
        raise OutputError(
            f"{result.path} holds {result.trials} of {result.planned} samples; the summary is "
            "written when every sample is played (run the same command with --resume)"
        )
    arguments = result.manifest.arguments
    try:
        report = summarize(samples_from_rows(result.rows), env_id=arguments.env_id or "")
    except (ValueError, TypeError) as exc:
        raise AgentsGymError(f"cannot summarize {result.path}: {exc}") from None
    summary = OutputPaths(result.path).summary
    tmp = summary.with_name(summary.name + ".tmp")
    record = redact({"split": arguments.split, **report.model_dump()})
    tmp.write_text(json.dumps(record, indent=2) + "\n")
    tmp.replace(summary)
    return report


def print_report(report: EvalReport, results: Path, summary: Path) -> None:
    table = Table(
        title=f"{report.env_id}: {report.num_tasks} tasks x {report.num_rollouts} rollouts"
    )
    table.add_column("metric")
    table.add_column("value", justify="right")
    k = report.num_rollouts
    if not report.roles:  # a game's figures are its roles' own (below): pooled, they mean nothing
        table.add_row("accuracy", f"{report.accuracy:.4f}")
        for at, value in report.pass_at_k.items():
            table.add_row(f"pass@{at}", f"{value:.4f}")
        if report.cons_at_k is not None:  # only where samples gave answers to vote with
            table.add_row(f"cons@{k}", f"{report.cons_at_k:.4f}")
        table.add_row(f"best@{k} (reward)", f"{report.best_at_k:.4f}")
        table.add_row("mean reward", f"{report.mean_reward:.4f}")
    table.add_row("mean turns", f"{report.mean_turns:.3g}")
    table.add_row("failed samples", str(report.num_failed))
    if report.num_reward_unavailable:
        table.add_row(
            "  of them without a reward (a judge failed)", str(report.num_reward_unavailable)
        )
    for role, figures in report.roles.items():
        table.add_row(f"{role}: accuracy", f"{figures.accuracy:.4f}")
        if figures.cons_at_k is not None:
            table.add_row(f"{role}: cons@{k}", f"{figures.cons_at_k:.4f}")
        if figures.win_rate is not None:
            rates = f"{figures.win_rate:.3f} / {figures.draw_rate:.3f} / {figures.loss_rate:.3f}"
            table.add_row(f"{role}: win / draw / loss", rates)
        table.add_row(f"{role}: mean reward", f"{figures.mean_reward:.4f}")
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
