"""The views show why a judged step scored what it did: a judge model's judgement
(``info["judge"]``: prompt, reply, score) drawn whole under its step, and an episode
whose reward could not be computed (``RewardUnavailableError``) marked as such."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from agentsgym.cli import build_app
from agentsgym.output import write_records
from agentsgym_viewer import load_trajectories
from agentsgym_viewer.html import episode_data
from agentsgym_viewer.model import ViewedJudgement

pytestmark = pytest.mark.timeout(120)

PROMPT = "Question:\nWhat is 7 + 5?\n\nResponse:\ntwelve\n\nIs the response correct? yes or no"
JUDGEMENT = {"score": 1.0, "prompt": PROMPT, "reply": "yes", "model": "judge-m", "reused": True}


def record(index: int, *, infos: list[dict[str, Any]], error: str | None = None) -> dict[str, Any]:
    """A rollout row of a one-step judged episode, as ``agentsgym rollout`` writes it."""
    return {
        "session_id": f"s-{index}",
        "env_id": "judge/OpenAnswer-v0",
        "task_index": index,
        "rollout_index": 0,
        "episode_index": 0,
        "task_data": {"question": "What is 7 + 5?", "reference": "12"},
        "final_reward": 1.0 if error is None else 0.0,
        "num_turns": len(infos),
        "truncated": False,
        "free_shot": False,
        "error": error,
        "metrics": {},
        "messages": [
            {"role": "user", "content": "What is 7 + 5?\nAnswer briefly."},
            {"role": "assistant", "content": "twelve"},
        ],
        "step_infos": infos,
        "step_rewards": [1.0] * len(infos),
    }


UNSCORED = (
    "RewardUnavailableError: the judge's reply holds no score for yes_no (the reply says "
    "neither yes nor no): 'Hard to say.'"
)


def view(*args: str) -> str:
    result = CliRunner().invoke(build_app(), ["view", *args], env={"COLUMNS": "200"})
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


@pytest.fixture
def judged(tmp_path: Path) -> Path:
    rows = [
        record(0, infos=[{"judge": JUDGEMENT, "correct": True}]),
        record(1, infos=[], error=UNSCORED),
        record(2, infos=[{"judge": [JUDGEMENT, {"reply": "no", "score": 0}]}]),
    ]
    return write_records(rows, tmp_path / "judged.jsonl")


def test_a_judgement_is_read_from_the_step_info(judged: Path) -> None:
    first, failed, second = load_trajectories(judged).episodes
    (step,) = first.steps()
    assert step.judgements == [ViewedJudgement(PROMPT, "yes", 1.0, "judge-m", True)]
    assert step.other_info == {"correct": True}
    assert [j.reply for j in second.steps()[0].judgements] == ["yes", "no"]
    assert second.steps()[0].judgements[1] == ViewedJudgement(None, "no", 0.0, None, False)
    assert failed.unscored and failed.failed and not first.unscored


def test_a_judgement_of_an_odd_shape_is_shown_not_dropped() -> None:
    assert ViewedJudgement.from_value("yes") == ViewedJudgement(None, "yes", None, None, False)
    odd = ViewedJudgement.from_value({"score": True, "reply": ["y"], "prompt": None})
    assert odd == ViewedJudgement(None, '["y"]', None, None, False)


def test_the_terminal_draws_the_judgement_whole(judged: Path) -> None:
    output = view(str(judged), "--episode", "0", "--no-tokens")
    assert "judge  score +1  model judge-m" in output
    assert "(the answer of an earlier request with the same prompt)" in output
    assert "Is the response correct? yes or no" in output  # the prompt, past 160 characters
    assert "reply  yes" in output
    assert 'info {"correct": true}' in output  # the judgement is not repeated in the info


def test_an_unscored_episode_says_so(judged: Path) -> None:
    output = view(str(judged), "--episode", "1", "--no-tokens")
    assert "failed, no reward" in output and "'Hard to say.'" in output
    assert "failed, no reward" in view(str(judged), "--list")


def test_the_page_embeds_the_judgements(judged: Path) -> None:
    first, failed, _ = load_trajectories(judged).episodes
    step = episode_data(first)["steps"][0]
    assert step[2] == {"correct": True}
    assert step[3] == [[1.0, "judge-m", True, PROMPT, "yes"]]
    assert episode_data(failed)["unscored"] is True and episode_data(first)["unscored"] is False
