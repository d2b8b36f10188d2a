"""agentsgym-judge's own error: an env author's judge that cannot work as written.

A judge that fails at run time (its server, its reply) raises the core's
:class:`~agentsgym.errors.RewardUnavailableError` instead: that is not a bug to fix in
the env, and the episode is recorded as unscored.
"""

from __future__ import annotations

from agentsgym.errors import AgentsGymError


class JudgeTemplateError(AgentsGymError, ValueError):
    """A judge's prompt template cannot be read, or a judgement lacks one of its fields."""
