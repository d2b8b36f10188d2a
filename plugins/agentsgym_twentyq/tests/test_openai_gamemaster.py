"""The gamemaster behind an OpenAI-compatible server (the core's loopback test server).

Skipped when the core's ``openai`` agent, its test server or their extras (openai,
fastapi, uvicorn) are not installed. An unreachable server is tested in
``test_gamemaster_failures.py``, which needs no server.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import agentsgym

pytest.importorskip("openai")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("agentsgym.agents.openai_agent")
testing_server = pytest.importorskip("agentsgym_serve.model_server")

from agentsgym_twentyq.gamemaster import RulesGamemaster  # noqa: E402
from agentsgym_twentyq.questioner import ReferenceQuestioner  # noqa: E402
from agentsgym_twentyq.words import Secret  # noqa: E402
from twentyq_testutil import BASIC  # noqa: E402

MODEL = "gm-model"


def model_reply(messages: list[dict[str, str]]) -> str:
    """A gamemaster 'model' that is right, but chatty the way models are."""
    word = messages[0]["content"].split("target word: ")[1].split("\n")[0]
    question = messages[-1]["content"].split("Q: ")[-1].split("\nOptions")[0]
    answer = RulesGamemaster().answer(question, Secret(word, None), []).answer
    return f"{answer}." if answer != "I don't know" else "Hmm, I don't know."


@pytest.fixture(scope="module")
def server() -> Any:
    policy = testing_server.ScriptedPolicy(model_reply)
    with testing_server.OpenAICompatServer(policy, models=[MODEL]) as running:
        yield running


def options(server: Any, **extra: Any) -> dict[str, Any]:
    return {"base_url": server.base_url, "model": MODEL, "max_retries": 0, "timeout": 10, **extra}


def test_questioner_wins_against_a_served_gamemaster(server: Any) -> None:
    env = agentsgym.make(
        BASIC, env_config={"gamemaster": "openai", "gamemaster_options": options(server)}
    )
    batch = env.run_trial(
        [{"solution": w, "seed": 0} for w in ("yo-yo", "library")], ReferenceQuestioner(), 1
    )
    assert not batch.failed
    assert batch.final_rewards == [1.0, 1.0]
    infos = [s.info for e in batch.episodes for s in e.steps if s.info["kind"] == "question"]
    assert infos and not any(i["gamemaster_fallback"] for i in infos)
    sent = server.requests[-1]
    assert sent["model"] == MODEL and "target word:" in sent["messages"][0]["content"]


def test_cli_rollout_with_a_gamemaster_url(server: Any, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from agentsgym.cli import build_app

    out = tmp_path / "tq.jsonl"
    result = CliRunner().invoke(
        build_app(),
        [
            "rollout",
            BASIC,
            "--num-tasks",
            "2",
            "--num-rollouts",
            "1",
            "--tokenizer",
            "none",
            "--env-config",
            "gamemaster=openai",
            "--env-config",
            f"gamemaster_options={json.dumps(options(server))}",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["final_reward"] for r in rows] == [1.0, 1.0]
