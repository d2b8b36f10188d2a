"""agentsgym: multi-step text environments as training data for LLM RL.

This module is the public API of env authors: envs, agents and the plugins that
register them build on it (docs/plugin-authors.md; :mod:`agentsgym.errors`,
:mod:`agentsgym.testing`, :mod:`agentsgym.executors` and the command-line kit
:mod:`agentsgym.cli` are public too). Those who build servers, trainers and other
producers of episodes use the runtime kit, :mod:`agentsgym.runtime`. Its names are
listed once, in the ``TYPE_CHECKING`` block below; importing the package loads no
plugin, and each name is imported on first access.
"""

# ruff: noqa: F401 - the TYPE_CHECKING block lists the names this module hands out

from __future__ import annotations

from typing import TYPE_CHECKING

from agentsgym.lazy_api import public_names

__getattr__, __dir__, __all__ = public_names(
    __name__,
    __file__,
    guide="its public names are listed in agentsgym.__all__, the runtime kit's in "
    "agentsgym.runtime.__all__ (docs/plugin-authors.md says where plugins' names live)",
)

# The imports below are this API's name list, kept once: type checkers and the import
# graph's tools read them, and public_names reads them to hand each name out.
if TYPE_CHECKING:
    from agentsgym import (
        errors,
        runtime,
    )
    from agentsgym.agents import (
        Agent,
        FunctionAgent,
        ScriptedAgent,
        call_agent,
    )
    from agentsgym.config import (
        MAX_STEPS_PER_EPISODE,
        EnvConfig,
    )
    from agentsgym.env import (
        MultistepEnv,
    )
    from agentsgym.factory import (
        DEFAULT_TOKENIZER,
        load_tokenizer,
        make,
    )
    from agentsgym.hookspecs import (
        RegisterAgent,
        RegisterEnv,
        hookimpl,
    )
    from agentsgym.randomness import (
        episode_numpy_rng,
        episode_random,
        global_random,
        task_seed,
    )
    from agentsgym.registry import (
        make_agent,
    )
    from agentsgym.testing import (
        check_env,
    )
    from agentsgym.trajectory import (
        Episode,
        StepRecord,
        TrajectoryBatch,
        TrajectoryGroup,
    )
    from agentsgym.types import (
        TOOL_ERROR_PREFIX,
        TRUNCATED_KEY,
        AgentAction,
        EpisodeContext,
        Message,
        Messages,
        RewardTerm,
        Role,
        StepResult,
    )
