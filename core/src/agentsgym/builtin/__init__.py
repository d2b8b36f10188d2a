"""What ships with the core: the example env GuessTheNumber (``agentsgym/GuessTheNumber-v0``)
and its bisection agent (``agentsgym/bisect``), registered by :mod:`.plugin` like any
plugin's. Satellites and plugin tests build on them; imported on first access."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["BisectAgent", "GuessState", "GuessTheNumberConfig", "GuessTheNumberEnv"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from agentsgym.builtin import guess_number

        return getattr(guess_number, name)
    raise AttributeError(f"module 'agentsgym.builtin' has no attribute {name!r}")


if TYPE_CHECKING:
    from agentsgym.builtin.guess_number import (
        BisectAgent,
        GuessState,
        GuessTheNumberConfig,
        GuessTheNumberEnv,
    )
