"""``agentsgym atropos ENV_ID --api-url URL``: an env as an Atropos environment service."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer
from rich.table import Table
from rich.text import Text

from agentsgym import make
from agentsgym.cli import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    AgentChoices,
    RunAgents,
    complete_env_id,
    console,
    err_console,
    max_concurrency_option,
    parse_key_values,
    sigterm_as_interrupt,
    tokenizer_cli_option,
    tokenizer_option,
)
from agentsgym.errors import AgentsGymError
from agentsgym.runtime import redact_text
from agentsgym_atropos.stats import DEFAULT_MAX_DROPPED_IN_A_ROW

if TYPE_CHECKING:
    from agentsgym_atropos.stats import ProducerStats


def atropos_command(
    env_id: str = typer.Argument(..., help="registered env id", autocompletion=complete_env_id),
    api_url: str = typer.Option(
        "http://localhost:8000", "--api-url", help="the Atropos API server (run-api)"
    ),
    group_size: int = typer.Option(8, "--group-size", min=1, help="rollouts per task (GRPO group)"),
    max_groups: int | None = typer.Option(
        None,
        "--max-groups",
        min=1,
        help="stop after this many groups (default: the trainer's num_steps)",
    ),
    split: str = typer.Option("train", "--split", help="train or eval"),
    agent: list[str] | None = typer.Option(
        None,
        "--agent",
        help="agent name (default: the env's); in an env with roles ROLE=NAME gives one "
        "role its agent (default: the role's own), repeatable",
    ),
    agent_option: list[str] | None = typer.Option(
        None, "--agent-option", help="key=value (ROLE.key=value: one role's agent), repeatable"
    ),
    env_config: list[str] | None = typer.Option(None, "--env-config", help="key=value, repeatable"),
    tokenizer: str = tokenizer_cli_option(),
    max_batches_offpolicy: int = typer.Option(
        3, "--max-batches-offpolicy", min=0, help="pause while this many trainer batches are queued"
    ),
    advantages: str = typer.Option(
        "none",
        "--advantages",
        help="none (scores only) or per_token (group-normalised per-token rewards)",
    ),
    max_concurrency: int = max_concurrency_option("rollouts"),
    outage_window: float = typer.Option(
        300.0,
        "--outage-window",
        min=0.0,
        help="seconds a request to the API server is retried (backoff with jitter) while "
        "it is unreachable or failing; finished groups wait and are pushed when it is back",
    ),
    max_dropped_groups: int = typer.Option(
        DEFAULT_MAX_DROPPED_IN_A_ROW,
        "--max-dropped-groups",
        min=0,
        help="stop (exit 1) once this many groups in a row had a failed episode, none "
        "pushed (0: never stop for that)",
    ),
    seed: int = typer.Option(0, "--seed"),
) -> None:
    """Register ENV_ID with an Atropos API server and push scored groups as they finish.

    The trainer must be registered with the server (it pulls GET /batch); the env
    waits for it. See docs/scaling.md for the field mapping. Exits 0 when done, 1 when
    the run failed (the server stayed away longer than --outage-window, refused a
    request, every group had a failed episode, or --max-dropped-groups in a row did),
    2 for bad input; a summary of what was pushed is printed in every case.
    """
    from agentsgym.runtime import run_sync
    from agentsgym_atropos.producer import AtroposProducer

    if split not in ("train", "eval"):
        raise typer.BadParameter("--split must be train or eval")
    if advantages not in ("none", "per_token"):
        raise typer.BadParameter("--advantages must be none or per_token")
    env = make(
        env_id,
        tokenizer=tokenizer_option(tokenizer),
        env_config=parse_key_values(env_config, "--env-config"),
    )
    # who plays, as `rollout` chooses: refused here, before anything is played or pushed
    agents = RunAgents.choose(
        AgentChoices.parse(agent),
        [env_id],
        parse_key_values(agent_option, "--agent-option"),
        build=True,
        envs={env_id: env},
    )
    player = agents.players(remote=False)[env_id]
    dataset = env.get_train_dataset() if split == "train" else env.get_eval_dataset()
    producer = AtroposProducer(
        env,
        player,
        api_url,
        tasks=list(dataset["task_data"]),
        group_size=group_size,
        max_groups=max_groups,
        max_batches_offpolicy=max_batches_offpolicy,
        max_concurrency=max_concurrency,
        advantages=advantages,  # type: ignore[arg-type]
        outage_window=outage_window,
        max_dropped_in_a_row=max_dropped_groups,
        seed=seed,
    )
    shown = producer.shown_url
    console.print(f"producing {env_id} for {shown} (waiting for the trainer to start)")
    code, failure = 0, None
    try:
        with sigterm_as_interrupt():
            run_sync(producer.run())
    except KeyboardInterrupt:
        code, failure = EXIT_INTERRUPTED, "interrupted"
    except AgentsGymError as exc:  # the server (AtroposError), or the run itself
        code, failure = EXIT_FAILED, redact_text(str(exc))
    finally:
        # Also before the traceback of an unexpected error: what reached the trainer.
        print_summary(producer.stats, f"{env_id} -> {shown}")
    if failure is not None:
        err_console.print(Text.assemble(("error: ", "bold red"), failure), soft_wrap=True)
    stats = producer.stats
    if not code and stats.groups_pushed == 0 and stats.groups_dropped:
        code = EXIT_FAILED  # every group had a failed episode
    if code:
        raise typer.Exit(code)


def print_summary(stats: ProducerStats, title: str) -> None:
    table = Table(title=title)
    table.add_column("")
    table.add_column("value", justify="right")
    for name, value in (
        ("groups pushed", stats.groups_pushed),
        ("sequences pushed", stats.sequences_pushed),
        ("groups dropped (a failed episode)", stats.groups_dropped),
        ("groups discarded (finished, not pushed)", stats.groups_discarded),
        ("groups unfinished when it stopped", stats.groups_unfinished),
        ("retries (API server unreachable or failing)", stats.retries),
        ("pauses (trainer's queue full)", stats.pauses),
        ("registrations (again after an API restart)", stats.registrations),
    ):
        table.add_row(name, str(value))
    console.print(table)
