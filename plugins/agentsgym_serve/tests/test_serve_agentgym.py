"""Third-party servers of AgentGym's protocol: AgentGymEnv drives a minimal server
written only to that protocol (tests/agentgym_style_server.py, no agentsgym code),
and the AgentGym endpoints of agentsgym's own server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

import agentsgym
from agentgym_style_server import build_app
from agentsgym_classical import BisectAgent
from agentsgym_serve import AgentGymEnv, BackgroundServer
from serve_helpers import GUESS, TINY, served

pytestmark = pytest.mark.timeout(120)
INSTRUCTIONS = [
    {"role": "user", "content": "You play a guessing game. Answer with Action: [n]."},
    {"role": "assistant", "content": "OK. I'll follow your instructions."},
]


@pytest.fixture(scope="module")
def third_party() -> Iterator[Any]:
    app = build_app()
    with BackgroundServer(app) as server:
        server.wrapper = app.state.wrapper
        yield server


def comparable(batch: Any) -> list[str]:
    """Episodes without what names the env or the task (they differ by design)."""
    out = []
    for group in batch.groups:
        for episode in group.episodes:
            record = episode.to_record()
            for key in ("session_id", "env_id", "task_data", "step_infos"):
                record.pop(key)
            out.append(json.dumps(record, sort_keys=True))
    return out


def test_a_third_party_agentgym_server_plays_like_the_local_env(third_party: Any) -> None:
    env = agentsgym.make(third_party.url, tokenizer=TINY, env_config={"dataset_size": 40})
    assert isinstance(env, AgentGymEnv) and env.env_id == f"agentgym+{third_party.url}"
    rows = env.get_train_dataset().select(range(12))
    assert rows[5]["task_data"] == {"data_idx": 5}
    remote = env.run_trial([r["task_data"] for r in rows], BisectAgent(), 2)
    local = agentsgym.make(GUESS, tokenizer=TINY).run_trial(
        [{"seed": 2 * i} for i in range(12)], BisectAgent(), 2
    )
    assert all(e.ok for g in remote.groups for e in g.episodes)
    assert comparable(remote) == comparable(local)  # token ids, masks, rewards, messages
    wrapper = third_party.wrapper
    assert wrapper.env == {} and len(wrapper.closed) >= 24  # every instance closed


def test_the_conversation_start_and_system_prompt_come_from_env_config(third_party: Any) -> None:
    config = {
        "system_prompt": "You are careful.",
        "conversation_start": INSTRUCTIONS,
        "action_regex": r"Action:\s*(\[\d+\])",
    }
    env = agentsgym.make(f"agentgym+{third_party.url}", tokenizer=TINY, env_config=config)

    class ActionAgent:
        def get_action(self, messages: list[dict[str, str]], state: Any) -> tuple[str, Any]:
            guess = BisectAgent().get_action(messages[3:], state)[0].split()[-1].rstrip(".")
            return f"Thought: bisect.\nAction: {guess}", state

    batch = env.run_trial([{"data_idx": 7}], ActionAgent())
    episode = batch.groups[0].episodes[0]
    assert episode.ok and episode.final_reward == 1.0
    agentgym_form = [
        {"from": "human", "loss": None, "value": INSTRUCTIONS[0]["content"]},
        {"from": "gpt", "loss": False, "value": INSTRUCTIONS[1]["content"]},
    ]
    same = AgentGymEnv(third_party.url, env_config={**config, "conversation_start": agentgym_form})
    assert same.config.conversation_start == env.config.conversation_start
    assert episode.messages[:3] == [
        {"role": "system", "content": "You are careful."},
        *INSTRUCTIONS,
    ]
    assert episode.messages[3]["content"].startswith("I am thinking of an integer")
    assert episode.steps[0].info["action_sent"] == "[50]"
    mask = episode.agent_token_mask
    assert sum(mask) == episode.num_agent_tokens  # the canned "OK" turn is not the agent's


def test_a_cumulative_score_becomes_step_rewards() -> None:
    app = build_app(score=True)
    with BackgroundServer(app) as server:
        env = agentsgym.make(
            f"agentgym+{server.url}",
            env_config={"reward_field": "score", "reward_mode": "cumulative"},
        )
        batch = env.run_trial([{"data_idx": 1}, {"data_idx": 2}], BisectAgent())
        missing = agentsgym.make(f"agentgym+{server.url}")  # looks for "reward"
        failed = missing.run_trial([{"data_idx": 1}], BisectAgent()).groups[0].failed
    assert batch.final_rewards == [1.0, 1.0]
    assert [s.reward for s in batch.groups[0].episodes[0].steps][-1] == 1.0
    assert failed and "without a 'reward' field" in failed[0].error


def test_errors_a_server_answers_as_200_fail_the_episode(third_party: Any) -> None:
    env = agentsgym.make(f"agentgym+{third_party.url}")
    batch = env.run_trial([{"data_idx": "seven"}, {"data_idx": 3}], BisectAgent())
    [bad] = batch.groups[0].failed
    assert "task index (an integer >= 0)" in bad.error
    assert batch.groups[1].episodes[0].final_reward == 1.0
    with httpx.Client(base_url=third_party.url) as http:  # what AgentGym servers answer
        assert "error" in http.post("/step", json={"id": 10**6, "action": "x"}).json()


def test_agentsgym_serve_speaks_agentgym_to_agentgym_clients() -> None:
    # The same client, driving agentsgym's own server through AgentGym's protocol:
    # data_idx i of the served train split is the task {"seed": 2 i}.
    with served(GUESS) as server:
        env = agentsgym.make(f"agentgym+{server.url}", tokenizer=TINY)
        remote = env.run_trial([{"data_idx": i} for i in range(6)], BisectAgent())
        assert len(server.service.table) == 0  # every instance closed
    local = agentsgym.make(GUESS, tokenizer=TINY).run_trial(
        [{"seed": 2 * i} for i in range(6)], BisectAgent()
    )
    assert comparable(remote) == comparable(local)
