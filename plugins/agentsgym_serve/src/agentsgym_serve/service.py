"""The server's operations, for both protocols: ordering, retries, episode ends.

Every call on a session runs under that session's lock, so calls on one session are
serialised and never interleaved. The agentsgym/v1 calls carry counters (the
episode a reset starts, the index of a step, a create's ``request_id``), which is
what makes them safe to retry over a network that drops replies:

* a call that repeats the last one applied (same episode and step, same action) is
  answered with the reply already given, and applied no second time;
* a call that is neither the next one nor that repeat is refused (409
  ``out_of_order``) and changes nothing;
* every reply names the session, episode and step it answers, so a client can tell
  a reply meant for another call.

AgentGym's calls carry no counters, so they are applied as they come (each still
under the session's lock), as AgentGym's own servers do.

``finish_episode`` runs exactly once per episode: when a v1 client finishes it,
when an AgentGym episode ends (its terms are then added to that last step's reward,
where the runner would put them), or, for an episode left unfinished, when the
session is reset, closed or reaped (with an ``error`` saying so).
"""

from __future__ import annotations

from agentsgym_serve.service_agentgym import AgentGymOperations
from agentsgym_serve.service_v1 import V1Operations

__all__ = ["EnvService"]


class EnvService(AgentGymOperations, V1Operations):
    """What the routes of both protocols call (see the module docstring)."""
