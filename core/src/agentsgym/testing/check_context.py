"""An env class's own checks for :func:`~agentsgym.testing.check_env`.

Some envs are not played through the turn hooks (one with ``aplay_own_episode`` plays
its episodes itself), so some of check_env's checks do not fit them and others are
missing. Such an env class may define a classmethod ``contract_checks(context)`` that
returns named checks, functions of no argument that return a detail (or ``None``) and
fail by raising :class:`~agentsgym.testing.CheckFailed`:

* a name of one of check_env's own checks runs in its place (a check that does not
  apply raises :class:`~agentsgym.testing.CheckSkipped` with the reason, and is
  reported as skipped);
* any other name is added after check_env's own checks, in the order given.

The first two checks (the id resolves, the env builds) always run as they are.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentsgym.env import MultistepEnv
    from agentsgym.trajectory import TrajectoryBatch

__all__ = ["EnvCheckContext", "EnvChecks"]

EnvChecks = dict[str, Callable[[], "str | None"]]
"""What ``contract_checks(context)`` returns: check name -> check."""


@dataclass(frozen=True)
class EnvCheckContext:
    """What check_env gives an env class's ``contract_checks``."""

    env_id: str
    agent: Any
    """The agent check_env plays with (the given one, the env's default, or a scripted one)."""
    tokenizer: Any
    """The tokenizer check_env was given (``None`` when it was given none)."""
    num_tasks: int
    num_rollouts: int
    make: Callable[..., MultistepEnv]
    """``make(tokenizer=None, **env_config)``: the env under check, the given env_config
    under ``env_config``; every env built is closed when the checks end."""
    tasks: Callable[[], list[dict[str, Any]]]
    """Copies of ``num_tasks`` tasks of the env's train split (else eval split); fails the
    running check when the env ships no dataset."""
    record: Callable[[TrajectoryBatch], None]
    """Hands a played batch to check_env's checks of played episodes (step infos)."""
