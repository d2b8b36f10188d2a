"""One env instance per (env_class_path, env_config) of a run's rows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agentsgym.factory import load_tokenizer, make
from agentsgym.rows import DatasetRow

if TYPE_CHECKING:
    from agentsgym.env import MultistepEnv


def build_envs(
    rows: Sequence[DatasetRow],
    *,
    tokenizer: Any = None,
    allow_class_paths: bool | Sequence[str] | None = None,
    envs: dict[tuple[str, str], MultistepEnv] | None = None,
    allow_remote: bool | Sequence[str] | None = None,
) -> dict[tuple[str, str], MultistepEnv]:
    """One env per distinct :meth:`DatasetRow.env_key`, built before any episode plays
    (so an unknown id or a bad config fails fast), reusing those already in ``envs``."""
    envs = {} if envs is None else envs
    loaded: list[Any] = []  # the tokenizer, loaded once and only if an env is missing
    for row in rows:
        key = row.env_key()
        if key not in envs:
            if not loaded:
                loaded.append(load_tokenizer(tokenizer))
            envs[key] = make(
                row.env_class_path,
                tokenizer=loaded[0],
                env_config=row.env_config,
                allow_class_paths=allow_class_paths,
                allow_remote=allow_remote,
            )
    return envs
