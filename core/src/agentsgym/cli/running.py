"""Playing a planned run into its output, shared by ``rollout`` and ``eval``.

A command builds a :class:`RunPlan` before touching any file; :func:`run_into_output`
opens ``--out`` (new, ``--resume`` or ``--overwrite``), plays the trials not written
yet, streams each finished one to the output and finishes it. Ctrl-C and SIGTERM stop
the run with the finished trials kept (exit 130).

Exit codes of ``rollout`` and ``eval``: 0 done; 1 every trial failed, or more than
``--max-failure-rate`` of them; 2 bad input (one readable message); 130 interrupted.
"""

from __future__ import annotations

import functools
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from agentsgym.cli.agent_choice import AgentChoices, RunAgents
from agentsgym.cli.options import ExecutorChoice
from agentsgym.cli.terminal import console
from agentsgym.dataset_runner import run_dataset
from agentsgym.engine import TrialJob
from agentsgym.errors import AgentsGymError, OutputError
from agentsgym.factory import make
from agentsgym.output import FailureReport, FinishResult, Mode, RunArguments, RunManifest, RunOutput
from agentsgym.output.files import check_output_path
from agentsgym.output.manifest import Command
from agentsgym.redaction import redact_text
from agentsgym.rows import DatasetRow
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
    """Everything a run will play, decided before any file is touched: ``num_rollouts``
    trials of every row (row ``i`` is task ``i``), on the envs built for them, by the
    agent of each env. ``source`` (env_id and split, or the rows file; the env_config)
    completes the arguments that identify the run."""

    rows: list[DatasetRow]
    num_rollouts: int
    envs: dict[tuple[str, str], Any]
    agents: RunAgents
    agent_options: dict[str, Any]
    source: dict[str, Any]
    description: str
    tokenizer: str | None
    allow_class_paths: bool | None = None
    allow_remote: bool | None = None  # what rows may name; an id the user typed is allowed

    def close(self) -> None:
        """Close what the run built and holds open: the agents and envs that define
        ``close()`` (clients of model and env servers)."""
        agents = [*self.agents.built.values(), *self.agents.built_roles.values()]
        for built in [*agents, *self.envs.values()]:
            if callable(close := getattr(built, "close", None)):
                close()

    @property
    def planned_trials(self) -> int:
        return len(self.rows) * self.num_rollouts

    @property
    def arguments(self) -> RunArguments:
        single = self.agents.single
        return RunArguments(
            num_tasks=len(self.rows),
            num_rollouts=self.num_rollouts,
            agent=single,
            env_agents={} if single else self.agents.by_env,
            role_agents=self.agents.by_role,
            agent_options=self.agent_options,
            tokenizer=self.tokenizer,
            **self.source,
        )

    @property
    def versions(self) -> dict[str, str]:
        """Installed versions of agentsgym and the envs' distributions (recorded, not compared)."""
        specs = [getattr(env, "spec", None) for env in self.envs.values()]
        names = sorted({s.distribution for s in specs if s is not None and s.distribution})
        found: dict[str, str] = {}
        for name in ["agentsgym", *names]:
            with suppress(PackageNotFoundError):
                found[name] = version(name)
        return found


def plan_split(
    env_id: str,
    *,
    split: str,
    num_tasks: int | None,
    num_rollouts: int,
    agents: AgentChoices,
    agent_options: dict[str, Any],
    env_config: dict[str, Any],
    tokenizer: str | None,
    local: bool,
    description: str,
) -> RunPlan:
    """``num_rollouts`` trials of the first ``num_tasks`` tasks (all: ``None``) of one of
    ``env_id``'s splits. The agents are built here when the executor plays in this
    process, else checked and shipped as recipes."""
    env = make(env_id, tokenizer=tokenizer, env_config=env_config, allow_class_paths=True)
    players = RunAgents.choose(agents, [env_id], agent_options, build=local, envs={env_id: env})
    try:
        dataset = env.get_train_dataset() if split == "train" else env.get_eval_dataset()
    except NotImplementedError as exc:  # the env's own reason, then what to do instead
        raise AgentsGymError(
            f"{str(exc) or f'{env_id} ships no {split} split'}; or give your own tasks with "
            "--dataset FILE, rows of {env_class_path, env_config, task_data}"
        ) from None
    count = len(dataset) if num_tasks is None else min(num_tasks, len(dataset))
    tasks = [row["task_data"] for row in dataset.select(range(count))]
    if not tasks:
        raise AgentsGymError(f"the {split} split of {env_id} has no tasks")
    rows = [DatasetRow(env_class_path=env_id, env_config=env_config, task_data=t) for t in tasks]
    return RunPlan(
        rows=rows,
        num_rollouts=num_rollouts,
        envs={rows[0].env_key(): env},
        agents=players,
        agent_options=agent_options,
        description=description,
        tokenizer=tokenizer,
        source={"env_id": env_id, "split": split, "env_config": env_config},
        allow_class_paths=True,
        allow_remote=True,
    )


def check_output_after_inputs(
    out: str | Path,
    *,
    mode: Mode,
    plan: Callable[[bool], RunPlan],
    with_summary: bool = False,
) -> Path:
    """``check_output_path``, but a wrong input is reported before a refused output.

    ``plan(local)`` plans the run (``local``: build its agents). When the output is
    refused (it exists, it cannot be written), the run is planned without building an
    agent (no model loads) before the refusal is raised, so a bad role, env or agent
    option is what the user hears first; fixing the output alone would not make the
    command work."""
    try:
        return check_output_path(out, mode=mode, with_summary=with_summary)
    except OutputError:
        plan(False)
        raise


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
    retry_failed: bool = False,
) -> tuple[FinishResult, RunOutput]:
    """Open ``out``, play the trials it lacks, finish it (see the module docstring)."""
    executor = executor or ExecutorChoice.parse("local")
    manifest = RunManifest.new(
        command,
        plan.arguments,
        planned_trials=plan.planned_trials,
        settings={**settings, **executor.settings()},
        versions=plan.versions,
        command_line=["agentsgym", *sys.argv[1:]],
    )
    if retry_failed and mode != "resume":
        raise AgentsGymError("--retry-failed replays the failed trials of a run: give --resume too")
    output = RunOutput(out, manifest, mode=mode, retry_failed=retry_failed)
    with sigterm_as_interrupt():
        output.open()
        try:
            _play(output, plan, make_rows, max_concurrency=max_concurrency, executor=executor)
            result = output.finish()
        except KeyboardInterrupt:
            output.close(interrupted=True)
            _print_interrupted(output, plan.planned_trials)
            raise typer.Exit(EXIT_INTERRUPTED) from None
        except BaseException:
            output.close(interrupted=True)
            raise
        finally:
            plan.close()
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
    done, planned = output.done, plan.planned_trials
    if output.resumed_from is not None:
        console.print(
            f"resuming {output.paths.out}: {len(done)} of {planned} trials already written, "
            f"{planned - len(done)} to play",
            highlight=False,
        )
    with progress_bar() as progress:
        description = redact_text(plan.description)  # an env URL may carry a key
        bar = progress.add_task(description, total=planned, completed=len(done))
        if len(done) >= planned:
            return

        def on_trial(job: TrialJob, episodes: list[Episode]) -> None:
            output.write_trial(functools.partial(make_rows, job, episodes))
            progress.advance(bar)

        # Every trial streams back to this process as it finishes, whichever executor
        # plays it, so the output, --resume and the progress bar work the same.
        run_dataset(
            plan.rows,
            None,
            plan.num_rollouts,
            agents=plan.agents.players(remote=executor.executor.remote),
            tokenizer=plan.tokenizer,
            allow_class_paths=plan.allow_class_paths,
            allow_remote=plan.allow_remote,
            max_concurrency=max_concurrency,
            on_trial=on_trial,
            envs=plan.envs,
            skip=done,
            executor=executor.executor,
        )


def _print_interrupted(output: RunOutput, planned: int) -> None:
    paths = output.paths
    message = (
        f"[yellow]interrupted[/]: {output.manifest.done_trials} of {planned} trials are written "
        f"to {paths.out if paths.is_jsonl else paths.journal}; run the same command with "
        "--resume to play the others"
    )
    if not paths.is_jsonl:
        message += (
            f"\nor `agentsgym finish-output {paths.out}` to write {paths.out.name} from the "
            "trials written so far"
        )
    console.print(message, highlight=False)


def print_failures(report: FailureReport) -> None:
    """How many trials failed and the most common errors, grouped by shape; how many of
    them had no reward (RewardUnavailableError)."""
    if not report.failed:
        return
    console.print(
        f"[yellow]{report.failed} of {report.total} trials failed[/]; most common errors:",
        highlight=False,
    )
    for group in report.common_errors:
        example = redact_text(group.example)
        console.print(f"  {group.count} x {example}", highlight=False, soft_wrap=True)
    if report.reward_unavailable:
        console.print(
            f"[yellow]{report.reward_unavailable} of them had no reward[/] "
            "(RewardUnavailableError: a judge failed, timed out or answered something that is "
            "not a score); they are not scored and trainers leave them out",
            highlight=False,
            soft_wrap=True,
        )


def exit_on_failures(report: FailureReport, max_failure_rate: float | None) -> None:
    """Exit 1 when every trial failed or more than ``max_failure_rate`` of them did."""
    if report.fails_run(max_failure_rate):
        console.print(
            f"[bold red]run failed[/]: {report.verdict(max_failure_rate)}", highlight=False
        )
        raise typer.Exit(EXIT_FAILED)
