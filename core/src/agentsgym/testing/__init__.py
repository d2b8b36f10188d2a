"""The testing kit for env and plugin authors: :func:`check_env` (the contract test an
env package runs in its CI; an env class adds or replaces checks through
:class:`EnvCheckContext`), :func:`register_env`, :func:`slow_agent` and :func:`run_cli`.
The pytest plugin (:mod:`agentsgym.pytest_plugin`, loaded automatically) offers the
first two as fixtures.
"""

from agentsgym.testing.agents import AsyncSlowAgent, SlowAgent, slow_agent
from agentsgym.testing.check import check_env
from agentsgym.testing.check_context import EnvCheckContext, EnvChecks
from agentsgym.testing.check_report import (
    CheckFailed,
    CheckReport,
    CheckResult,
    CheckSkipped,
    EnvCheckError,
    require,
)
from agentsgym.testing.check_tokens import check_padded_rows
from agentsgym.testing.cli import CliResult, run_cli
from agentsgym.testing.registration import register_env

__all__ = [
    "AsyncSlowAgent",
    "CheckFailed",
    "CheckReport",
    "CheckResult",
    "CheckSkipped",
    "CliResult",
    "EnvCheckContext",
    "EnvCheckError",
    "EnvChecks",
    "SlowAgent",
    "check_env",
    "check_padded_rows",
    "register_env",
    "require",
    "run_cli",
    "slow_agent",
]
