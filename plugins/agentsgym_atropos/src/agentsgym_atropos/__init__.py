"""agentsgym-atropos: agentsgym envs as environments of Atropos's API server.

:class:`AtroposProducer` plays groups of an env's tasks and pushes them as scored
groups to an Atropos trainer through its API server; ``agentsgym atropos ENV_ID``
runs it. See :mod:`agentsgym_atropos.producer` for the field mapping and
docs/scaling.md.
"""

from agentsgym_atropos.producer import (
    AtroposError,
    AtroposOutageError,
    AtroposProducer,
    ProducerStats,
)

__all__ = ["AtroposError", "AtroposOutageError", "AtroposProducer", "ProducerStats"]
