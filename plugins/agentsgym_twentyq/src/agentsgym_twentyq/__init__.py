"""agentsgym-twentyq: TextArena's TwentyQuestions as an agentsgym environment.

Registers ``twentyq/TwentyQuestions-v0`` and ``twentyq/TwentyQuestions-v0-hardcore``
and the agent ``twentyq/reference-questioner`` through the ``agentsgym`` entry-point
group. Importing this package loads neither textarena nor the env.
"""

from __future__ import annotations

__version__ = "0.1.0"
