"""``view --wrong``, ``--failed`` on eval files, ``--episode N --search TEXT``, and the
secrets a file or its run record may hold, in the terminal (the page: test_viewer_html).

The eval file is written by ``agentsgym eval`` (agentsgym-eval), so it comes with its
summary and run record: GuessTheNumber on [1, 4] with one guess, which bisection
(always 2 first) gets right for tasks 0 and 1 and wrong for task 2, and no failure.
"""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest
from rich.console import Console

from agentsgym.redaction import REDACTED
from agentsgym.testing import CliResult, run_cli
from agentsgym_viewer import EpisodeFilter, Pager, RunRecord, ViewedEpisode, load_trajectories
from agentsgym_viewer.terminal import MATCH_CLOSE, MATCH_OPEN
from viewer_episodes import GUESS, PlayedFiles, listed, play, write

pytestmark = pytest.mark.timeout(120)

EVAL_ARGS = (
    "-k",
    "2",
    "--num-tasks",
    "3",
    "--env-config",
    "max_steps_per_episode=1",
    "--env-config",
    "high=4",
)
WRONG_IN_ROLLOUTS = [1, 2, 5]  # truncated with correct: false; failed; failed
WRONG_IN_EVAL = [4, 5]  # task 2, both rollouts
PLANTED = [f"sk-view-{n}" for n in range(6)]


@pytest.fixture(scope="module")
def played() -> PlayedFiles:
    return play()


@pytest.fixture(scope="module")
def rollouts(played: PlayedFiles, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write(played.records, tmp_path_factory.mktemp("rollouts") / "rollouts.jsonl")


@pytest.fixture(scope="module")
def eval_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("agentsgym_eval", reason="agentsgym-eval writes eval files")
    out = tmp_path_factory.mktemp("eval") / "results.parquet"  # rows sorted by task
    result = run_cli("eval", GUESS, *EVAL_ARGS, "--out", str(out))
    assert result.code == 0, result.output
    return out


def plain(text: str) -> str:
    """Text out of rich's boxes, with its line breaks and padding as single spaces."""
    return " ".join(text.replace("\u2502", " ").split())


def view(*args: str, code: int = 0) -> CliResult:
    result = run_cli("view", *args)
    assert result.code == code, result.output
    return result


# ---------------------------------------------------------------------- --wrong, --failed
def test_wrong_selects_the_answers_judged_wrong(rollouts: Path, eval_file: Path) -> None:
    assert listed(view(str(eval_file), "--list", "--wrong").stdout) == WRONG_IN_EVAL
    assert listed(view(str(rollouts), "--list", "--wrong").stdout) == WRONG_IN_ROLLOUTS
    assert listed(view(str(rollouts), "--list", "--wrong", "--failed").stdout) == [2, 5]
    printed = view(str(eval_file), "--wrong").stdout
    assert "#4  " in printed and "#5  " in printed and "#0  " not in printed
    # the eval file's wrong answers are exactly the ones its accuracy counts as not correct
    summary = json.loads(eval_file.with_name("results.summary.json").read_text())
    assert len(WRONG_IN_EVAL) == round((1 - summary["accuracy"]) * summary["num_samples"])


def test_failed_on_an_eval_file_without_failures_points_to_wrong(eval_file: Path) -> None:
    result = view(str(eval_file), "--failed", code=1)
    assert "no episode of results.parquet (6 episodes) matches these filters" in result.stderr
    assert "none failed (ended with an error), but 2 have answers judged wrong" in result.stderr
    assert "--wrong shows them" in result.stderr
    result = view(str(eval_file), "--list", "--failed", "--min-reward", "1", code=1)
    assert "--wrong" not in result.stderr  # the wrong ones have reward 0: no false hint


def test_help_says_what_failed_and_wrong_count() -> None:
    text = plain(run_cli("view", "--help").stdout)
    assert "a wrong answer is not a failure: see --wrong" in text
    assert "--wrong judges an answer as `agentsgym eval` scores it" in text
    assert "the row has correct=false (failed and ungraded samples too" in text
    assert "none reports it and its final reward is not above 0" in text


def episode(**fields: object) -> ViewedEpisode:
    return ViewedEpisode(index=0, **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("fields", "wrong"),
    [
        ({"kind": "eval", "correct": True, "final_reward": 0.0}, False),
        ({"kind": "eval", "correct": False, "final_reward": 1.0}, True),
        ({"kind": "eval", "correct": False, "error": "ValueError: x"}, True),
        ({"kind": "rollout", "final_reward": 1.0, "error": "ValueError: x"}, True),
        ({"kind": "rollout", "final_reward": 0.0, "step_infos": [{"correct": True}]}, False),
        ({"kind": "rollout", "final_reward": 1.0, "step_infos": [{"correct": False}]}, True),
        ({"kind": "rollout", "final_reward": 1.0, "step_infos": [{"correct": "yes"}]}, True),
        ({"kind": "rollout", "final_reward": 0.5, "step_infos": [{}]}, False),
        ({"kind": "rollout", "final_reward": 0.0}, True),
        ({"kind": "rollout", "final_reward": -1.0}, True),
    ],
)
def test_the_wrong_rule(fields: dict[str, object], wrong: bool) -> None:
    assert episode(**fields).wrong is wrong
    assert EpisodeFilter(wrong=True).matches(episode(**fields)) is wrong


# ---------------------------------------------------------------------- --episode with --search
def test_episode_with_search_highlights_and_counts_its_matches(rollouts: Path) -> None:
    # #1: "I am thinking of an integer ..." once, then "25 is wrong; the number is lower."
    output = view(str(rollouts), "--episode", "1", "--search", "LOWER", "--no-tokens").stdout
    assert "search 'LOWER': 2 matches in this episode" in output
    assert f"the number is {MATCH_OPEN}lower{MATCH_CLOSE}." in output
    output = view(str(rollouts), "--episode", "1", "--search", "exploded", "--no-tokens").stdout
    assert "search 'exploded': no match in this episode" in output
    assert "#1  " in output and MATCH_OPEN not in output  # still #1, nothing marked
    loaded = load_trajectories(rollouts)
    assert loaded.episodes[1].search_matches("LOWER") == 2
    assert loaded.episodes[1].search_matches("exploded") == 0


def test_search_highlights_every_episode_shown(rollouts: Path) -> None:
    output = view(str(rollouts), "--search", "EXPLODED", "--no-tokens").stdout
    assert "search 'EXPLODED': 1 match in this episode" in output
    assert f"RuntimeError: the env {MATCH_OPEN}exploded{MATCH_CLOSE}" in output


def test_an_episode_outside_the_filters_is_shown_with_a_note(rollouts: Path) -> None:
    result = view(str(rollouts), "--episode", "0", "--failed", "--no-tokens")
    assert "#0  " in result.stdout
    assert "episode #0 does not pass the filters given; it is shown because --episode names it" in (
        result.stderr
    )
    assert "does not pass" not in view(str(rollouts), "--episode", "2", "--failed").stderr


def test_list_with_episode_is_a_usage_error(rollouts: Path) -> None:
    result = view(str(rollouts), "--list", "--episode", "1", code=2)
    assert "--list lists the selected episodes and --episode shows one" in plain(result.output)


def test_the_pager_highlights_the_search(rollouts: Path) -> None:
    loaded = load_trajectories(rollouts)
    commands = iter(["n", "q"])
    out = io.StringIO()
    pager = Pager(
        loaded.episodes[1:3],
        Console(file=out, width=120),
        read=lambda _: next(commands),
        clear=False,
        search="lower",
    )
    pager.run()
    text = out.getvalue()
    assert "search 'lower': 2 matches in this episode" in text
    assert "search 'lower': no match in this episode" in text  # #2 failed before a prompt
    assert f"{MATCH_OPEN}lower{MATCH_CLOSE}" in text


# ---------------------------------------------------------------------- secrets
def test_a_run_record_is_shown_redacted(eval_file: Path, tmp_path: Path) -> None:
    """A record written before agentsgym redacted nested options, or edited by hand."""
    copy = tmp_path / eval_file.name
    for source in (eval_file, eval_file.with_name("results.summary.json")):
        shutil.copy(source, tmp_path / source.name)
    record = json.loads(Path(f"{eval_file}.run.json").read_text())
    nested = {"deep": [{"api_key": PLANTED[0]}]}
    record["arguments"]["env_config"]["gamemaster_options"] = nested
    record["command_line"] += [
        "--env-config",
        f"gamemaster_options={json.dumps(nested)}",
        "--agent-option",
        f"api_key={PLANTED[1]}",
        "--api-key",
        PLANTED[2],
        "--agent-option",
        f"base_url=http://{PLANTED[3]}@127.0.0.1:9/v1",
    ]
    Path(f"{copy}.run.json").write_text(json.dumps(record))

    run = load_trajectories(copy).run
    assert run is not None and run.env_id == GUESS
    shown = run.describe()
    assert shown.startswith(f"agentsgym eval {GUESS} -k 2") and "(complete: 6 of 6 trials)" in shown
    assert f"api_key={REDACTED}" in shown and f"http://{REDACTED}@127.0.0.1:9/v1" in shown
    page = tmp_path / "page.html"
    outputs = [
        view(str(copy), "--list").output,
        view(str(copy), "--wrong").output,
        view(str(copy), "--html", str(page)).output,
        page.read_text(),
    ]
    assert f"run: agentsgym eval {GUESS}" in outputs[0]
    for text in outputs:
        assert not [secret for secret in PLANTED if secret in text]


def test_a_run_record_that_is_not_one_is_ignored(rollouts: Path, tmp_path: Path) -> None:
    copy = shutil.copy(rollouts, tmp_path / rollouts.name)
    Path(f"{copy}.run.json").write_text("{cut")
    assert load_trajectories(copy).run is None
    Path(f"{copy}.run.json").write_text(json.dumps({"command_line": "not a list"}))
    assert load_trajectories(copy).run is None
    assert RunRecord.from_json([1, 2]) is None


def test_an_error_holding_a_secret_is_shown_redacted(played: PlayedFiles, tmp_path: Path) -> None:
    """A file written before agentsgym kept server URLs out of its errors."""
    records = [dict(r) for r in played.records]
    records[2]["error"] = (
        f"AgentError: cannot reach http://{PLANTED[4]}@127.0.0.1:9/v1 with api_key={PLANTED[5]}"
    )
    path = write(records, tmp_path / "old.jsonl")
    assert load_trajectories(path).episodes[2].error == (
        f"AgentError: cannot reach http://{REDACTED}@127.0.0.1:9/v1 with api_key={REDACTED}"
    )
    page = tmp_path / "old.html"
    outputs = [
        view(str(path), "--episode", "2").output,
        view(str(path), "--failed", "--no-tokens").output,
        view(str(path), "--html", str(page)).output,
        page.read_text(),
    ]
    assert "cannot reach http://" in outputs[0]
    for text in outputs:
        assert not [secret for secret in PLANTED if secret in text]
