"""A gamemaster that cannot answer fails the episode; it never plays on with a made-up
"I don't know" whose reward would be wrong training data (issue 21.7).

No server runs here: the model gamemaster points at a port nothing listens on, which
refuses the connection at once (no timing involved).
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest

import agentsgym
from agentsgym import FunctionAgent
from agentsgym_twentyq.env import TwentyQuestionsEnv
from agentsgym_twentyq.gamemaster import GamemasterReply
from agentsgym_twentyq.questioner import ReferenceQuestioner
from twentyq_testutil import BASIC

TASK = {"solution": "apple", "seed": 0}


def _raise(messages: Any, state: Any) -> Any:
    raise ConnectionError("server down")


@pytest.mark.parametrize(
    ("agent", "cause"),
    [
        (FunctionAgent(_raise), "ConnectionError: server down"),
        (FunctionAgent(lambda m, s: (42, s)), "AgentError"),  # not a reply at all
        (FunctionAgent(lambda m, s: "Yes"), "AgentError"),  # breaks the agent protocol
    ],
)
def test_a_gamemaster_agent_that_raises_fails_the_episode(agent: Any, cause: str) -> None:
    env = TwentyQuestionsEnv(gamemaster=agent)
    batch = env.run_trial([TASK], ReferenceQuestioner(), 1)
    (failed,) = batch.failed
    assert failed.error is not None and failed.error.startswith("GamemasterError: ")
    assert cause in failed.error and "could not answer" in failed.error
    assert not batch.episodes  # nothing of it reaches the training rows


class Broken:
    """A third-party gamemaster object (not an agent) that breaks the protocol."""

    name = "broken"

    def __init__(self, result: Any) -> None:
        self.result = result

    def answer(self, question: str, secret: Any, history: Any) -> GamemasterReply:
        if isinstance(self.result, Exception):
            raise self.result
        return self.result  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("result", "says"),
    [
        (RuntimeError("quota exceeded"), "raised RuntimeError: quota exceeded"),
        (GamemasterReply("Maybe"), "not a GamemasterReply holding one of"),
        ("Yes", "not a GamemasterReply holding one of"),
    ],
)
def test_a_gamemaster_object_that_cannot_answer_fails_the_episode(result: Any, says: str) -> None:
    env = TwentyQuestionsEnv(gamemaster=Broken(result))
    (failed,) = env.run_trial([TASK], ReferenceQuestioner(), 1).failed
    assert failed.error is not None and failed.error.startswith("GamemasterError: ")
    assert "'broken'" in failed.error and says in failed.error


# ---------------------------------------------------------------------- an unreachable server
@pytest.fixture
def dead_url() -> str:
    """The URL of a port that nothing listens on: a connection is refused at once."""
    pytest.importorskip("agentsgym.agents.openai_agent", reason="needs the core's openai agent")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def dead_gamemaster(url: str) -> dict[str, Any]:
    options = {"base_url": url, "model": "gm", "max_retries": 0, "timeout": 30}
    return {"gamemaster": "openai", "gamemaster_options": options}


def test_an_unreachable_model_gamemaster_fails_the_episode(dead_url: str) -> None:
    env = agentsgym.make(BASIC, env_config=dead_gamemaster(dead_url))
    try:
        batch = env.run_trial([TASK, {"solution": "library", "seed": 1}], ReferenceQuestioner(), 2)
    finally:
        env.gamemaster.agent.close()  # the gamemaster's HTTP session
    assert len(batch.failed) == 4 and not batch.episodes
    error = batch.failed[0].error or ""
    assert error.startswith("GamemasterError: gamemaster 'openai' could not answer")
    assert "cannot reach an OpenAI-compatible server" in error  # the agent's own reason
    assert f"base_url='{dead_url}'" in error  # what to check


def write_rows(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_the_cli_counts_trials_of_an_unreachable_gamemaster_as_failed(
    dead_url: str, tmp_path: Path
) -> None:
    from agentsgym.testing import run_cli

    # three tasks against the offline rules gamemaster, one against a dead server
    rules = [
        {"env_class_path": BASIC, "env_config": {}, "task_data": {"solution": w, "seed": 0}}
        for w in ("apple", "library", "yo-yo")
    ]
    dead_task = {"solution": "zoo", "seed": 0}
    dead = {
        "env_class_path": BASIC,
        "env_config": dead_gamemaster(dead_url),
        "task_data": dead_task,
    }
    rows = write_rows(tmp_path / "rows.jsonl", [*rules, dead])
    common = ("rollout", "--dataset", str(rows), "--num-rollouts", "1", "--tokenizer", "none")

    strict = run_cli(*common, "--out", str(tmp_path / "strict.jsonl"), "--max-failure-rate", "0.1")
    assert strict.code == 1, strict.output
    assert "1 of 4 trials failed (25.0%), above --max-failure-rate 0.1" in strict.output
    assert "GamemasterError: gamemaster 'openai' could not answer" in strict.output

    lenient = run_cli(*common, "--out", str(tmp_path / "ok.jsonl"), "--max-failure-rate", "0.5")
    assert lenient.code == 0, lenient.output
    assert "1 of 4 trials failed" in lenient.output
    written = [json.loads(line) for line in (tmp_path / "ok.jsonl").read_text().splitlines()]
    failed = [row for row in written if row["error"] is not None]
    assert [row["task_data"]["solution"] for row in failed] == ["zoo"]
    assert failed[0]["error"].startswith("GamemasterError: ")
    # the trials against the rules gamemaster are played as ever
    assert sorted(r["final_reward"] for r in written if r["error"] is None) == [1.0, 1.0, 1.0]


def test_a_rollout_against_an_unreachable_gamemaster_exits_non_zero(
    dead_url: str, tmp_path: Path
) -> None:
    from agentsgym.testing import run_cli

    options = dead_gamemaster(dead_url)["gamemaster_options"]
    result = run_cli(
        "rollout",
        BASIC,
        "--num-tasks",
        "2",
        "--num-rollouts",
        "2",
        "--tokenizer",
        "none",
        "--env-config",
        "gamemaster=openai",
        "--env-config",
        f"gamemaster_options={json.dumps(options)}",
        "--out",
        str(tmp_path / "tq.jsonl"),
    )
    assert result.code == 1, result.output
    assert "every trial failed (4 of 4)" in result.output
    assert (
        "GamemasterError: gamemaster 'openai' could not answer (check env_config "
        f"gamemaster_options base_url='{dead_url}', model='gm': is the server up there?)"
    ) in result.output
