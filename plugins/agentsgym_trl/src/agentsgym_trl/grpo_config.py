"""The ``trl.GRPOConfig`` of a ``trl-grpo`` run, built from the fields the installed
class has.

transformers renames training arguments between releases: 5.17 knows
``gradient_checkpointing`` only, later releases call the switch
``activation_checkpointing`` and keep the old name as a deprecated alias. A field
is therefore set under whichever of its names the installed class declares, never
under a name read from one release's documentation. A field the installed class
lacks under every name is an error that says what to do, not a ``TypeError`` from
deep inside transformers.
"""

from __future__ import annotations

import dataclasses
import difflib
import warnings
from collections.abc import Mapping
from typing import Any

from agentsgym.errors import TrainerOptionError

RENAMED_FIELDS: tuple[tuple[str, ...], ...] = (
    ("activation_checkpointing", "gradient_checkpointing"),
    ("activation_checkpointing_kwargs", "gradient_checkpointing_kwargs"),
)
"""Names of one field across transformers releases, the newest first."""


def config_field_names(config_class: type) -> set[str]:
    """The fields ``config_class`` (a dataclass such as ``GRPOConfig``) takes in
    ``__init__``."""
    return {field.name for field in dataclasses.fields(config_class) if field.init}


def installed_names(
    fields: Mapping[str, Any], accepted: set[str], *, given: set[str] = frozenset()
) -> dict[str, Any]:
    """``fields`` with every renamed field under the name ``accepted`` holds.

    :param given: the names the user chose (``--trainer-option``, ``grpo_config``);
        an unknown one of those is the user's to fix, any other is the install's.
    :raises TrainerOptionError: for a field ``accepted`` lacks under every name.
    """
    renamed = dict(fields)
    for names in RENAMED_FIELDS:
        present = [name for name in names if name in renamed]
        target = next((name for name in names if name in accepted), None)
        if not present or target is None:
            continue
        # A user's value (under either name) wins over a derived one.
        chosen = next((name for name in present if name in given), present[0])
        value = renamed[chosen]
        for name in present:
            del renamed[name]
        renamed[target] = value
    unknown = sorted(set(renamed) - accepted)
    if unknown:
        raise TrainerOptionError(_unknown_fields_message(unknown, accepted, given))
    return renamed


def build_grpo_config(fields: Mapping[str, Any], *, given: set[str] = frozenset()) -> Any:
    """The installed ``trl.GRPOConfig`` built from ``fields`` (see :func:`installed_names`)."""
    from trl import GRPOConfig

    accepted = config_field_names(GRPOConfig)
    with warnings.catch_warnings():
        # GRPOConfig's own default for the old name triggers transformers' rename warning.
        warnings.filterwarnings(
            "ignore", message=".*gradient_checkpointing.*", category=FutureWarning
        )
        return GRPOConfig(**installed_names(fields, accepted, given=given))


def _unknown_fields_message(unknown: list[str], accepted: set[str], given: set[str]) -> str:
    lines = []
    for name in unknown:
        close = difflib.get_close_matches(name, sorted(accepted), n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        lines.append(f"{name}{hint}")
    listed = "; ".join(lines)
    if set(unknown) <= set(given):
        return (
            f"trl.GRPOConfig of the installed trl has no field {listed}: check the name of "
            "the --trainer-option / grpo_config field against TRL's GRPOConfig"
        )
    return (
        f"trl.GRPOConfig of the installed trl has no field {listed}, which trl-grpo sets: "
        "the installed trl or transformers is older than agentsgym-trl supports; "
        "pip install -U trl transformers"
    )
