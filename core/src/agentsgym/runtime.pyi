"""The runtime kit of agentsgym, for those who build servers, trainers and other
producers of episodes: each name once, here (see agentsgym.lazy_api)."""

from agentsgym.agents import (
    AgentCaller as AgentCaller,
)
from agentsgym.engine import (
    EpisodeRecorder as EpisodeRecorder,
)
from agentsgym.engine import (
    EpisodeSession as EpisodeSession,
)
from agentsgym.engine import (
    FinishedEpisode as FinishedEpisode,
)
from agentsgym.engine import (
    HookRuntime as HookRuntime,
)
from agentsgym.engine import (
    Players as Players,
)
from agentsgym.engine import (
    RoleView as RoleView,
)
from agentsgym.engine import (
    TurnOutcome as TurnOutcome,
)
from agentsgym.engine import (
    play_turn as play_turn,
)
from agentsgym.engine import (
    play_until as play_until,
)
from agentsgym.loop_pools import (
    PerLoop as PerLoop,
)
from agentsgym.worker_pool import (
    WorkerPool as WorkerPool,
)
