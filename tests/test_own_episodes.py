"""An env that plays its own episodes (aplay_own_episode): the engine hands it the agent
and keeps the Episode it returns, with the trial's indices (a harness env's seam)."""

from __future__ import annotations

from typing import Any

from agentsgym import Episode, EpisodeContext, MultistepEnv, ScriptedAgent


class OwnEpisodes(MultistepEnv):
    """Plays no turn through its hooks: each episode is made whole by the env."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[dict[str, Any], Any, EpisodeContext]] = []

    async def aplay_own_episode(
        self, task_data: dict[str, Any], agent: Any, context: EpisodeContext
    ) -> Episode:
        self.seen.append((task_data, agent, context))
        episode = Episode(session_id=context.session_id, env_id=self.env_id, task_data=task_data)
        episode.final_reward = float(task_data["score"])
        return episode


def test_the_engine_keeps_the_episodes_an_env_plays_itself() -> None:
    env = OwnEpisodes()
    agent = ScriptedAgent(["unused"])
    batch = env.run_trial([{"score": 1}, {"score": 0}], agent, num_rollouts=2)
    scores = [[e.final_reward for trial in g.trials for e in trial] for g in batch.groups]
    assert scores == [[1.0, 1.0], [0.0, 0.0]]
    assert {id(a) for _, a, _ in env.seen} == {id(agent)}
    indices = sorted((c.task_index, c.rollout_index) for _, _, c in env.seen)
    assert indices == [(0, 0), (0, 1), (1, 0), (1, 1)]
    trials = [e for g in batch.groups for trial in g.trials for e in trial]
    assert sorted((e.task_index, e.rollout_index) for e in trials) == indices
