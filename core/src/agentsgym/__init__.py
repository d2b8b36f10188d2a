"""agentsgym: multi-step text environments as training data for LLM RL.

This module is the public API of env authors: envs, agents and the plugins that
register them build on it (docs/plugin-authors.md; :mod:`agentsgym.errors`,
:mod:`agentsgym.testing`, :mod:`agentsgym.executors` and the command-line kit
:mod:`agentsgym.cli` are public too). Those who build servers, trainers and other
producers of episodes use the runtime kit, :mod:`agentsgym.runtime`. Its names are
listed once, in ``__init__.pyi``; importing the package loads no plugin, and each name
is imported on first access.
"""

from __future__ import annotations

from agentsgym.lazy_api import public_names

__getattr__, __dir__, __all__ = public_names(
    __name__,
    __file__,
    guide="its public names are listed in agentsgym.__all__, the runtime kit's in "
    "agentsgym.runtime.__all__ (docs/plugin-authors.md says where plugins' names live)",
)
