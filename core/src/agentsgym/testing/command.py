"""``agentsgym check-env ENV_ID``: run :func:`agentsgym.testing.check_env` on an env."""

from __future__ import annotations

import typer
from rich.markup import escape

from agentsgym.cli import (
    complete_env_id,
    console,
    parse_key_values,
    tokenizer_cli_option,
    tokenizer_option,
)
from agentsgym.testing.check import check_env


def check_env_command(
    env_id: str = typer.Argument(..., help="registered env id", autocompletion=complete_env_id),
    agent: str | None = typer.Option(None, "--agent", help="agent to play with (default: the env's)"),
    agent_option: list[str] | None = typer.Option(  # noqa: B008
        None, "--agent-option", help="key=value, repeatable"
    ),
    env_config: list[str] | None = typer.Option(  # noqa: B008
        None, "--env-config", help="key=value, repeatable"
    ),
    tokenizer: str = tokenizer_cli_option(),
) -> None:
    """Check that an env follows the agentsgym contract (what env authors run in CI)."""
    report = check_env(
        env_id,
        agent=agent,
        agent_options=parse_key_values(agent_option, "--agent-option"),
        env_config=parse_key_values(env_config, "--env-config"),
        tokenizer=tokenizer_option(tokenizer),
        raise_on_failure=False,
    )
    for check in report.checks:
        mark = "[green]ok[/]  " if check.passed else "[red]FAIL[/]"
        detail = f" [dim]({escape(check.detail)})[/]" if check.passed and check.detail else ""
        if not check.passed:
            detail = f": {escape(check.detail)}"
        console.print(f"{mark} {escape(check.name)}{detail}", highlight=False)
    if not report.passed:
        raise typer.Exit(1)
    console.print(f"[bold green]{escape(env_id)} passes check_env[/] ({len(report.checks)} checks)")
