"""The local executor: every trial on this process's event loop (the default)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentsgym.engine import arun_jobs

if TYPE_CHECKING:
    from agentsgym.engine import EpisodeCallback, TrialCallback
    from agentsgym.executors.protocol import ExecutionRequest, Results


class LocalExecutor:
    """Plays trials as asyncio tasks in this process, up to ``max_concurrency`` at once."""

    remote = False

    async def arun(
        self,
        request: ExecutionRequest,
        *,
        on_episode: EpisodeCallback | None = None,
        on_trial: TrialCallback | None = None,
    ) -> Results:
        default, per_env = request.built_agents()
        jobs = [
            request.job(i, r, per_env.get(request.rows[i].env_class_path, default))
            for i, r in request.keys
        ]
        return await arun_jobs(
            jobs,
            None,
            max_concurrency=request.max_concurrency,
            seed=request.seed,
            on_episode=on_episode,
            on_trial=on_trial,
        )
