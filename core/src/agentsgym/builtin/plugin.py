"""The core's built-in plugin: the generic agents, the local executor and the core's
commands, registered through the same hooks as any plugin's."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentsgym.hookspecs import hookimpl

if TYPE_CHECKING:
    import typer

    from agentsgym.hookspecs import RegisterAgent, RegisterExecutor


@hookimpl
def register_agents(register: RegisterAgent) -> None:
    register(
        "scripted",
        "agentsgym.agents.scripted:ScriptedAgent",
        description="replies with a fixed list of messages (option: replies=[...])",
    )
    register(
        "openai",
        "agentsgym.agents.openai_agent:OpenAIAgent",
        description="an OpenAI-compatible server such as vLLM (options: base_url, model, "
        "api_key, temperature, max_tokens, timeout, max_retries, max_concurrency, "
        "extra_body, api=chat|completions)",
    )


@hookimpl
def register_executors(register: RegisterExecutor) -> None:
    register(
        "local",
        "agentsgym.executors:LocalExecutor",
        description="this process's event loop (the default)",
    )


@hookimpl(tryfirst=True)  # the core's commands lead each section of --help
def register_commands(cli: typer.Typer) -> None:
    from agentsgym.cli import describe, finish_output, listing, rollout
    from agentsgym.testing import command as check

    play, look, author = "Play", "Look around", "Write an env"
    cli.command("rollout", rich_help_panel=play)(rollout.rollout)
    cli.command("finish-output", rich_help_panel=play)(finish_output.finish_output_command)
    cli.command("list-envs", rich_help_panel=look)(listing.list_envs)
    cli.command("describe", rich_help_panel=look)(describe.describe)
    cli.command("list-agents", rich_help_panel=look)(listing.list_agents)
    cli.command("list-trainers", rich_help_panel=look)(listing.list_trainers)
    cli.command("list-executors", rich_help_panel=look)(listing.list_executors)
    cli.command("list-models", rich_help_panel=look)(listing.list_models)
    cli.command("check-env", rich_help_panel=author)(check.check_env_command)
