"""agentsgym-atropos: agentsgym envs as environments of Atropos's API server.

:class:`AtroposProducer` plays groups of an env's tasks and pushes them as scored
groups to an Atropos trainer through its API server; ``agentsgym atropos ENV_ID``
runs it. See :mod:`agentsgym_atropos.scored_data` for the field mapping,
:mod:`agentsgym_atropos.api_client` for outages, and docs/scaling.md.
"""

from agentsgym_atropos.api_client import AtroposError, AtroposOutageError
from agentsgym_atropos.producer import AtroposProducer
from agentsgym_atropos.stats import ProducerStats

__all__ = ["AtroposError", "AtroposOutageError", "AtroposProducer", "ProducerStats"]
