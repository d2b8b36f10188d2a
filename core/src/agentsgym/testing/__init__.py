"""The testing kit for env authors and plugin authors.

* :func:`check_env` (:mod:`.check`): the contract test an env package runs in its own
  CI (``agentsgym check-env ENV_ID`` runs the same checks);
* :func:`register_env` (:mod:`.registration`): an env class registered for a test,
  without installing a package;
* :func:`slow_agent` (:mod:`.agents`): a deterministic agent slowed down so that
  concurrent episodes interleave;
* :func:`run_cli` (:mod:`.cli`): the ``agentsgym`` command line in process, for tests
  of commands;
* :func:`install_plugin` (:mod:`.dists`): a plugin module installed as a distribution
  in a folder, for tests of entry-point discovery.

The pytest plugin (:mod:`agentsgym.pytest_plugin`, loaded automatically) offers the
same as fixtures.
"""

from agentsgym.testing.agents import AsyncSlowAgent, SlowAgent, slow_agent
from agentsgym.testing.check import CheckReport, CheckResult, EnvCheckError, check_env
from agentsgym.testing.cli import CliResult, run_cli
from agentsgym.testing.dists import install_plugin
from agentsgym.testing.registration import register_env

__all__ = [
    "AsyncSlowAgent",
    "CheckReport",
    "CheckResult",
    "CliResult",
    "EnvCheckError",
    "SlowAgent",
    "check_env",
    "install_plugin",
    "register_env",
    "run_cli",
    "slow_agent",
]
