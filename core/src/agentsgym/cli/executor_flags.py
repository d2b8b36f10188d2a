"""The flags executors declare (``register(..., flags=[ExecutorFlag(...)])``), added to
every command that takes ``--executor``. The core knows none by name: an executor's
package brings its flags (``--cluster-address`` with a cluster executor), and a flag
given with another executor is an error naming the executor it belongs to."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any

import typer

from agentsgym.errors import AgentsGymError, RunSettingsError
from agentsgym.registry import get_registry
from agentsgym.specs import ComponentSpec, ExecutorFlag

logger = logging.getLogger(__name__)

_given: ContextVar[dict[str, Any]] = ContextVar("agentsgym_executor_flags")
"""The executor flags given to the command being run (flag -> value): set as click
parses them, reset when a command is resolved (tests run many in one process)."""


def _typer_option(flag: ExecutorFlag, executor: str) -> Any:
    """``flag`` as the option class typer's help shows, built through typer's public
    API; its value goes to :data:`_given` instead of the command's function."""

    def remember(value: str | None) -> str | None:
        if value is not None:
            _given.get().update({flag.flag: value})
        return value

    carrier = typer.Typer(add_completion=False)

    @carrier.command()
    def take(
        value: str | None = typer.Option(
            None,
            flag.flag,
            metavar=flag.metavar,
            help=f"{flag.help} (--executor {executor})".lstrip(),
            callback=remember,
        ),
    ) -> None: ...

    params = typer.main.get_command(carrier).params
    (option,) = [param for param in params if flag.flag in getattr(param, "opts", [])]
    option.expose_value = False
    # click keys parsed values by name: each flag needs its own
    option.name = "executor_flag_" + flag.flag.removeprefix("--").replace("-", "_")
    return option


def add_executor_flags(command: Any) -> None:
    """Add the registered executors' flags to ``command`` when it takes ``--executor``
    (once; a flag the command already has keeps the command's meaning)."""
    _given.set({})
    names = {opt for param in command.params for opt in getattr(param, "opts", [])}
    if "--executor" not in names:
        return
    try:
        executors = get_registry().executors.values()
    except AgentsGymError:  # a broken registry is reported when the command runs
        return
    for spec in executors:
        for declared in spec.flags:
            if declared.flag not in names:
                names.add(declared.flag)
                command.params.append(_typer_option(declared, spec.name))


def given_executor_flags() -> dict[str, Any]:
    """The executor flags given on this command line (flag -> value); none in Python."""
    return dict(_given.get({}))


def flag_options(spec: ComponentSpec, given: Mapping[str, Any]) -> dict[str, Any]:
    """The options of executor ``spec`` from the ``given`` flags; a flag that belongs to
    other executors is a RunSettingsError naming them."""
    own = {declared.flag: declared.option for declared in spec.flags}
    options: dict[str, Any] = {}
    for flag, value in given.items():
        if flag in own:
            options[own[flag]] = value
            continue
        owners = sorted(
            other.name
            for other in get_registry().executors.values()
            if any(declared.flag == flag for declared in other.flags)
        )
        raise RunSettingsError(
            f"{flag} is a flag of the executor {' or '.join(map(repr, owners))}, and this run "
            f"plays on {spec.name!r}: add --executor {owners[0] if owners else '...'}, or "
            f"drop {flag}"
        )
    return options
