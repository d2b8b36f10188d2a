"""The example env, judge/OpenAnswer-v0, played end to end: rewards from the judge, its
record in the step info, and judge failures counted as such (never scored 0) by the
runner, ``rollout``, ``eval`` and ``view``.

One loopback server plays both parts (``player_and_judge``): the player answers sums
right and differences wrong, the judge is right on numbers but unreadable about products.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

import agentsgym
from agentsgym import StepResult, hookimpl
from agentsgym.errors import is_reward_unavailable
from agentsgym.testing import check_env, run_cli
from agentsgym_judge.open_answer import OpenAnswerEnv, exact_match
from judge_fixtures import JUDGE_MODEL, judge_settings

ENV = "judge/OpenAnswer-v0"
NUM_TASKS = 12


def env_config(server: Any, **judge: Any) -> dict[str, Any]:
    return {"judge": judge_settings(server, **judge), "num_tasks": NUM_TASKS}


def expected(env: OpenAnswerEnv) -> dict[str, list[str]]:
    """The eval questions by what must become of them: paid 1, paid 0, unscored."""
    tasks = env.questions("eval")
    kinds: dict[str, list[str]] = {"+": [], "-": [], "×": []}
    for task in tasks:
        kinds[task["question"].split()[3]].append(task["id"])
    assert all(kinds.values()), "the seed should draw every operation"
    return kinds


def test_the_judge_scores_and_its_record_is_kept(answering_server: Any) -> None:
    env = agentsgym.make(ENV, env_config=env_config(answering_server))
    agent = agentsgym.make_agent("openai", base_url=answering_server.base_url, model=JUDGE_MODEL)
    tasks = env.get_eval_dataset()["task_data"]
    batch = env.run_trial(tasks, agent, num_rollouts=2)
    kinds = expected(env)

    scored = {e.task_data["id"]: e for e in batch.episodes}
    assert sorted({e.task_data["id"] for e in batch.failed}) == sorted(kinds["×"])
    assert all(is_reward_unavailable(e.error) for e in batch.failed)
    assert all("I cannot tell." in e.error for e in batch.failed)  # why, in the error
    assert sorted(scored) == sorted(kinds["+"] + kinds["-"])
    for task_id, episode in scored.items():
        info = episode.steps[0].info
        paid = 1.0 if task_id in kinds["+"] else 0.0
        assert episode.final_reward == info["judge"]["score"] == paid
        assert info["correct"] is info["exact_match"] is (paid == 1.0)
        assert info["judge"]["reply"] == ("yes" if paid else "no")
        assert episode.task_data["question"] in info["judge"]["prompt"]
        assert info["judge"]["model"] == JUDGE_MODEL
    # A task's two rollouts give the judge the same prompt: the second reuses the
    # first's verdict; a failure is never reused (each failed rollout counts).
    stats = env.judge.stats
    assert (stats.reused, stats.failed) == (len(scored), 2 * len(kinds["×"]))
    env.close()


def test_an_episode_whose_judge_fails_is_never_scored_0(answering_server: Any) -> None:
    answering_server.fail_next(3, 503)
    env = agentsgym.make(ENV, env_config=env_config(answering_server, max_retries=2))
    task = env.questions("eval")[0]
    batch = env.run_trial([task], agentsgym.ScriptedAgent("1"), num_rollouts=1)
    assert not batch.episodes and batch.final_rewards == []
    (failed,) = batch.failed
    assert failed.error.startswith("RewardUnavailableError: the judge failed: ")
    assert "HTTP 503 (3 attempts)" in failed.error
    env.close()


def test_rollout_and_eval_summaries_count_judge_failures(
    answering_server: Any, tmp_path: Path
) -> None:
    env = OpenAnswerEnv(env_config=env_config(answering_server))
    unscored = len(expected(env)["×"])
    common = [
        ENV,
        "--split",
        "eval",
        "--num-tasks",
        str(NUM_TASKS),
        "--num-rollouts",
        "1",
        "--agent",
        "openai",
        "--agent-option",
        f"base_url={answering_server.base_url}",
        "--agent-option",
        f"model={JUDGE_MODEL}",
        "--tokenizer",
        "none",
        "--env-config",
        f"judge={json.dumps(judge_settings(answering_server))}",
        "--env-config",
        f"num_tasks={NUM_TASKS}",
    ]
    out = tmp_path / "answers.jsonl"
    rollout = run_cli("rollout", *common, "--out", str(out))
    assert rollout.code == 0, rollout.output
    assert f"{unscored} of {NUM_TASKS} trials failed" in rollout.output
    assert f"{unscored} of them had no reward (RewardUnavailableError" in rollout.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert sum(is_reward_unavailable(row["error"]) for row in rows) == unscored

    results = tmp_path / "eval.jsonl"
    evaluated = run_cli("eval", *common, "--out", str(results))
    assert evaluated.code == 0, evaluated.output
    assert re.search(
        rf"of them without a reward \(a judge failed\)\s*│\s*{unscored}", evaluated.output
    )
    summary = json.loads(results.with_name("eval.summary.json").read_text())
    assert summary["num_reward_unavailable"] == unscored == summary["num_failed"]


def test_the_viewer_shows_the_judgement_and_the_failure(
    answering_server: Any, tmp_path: Path
) -> None:
    pytest.importorskip("agentsgym_viewer")
    env = agentsgym.make(ENV, env_config=env_config(answering_server))
    kinds = expected(env)
    tasks = [t for t in env.questions("eval") if t["id"] in (kinds["-"][0], kinds["×"][0])]
    batch = env.run_trial(tasks, agentsgym.ScriptedAgent("forty-two"), num_rollouts=1)
    out = tmp_path / "viewed.jsonl"
    out.write_text("".join(json.dumps(r) + "\n" for r in batch.to_records()))

    shown = run_cli("view", str(out), "--no-tokens", "--no-interactive")
    assert shown.code == 0, shown.output
    assert "judge  score +0  model judge-model" in shown.output
    assert re.search(r"reply\s+no\b", shown.output)
    assert "Is the response correct?" in shown.output  # the prompt
    assert "failed, no reward" in shown.output and "I cannot tell." in shown.output

    page = tmp_path / "viewed.html"
    html = run_cli("view", str(out), "--html", str(page))
    assert html.code == 0, html.output
    data = page.read_text()
    assert "judgementNode" in data and "failed, no reward" in data
    assert '"unscored":true' in data.replace(" ", "")
    env.close()


def test_rows_of_other_questions_play_the_same_way(answering_server: Any) -> None:
    env = agentsgym.make(ENV, env_config=env_config(answering_server))
    row = {"question": "Name the largest planet.", "reference": "Jupiter"}
    batch = env.run_trial([row], agentsgym.ScriptedAgent("Jupiter, surely"), num_rollouts=1)
    assert batch.final_rewards == [1.0]
    assert batch.episodes[0].steps[0].info["exact_match"] is False  # an exact check is too strict
    bad = env.run_trial([{"question": "no reference"}], agentsgym.ScriptedAgent("x"), 1)
    (failed,) = bad.failed
    assert "string 'question' and 'reference'" in failed.error
    assert not is_reward_unavailable(failed.error)  # a bad row is no judge failure
    env.close()


@pytest.mark.parametrize(
    ("reply", "reference", "match"),
    [
        ("The answer is 12.", "12", True),
        ("12 or 13? 13", "12", False),
        ("-3", "-3", True),
        ("no number", "12", False),
        ("  jupiter! ", "Jupiter", True),
        ("Jupiter, surely", "Jupiter", False),
    ],
)
def test_the_exact_check(reply: str, reference: str, match: bool) -> None:
    assert exact_match(reply, reference) is match


def test_check_env_passes_with_a_judge_server(judge_server: Any) -> None:
    report = check_env(ENV, env_config=env_config(judge_server))
    assert report.passed and not report.skipped, report


class PlainHookJudged(OpenAnswerEnv):
    """The env with a plain step_episode: it judges with score(), from a worker thread."""

    @hookimpl
    def step_episode(self, state: dict[str, str], action: str) -> StepResult:
        verdict = self.judge.score(
            question=state["question"], answer=action, reference=state["reference"]
        )
        return StepResult(state, verdict.score, True, {"judge": verdict.record()})


def test_a_plain_hook_judges_with_score(judge_server: Any) -> None:
    env = PlainHookJudged(env_config=env_config(judge_server, max_concurrency=2))
    tasks = env.questions("eval")
    batch = env.run_trial(tasks, agentsgym.ScriptedAgent("12"), num_rollouts=2)
    assert not batch.failed and len(batch.episodes) == 2 * NUM_TASKS
    for episode in batch.episodes:  # the scripted judge: yes when "12" holds the reference
        paid = 1.0 if episode.task_data["reference"] in "12" else 0.0
        assert episode.final_reward == episode.steps[0].info["judge"]["score"] == paid
    env.close()
