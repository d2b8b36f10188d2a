"""Playing a planned run into its output, shared by ``rollout`` and ``eval``.

A command builds a :class:`RunPlan` (every trial it means to play, the agent, the
arguments that identify the run); :func:`run_into_output` opens ``--out`` in the
mode asked (new, ``--resume``, ``--overwrite``), plays the trials not written yet
with a progress bar, streams each finished trial to the output, and finishes it.
Ctrl-C and SIGTERM stop the run with the finished trials kept (exit 130).

Exit codes of ``rollout`` and ``eval``: 0 done; 1 every trial failed, or more than
``--max-failure-rate`` of them; 2 bad input (one readable message); 130 interrupted.
"""

from __future__ import annotations

import functools
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from agentsgym.aio import run_sync
from agentsgym.cli import console
from agentsgym.cli.agent_choice import RunAgents
from agentsgym.cli.options import ExecutorChoice
from agentsgym.dataset_runner import arun_dataset
from agentsgym.output import FailureReport, FinishResult, Mode, RunArguments, RunManifest, RunOutput
from agentsgym.output.manifest import Command
from agentsgym.rows import DatasetRow
from agentsgym.runner import TrialJob, arun_jobs
from agentsgym.trajectory import Episode

EXIT_FAILED = 1
EXIT_INTERRUPTED = 130

RowMaker = Callable[[TrialJob, list[Episode]], list[dict[str, Any]]]


def progress_bar() -> Progress:
    return Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    )


@dataclass
class RunPlan:
    """Everything a run will play, decided before any file is touched.

    ``jobs`` are the trials as the local executor plays them (each with the agent of
    its env); ``rows`` (row ``i`` is task ``i``), ``agents``, ``tokenizer`` and
    ``envs`` are what a remote executor needs to play the same trials in its workers.
    """

    jobs: list[TrialJob]
    arguments: RunArguments
    description: str
    agents: RunAgents
    rows: list[DatasetRow]
    envs: dict[tuple[str, str], Any]
    tokenizer: str | None
    allow_class_paths: bool | None = None
    versions: dict[str, str] = field(default_factory=dict)


def plan_jobs(
    rows: list[DatasetRow],
    envs: dict[tuple[str, str], Any],
    agents: RunAgents,
    num_rollouts: int,
) -> list[TrialJob]:
    """Every (task, rollout) trial of ``rows``; row ``i`` is task ``i``. Each job plays
    with its env's agent when the agents were built here (the local executor)."""
    return [
        TrialJob(
            envs[row.env_key()],
            row.task_data,
            index,
            rollout,
            agents.agent_of(row.env_class_path) if agents.built else None,
        )
        for index, row in enumerate(rows)
        for rollout in range(num_rollouts)
    ]


def package_versions(*distributions: str | None) -> dict[str, str]:
    """Installed versions of agentsgym and the given distributions (recorded, not compared)."""
    found = {}
    for name in ("agentsgym", *distributions):
        if not name or name in found:
            continue
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            continue
    return found


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM (a scheduler stopping the job) stops the run like Ctrl-C does."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_into_output(
    command: Command,
    plan: RunPlan,
    out: Path,
    *,
    mode: Mode,
    make_rows: RowMaker,
    max_concurrency: int,
    settings: dict[str, Any],
    executor: ExecutorChoice | None = None,
) -> tuple[FinishResult, RunOutput]:
    """Open ``out``, play the trials it lacks, finish it (see the module docstring)."""
    executor = executor or ExecutorChoice()
    manifest = RunManifest.new(
        command,
        plan.arguments,
        planned_trials=len(plan.jobs),
        settings={**settings, **executor.settings()},
        versions=plan.versions,
        command_line=["agentsgym", *sys.argv[1:]],
    )
    output = RunOutput(out, manifest, mode=mode)
    with sigterm_as_interrupt():
        output.open()
        try:
            _play(output, plan, make_rows, max_concurrency=max_concurrency, executor=executor)
            result = output.finish()
        except KeyboardInterrupt:
            output.close(interrupted=True)
            _print_interrupted(output, len(plan.jobs))
            raise typer.Exit(EXIT_INTERRUPTED) from None
        except BaseException:
            output.close(interrupted=True)
            raise
        output.close()
    return result, output


def _play(
    output: RunOutput,
    plan: RunPlan,
    make_rows: RowMaker,
    *,
    max_concurrency: int,
    executor: ExecutorChoice,
) -> None:
    done = output.done
    todo = [job for job in plan.jobs if job.key not in done]
    if output.resumed_from is not None:
        console.print(
            f"resuming {output.paths.out}: {len(plan.jobs) - len(todo)} of {len(plan.jobs)} "
            f"trials already written, {len(todo)} to play",
            highlight=False,
        )
    with progress_bar() as progress:
        bar = progress.add_task(
            plan.description, total=len(plan.jobs), completed=len(plan.jobs) - len(todo)
        )

        def on_trial(job: TrialJob, episodes: list[Episode]) -> None:
            output.write_trial(functools.partial(make_rows, job, episodes))
            progress.advance(bar)

        if not todo:
            return
        if executor.kind == "ray":
            # Trials stream back to this process as workers finish them, so the output,
            # --resume and the progress bar work as for a local run.
            run_sync(
                arun_dataset(
                    plan.rows,
                    None,
                    plan.arguments.num_rollouts,
                    agents={env_id: plan.agents.spec_of(env_id) for env_id in plan.agents.by_env},
                    tokenizer=plan.tokenizer,
                    allow_class_paths=plan.allow_class_paths,
                    max_concurrency=max_concurrency,
                    on_trial=on_trial,
                    envs=plan.envs,
                    skip=done,
                    executor="ray",
                    num_workers=executor.num_workers,
                    ray_address=executor.address,
                )
            )
        else:
            run_sync(arun_jobs(todo, None, max_concurrency=max_concurrency, on_trial=on_trial))


def _print_interrupted(output: RunOutput, planned: int) -> None:
    done = output.manifest.done_trials
    where = output.paths.out if output.paths.is_jsonl else output.paths.journal
    lines = [
        f"[yellow]interrupted[/]: {done} of {planned} trials are written to {where}; run the "
        "same command with --resume to play the others"
    ]
    if not output.paths.is_jsonl:
        lines.append(
            f"or `agentsgym finish-output {output.paths.out}` to write {output.paths.out.name} "
            "from the trials written so far"
        )
    console.print("\n".join(lines), highlight=False)


def print_failures(report: FailureReport) -> None:
    """How many trials failed and the most common errors, grouped by shape."""
    if not report.failed:
        return
    console.print(
        f"[yellow]{report.failed} of {report.total} trials failed[/]; most common errors:",
        highlight=False,
    )
    for group in report.common_errors:
        console.print(f"  {group.count} x {group.example}", highlight=False, soft_wrap=True)


def exit_on_failures(report: FailureReport, max_failure_rate: float | None) -> None:
    """Exit 1 when every trial failed or more than ``max_failure_rate`` of them did."""
    if report.fails_run(max_failure_rate):
        console.print(
            f"[bold red]run failed[/]: {report.verdict(max_failure_rate)}", highlight=False
        )
        raise typer.Exit(EXIT_FAILED)
