"""Options shared by several commands: ``key=value`` pairs and the tokenizer default."""

from __future__ import annotations

import json
from typing import Any

import typer

from agentsgym.factory import DEFAULT_TOKENIZER

CLI_TOKENIZER_DEFAULT = DEFAULT_TOKENIZER
"""The ``--tokenizer`` default of every command that plays episodes (rollout, eval,
check-env): the bundled ``agentsgym/tiny-chatml``. It is offline (no download, no
model server), it is what the scripted agents and the ``tiny`` model use, and it
gives every command token-exact rows and the token-fidelity checks out of the box,
which is what agentsgym is for. ``none`` plays text only; a model's own tokenizer is
needed when that model plays (token ids must be the model's)."""

TOKENIZER_HELP = (
    "tokenizer of the token fields: the bundled agentsgym/tiny-chatml (default: offline, "
    "what scripted agents and --model tiny use, so every env gives token-exact rows and "
    "token checks out of the box); when a model plays, its own tokenizer (a local folder "
    "or model name for AutoTokenizer: token ids must be the model's); or 'none' for text only"
)


def tokenizer_cli_option() -> Any:
    """The ``--tokenizer`` option, with the one default every command shares."""
    return typer.Option(CLI_TOKENIZER_DEFAULT, "--tokenizer", help=TOKENIZER_HELP)


def parse_key_values(pairs: list[str] | None, what: str) -> dict[str, Any]:
    """``["a=1", "b=[1, 2]", "c=text"]`` -> ``{"a": 1, "b": [1, 2], "c": "text"}``.

    Values are read as JSON when they parse as JSON, else kept as strings.
    """
    result: dict[str, Any] = {}
    for pair in pairs or []:
        key, sep, raw = pair.partition("=")
        if not sep or not key.strip():
            raise typer.BadParameter(f"{what} must look like key=value, got {pair!r}")
        try:
            value: Any = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        result[key.strip()] = value
    return result


def complete_env_id(incomplete: str) -> list[str]:
    """Shell completion of an env id argument: the registered ids starting with it."""
    try:
        from agentsgym.registry import get_registry

        ids = sorted(get_registry().envs)
    except Exception:  # completion must never print a traceback into the shell
        return []
    return [env_id for env_id in ids if env_id.startswith(incomplete)]
