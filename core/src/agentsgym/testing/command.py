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
from agentsgym.redaction import redact_text
from agentsgym.testing.check import check_env
from agentsgym.testing.check_report import CheckResult


def check_env_command(
    env_id: str = typer.Argument(..., help="registered env id", autocompletion=complete_env_id),
    agent: str | None = typer.Option(
        None, "--agent", help="agent to play with (default: the env's)"
    ),
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
        console.print(_check_line(check), highlight=False)
    if not report.passed:
        raise typer.Exit(1)
    skipped = f", {len(report.skipped)} skipped" if report.skipped else ""
    console.print(
        f"[bold green]{escape(redact_text(env_id))} passes check_env[/] "
        f"({len(report.checks)} checks{skipped})"
    )


def _check_line(check: CheckResult) -> str:
    """``ok`` with what was found, ``skip`` with why, or ``FAIL`` with the failure."""
    name, found = escape(check.name), escape(redact_text(check.detail))
    if check.status == "failed":
        return f"[red]FAIL[/] {name}: {found}"
    if check.status == "skipped":
        return f"[yellow]skip[/] {name} [yellow]({found})[/]"
    detail = f" [dim]({found})[/]" if check.detail else ""
    return f"[green]ok[/]   {name}{detail}"
