"""The core's own plugin (:mod:`.plugin`): generic agents, the local executor, commands.
The example env GuessTheNumber moved to agentsgym-classical; old imports keep working."""

from __future__ import annotations

from typing import Any

from agentsgym.satellites import moved_name


def __getattr__(name: str) -> Any:
    return moved_name(__name__, name)
