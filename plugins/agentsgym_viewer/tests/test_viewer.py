"""``agentsgym view``: loading files, filters, the terminal view and the pager.

The files are real: episodes played by ``env.run_trial`` (see viewer_episodes.py)
and written by ``agentsgym.output.write_records``, as ``agentsgym rollout`` does.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console
from rich.text import Text
from typer.testing import CliRunner

from agentsgym.cli import build_app
from agentsgym.errors import AgentsGymError
from agentsgym.output import write_records
from agentsgym_viewer import (
    EpisodeFilter,
    Pager,
    TrajectoryFileError,
    ViewFilterError,
    load_decoder,
    load_trajectories,
)
from agentsgym_viewer.html import script_json
from agentsgym_viewer.terminal import AGENT_STYLES, ENV_STYLES, token_view
from agentsgym_viewer.tokens import visible
from viewer_episodes import (
    COUNTDOWN,
    GUESS,
    HOSTILE,
    PlayedFiles,
    listed,
    play,
    with_step_columns,
    write,
)

pytestmark = pytest.mark.timeout(120)
runner = CliRunner()


@pytest.fixture(scope="module")
def played() -> PlayedFiles:
    return play()


@pytest.fixture(scope="module")
def files(played: PlayedFiles, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("viewer")
    return {
        "parquet": write(played.records, folder / "rollouts.parquet"),
        "jsonl": write(played.records, folder / "rollouts.jsonl"),
        "steps": write(with_step_columns(played), folder / "with_steps.jsonl"),
    }


def view(*args: str) -> str:
    result = runner.invoke(build_app(), ["view", *args])
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


# ---------------------------------------------------------------------- loading
@pytest.mark.parametrize("kind", ["parquet", "jsonl"])
def test_a_rollout_file_loads_every_row_with_its_fields(
    played: PlayedFiles, files: dict[str, Path], kind: str
) -> None:
    loaded = load_trajectories(files[kind])
    assert loaded.kind == "rollout" and loaded.warnings == []
    assert [e.index for e in loaded.episodes] == list(range(len(played.records)))
    assert loaded.env_ids == sorted([COUNTDOWN, GUESS])
    for viewed, episode in zip(loaded.episodes, played.episodes):
        assert viewed.session_id == episode.session_id
        assert viewed.final_reward == pytest.approx(episode.final_reward)
        assert [m.content for m in viewed.messages] == [m["content"] for m in episode.messages]
        assert viewed.truncated == episode.truncated and viewed.error == episode.error
        assert viewed.task_data == episode.task_data
        if episode.tokenized and episode.segments:
            assert viewed.tokens is not None
            assert viewed.tokens.ids.tolist() == episode.full_token_ids
            assert viewed.tokens.agent_mask.tolist() == episode.agent_token_mask
        else:
            assert viewed.tokens is None
    failed = [e for e in loaded.episodes if e.failed]
    assert len(failed) == 2 and failed[0].messages == []  # failed before its first prompt


def test_each_assistant_turn_gets_the_reward_its_tokens_carry(
    played: PlayedFiles, files: dict[str, Path]
) -> None:
    loaded = load_trajectories(files["parquet"])
    for viewed, episode in zip(loaded.episodes, played.episodes):
        if not episode.ok:
            continue
        spans = viewed.turn_token_spans()
        assert spans is not None
        assert [e - s for s, e in spans] == [step.num_agent_tokens for step in episode.steps]
        # the default "spread" strategy puts each step reward on that step's tokens
        assert viewed.turn_token_rewards() == pytest.approx([s.reward for s in episode.steps])


def test_an_eval_file_takes_its_env_from_the_summary(tmp_path: Path) -> None:
    import agentsgym
    from agentsgym_classical import BisectAgent

    # eval files are written by agentsgym-eval
    evaluate = pytest.importorskip(
        "agentsgym_eval", reason="agentsgym-eval writes eval files"
    ).evaluate

    env = agentsgym.make(GUESS, env_config={"max_steps_per_episode": 2})
    samples, report = evaluate(env, BisectAgent(), [{"target": 50}, {"target": 1}], 1)
    out = write_records([s.model_dump() for s in samples], tmp_path / "results.parquet")
    (tmp_path / "results.summary.json").write_text(json.dumps(report.model_dump()))
    loaded = load_trajectories(out)
    assert loaded.kind == "eval" and loaded.env_ids == [GUESS]
    assert [e.correct for e in loaded.episodes] == [True, False]
    assert loaded.episodes[0].answer is None and loaded.episodes[1].truncated
    output = view(str(out), "--episode", "1")
    assert "wrong" in output and "50 is wrong; the number is lower" in output
    assert "tokens:" not in output  # eval rows carry no tokens


# ---------------------------------------------------------------------- the terminal view
def test_the_terminal_view_prints_every_selected_episode_when_piped(
    played: PlayedFiles, files: dict[str, Path]
) -> None:
    output = view(str(files["parquet"]))
    assert f"{len(played.records)} of {len(played.records)} episodes (rollout file)" in output
    for record in played.records:
        assert record["session_id"] in output
    # header: reward, turns, truncated, error; terms by source from the metrics
    assert "final reward" in output and "+0.95" in output and "-0.15" in output
    assert "truncated         yes" in output
    assert "ValueError: task_data target 1000 is outside [1, 100]" in output
    assert "RuntimeError: the env exploded" in output
    assert "format -0.05" in output and "format -0.15" in output
    # messages by role, each assistant turn with its step, the failed turn without one
    assert "25 is wrong; the number is lower." in output and "My guess is [12]." in output
    assert "no step recorded (the episode failed at this turn)" in output
    assert '"correct": true' in output
    # decoded token view; agent tokens bracketed (no colour in a pipe)
    assert "<|im_start|>assistant" in output
    assert "\u27e6My guess is [50].<|im_end|>\u27e7" in output


def test_one_episode_with_ids_when_there_is_no_tokenizer(
    played: PlayedFiles, files: dict[str, Path]
) -> None:
    output = view(str(files["jsonl"]), "--episode", "4", "--tokenizer", "none")
    assert "#4  " + COUNTDOWN in output and played.records[4]["session_id"] in output
    assert played.records[0]["session_id"] not in output
    assert "ids (no tokenizer)" in output
    ids = played.records[4]["full_token_ids"]
    mask = played.records[4]["agent_token_mask"]
    first_agent = mask.index(1)
    assert f"\u27e6{ids[first_agent]} " in output  # the agent's first id opens a bracket
    # each of the two steps: its reward on its tokens (0.5 and 1.5 in the spread strategy)
    assert "reward on its" in output and "+0.5" in output and "+1.5" in output


def test_recorded_step_rewards_and_terms_are_shown_next_to_their_turn(
    files: dict[str, Path],
) -> None:
    output = view(str(files["steps"]), "--episode", "1", "--no-tokens")
    assert output.count("reward -0.05  terms format -0.05") == 3
    assert "tokens:" not in output


def test_colours_mark_agent_tokens_by_reward_sign(files: dict[str, Path]) -> None:
    decoder = load_decoder("agentsgym/tiny-chatml")
    loaded = load_trajectories(files["parquet"])
    # #0 solved (+0.95 on its tokens), #1 truncated (-0.05 per step on its tokens)
    for index, expected in ((0, AGENT_STYLES[1]), (1, AGENT_STYLES[-1])):
        episode = loaded.episodes[index]
        panel = token_view(episode, decoder, color=True)
        assert panel is not None and isinstance(panel.renderable, Text)
        text = panel.renderable
        assert "\u27e6" not in text.plain  # colour replaces the brackets
        assert text.plain == "".join(visible(p) for p in decoder.pieces(episode.tokens.ids))
        styles = [str(span.style) for span in text.spans]
        assert len(styles) == len(episode.tokens.ids)
        for style, mask in zip(styles, episode.tokens.agent_mask.tolist()):
            assert style in (expected if mask else ENV_STYLES)
        # neighbouring tokens alternate shades, so boundaries show
        assert styles[0] != styles[1]


def test_the_selection_can_be_listed(files: dict[str, Path]) -> None:
    output = view(str(files["parquet"]), "--list")
    assert listed(output) == [0, 1, 2, 3, 4, 5]
    assert "RuntimeError" not in output  # the list has no episode bodies


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        (["--env", COUNTDOWN], [4, 5]),
        (["--failed"], [2, 5]),
        (["--min-reward", "0.9"], [0, 3, 4]),
        (["--max-reward", "0"], [1, 2]),
        (["--min-reward", "0.5", "--max-reward", "1"], [0, 3, 5]),
        (["--search", "EXPLODED"], [5]),
        (["--search", "[12]"], [1]),
        (["--search", '"target": 1000'], [2]),
        (["--env", GUESS, "--failed"], [2]),
    ],
)
def test_filters_select_episodes(
    files: dict[str, Path], options: list[str], expected: list[int]
) -> None:
    assert listed(view(str(files["parquet"]), "--list", *options)) == expected


def test_filters_agree_with_the_filter_class(files: dict[str, Path]) -> None:
    loaded = load_trajectories(files["jsonl"])
    chosen = EpisodeFilter(min_reward=-1, max_reward=1, search="Square Brackets").apply(
        loaded.episodes
    )
    assert [e.index for e in chosen] == [0, 1, 3]
    assert [e.index for e in EpisodeFilter(search="guessthenumber").apply(loaded.episodes)] == [
        0,
        1,
        2,
        3,
    ]
    assert EpisodeFilter().apply(loaded.episodes) == loaded.episodes


def test_bad_filter_options_are_clear_errors(files: dict[str, Path]) -> None:
    with pytest.raises(ViewFilterError, match="swap them"):
        EpisodeFilter(min_reward=1, max_reward=0)
    result = runner.invoke(build_app(), ["view", str(files["parquet"]), "--env", "nope/Nope-v0"])
    assert result.exit_code == 2 and GUESS in result.output
    result = runner.invoke(build_app(), ["view", str(files["parquet"]), "--episode", "99"])
    assert result.exit_code == 2 and "#0 to #5" in result.output
    result = runner.invoke(build_app(), ["view", str(files["parquet"]), "--search", "no such text"])
    assert result.exit_code == 1


# ---------------------------------------------------------------------- the pager
def test_the_pager_moves_jumps_and_quits(files: dict[str, Path]) -> None:
    loaded = load_trajectories(files["parquet"])
    commands = iter(["", "p", "p", "j 4", "l", "n", "3", "#2", "x", "9", "t", "?", "q"])
    seen: list[int] = []
    out = io.StringIO()
    pager = Pager(
        loaded.episodes, Console(file=out, width=100), read=lambda _: next(commands), clear=False
    )
    original = pager.handle

    def tracking(command: str) -> tuple[str, bool]:
        result = original(command)
        seen.append(pager.current.index)
        return result

    pager.handle = tracking  # type: ignore[method-assign]
    pager.run()
    assert seen == [1, 0, 0, 4, 5, 5, 3, 2, 2, 2, 2, 2]
    text = out.getvalue()
    assert "this is the first episode" in text and "this is the last episode" in text
    assert "unknown command 'x'" in text and "episode #9 is not in this selection" in text
    assert "episode 3 of 6 (#2)" in text and "6 episodes" in text  # the list after "?"
    assert pager.show_tokens is False


def test_the_pager_stops_at_end_of_input(files: dict[str, Path]) -> None:
    loaded = load_trajectories(files["parquet"])
    selection = EpisodeFilter(failed=True).apply(loaded.episodes)

    def eof(_: str) -> str:
        raise EOFError

    out = io.StringIO()
    pager = Pager(selection, Console(file=out, width=100), read=eof, clear=False)
    pager.run(start_index=5)
    assert "episode 2 of 2 (#5)" in out.getvalue()


# ---------------------------------------------------------------------- robust input
def test_a_cut_jsonl_line_is_skipped_with_a_warning(played: PlayedFiles, tmp_path: Path) -> None:
    path = write(played.records, tmp_path / "r.jsonl")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 200])  # the run was killed while writing the last row
    loaded = load_trajectories(path)
    assert len(loaded.episodes) == len(played.records) - 1
    assert len(loaded.warnings) == 1 and "is cut short" in loaded.warnings[0]
    assert f"line {len(played.records)}" in loaded.warnings[0]
    output = view(str(path), "--list")
    assert listed(output) == list(range(len(played.records) - 1))


def test_broken_and_mistyped_rows_are_skipped_and_unknown_columns_noted(
    played: PlayedFiles, tmp_path: Path
) -> None:
    lines = [json.dumps({**r, "my_extra": 1}) for r in played.records[:3]]
    bad_type = {**played.records[3], "final_reward": "lots"}
    path = tmp_path / "r.jsonl"
    path.write_text(
        "\n".join([lines[0], "{not json", json.dumps(bad_type), lines[1], lines[2]]) + "\n"
    )
    loaded = load_trajectories(path)
    assert [e.session_id for e in loaded.episodes] == [r["session_id"] for r in played.records[:3]]
    warnings = "\n".join(loaded.warnings)
    assert "line 2 is not valid JSON" in warnings
    assert "row 1: final_reward" in warnings
    assert "ignoring columns the viewer does not know: my_extra" in warnings


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: d / "missing.parquet", "does not exist"),
        (lambda d: d, "is a folder"),
        (lambda d: _text(d / "r.csv", "a,b\n"), "must end in .parquet or .jsonl"),
        (lambda d: _text(d / "empty.jsonl", "\n"), "is empty"),
        (lambda d: _text(d / "junk.jsonl", "{cut\n[1, 2]\n"), "has no readable line"),
        (lambda d: _bytes(d / "junk.parquet", b"PAR1 not really"), "not a readable parquet"),
        (lambda d: _rows_file(d / "rows.parquet"), "dataset rows file"),
        (lambda d: _other_parquet(d / "other.parquet"), "is not a rollout or eval file"),
    ],
)
def test_files_the_viewer_cannot_show_are_typed_errors(tmp_path: Path, make, message: str) -> None:
    path = make(tmp_path)
    with pytest.raises(TrajectoryFileError, match=message):
        load_trajectories(path)


def test_a_truncated_parquet_is_a_clear_error(played: PlayedFiles, tmp_path: Path) -> None:
    path = write(played.records, tmp_path / "r.parquet")
    path.write_bytes(path.read_bytes()[:-300])
    with pytest.raises(TrajectoryFileError, match="parquet"):
        load_trajectories(path)


def test_the_command_line_shows_one_error_line_not_a_traceback(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "agentsgym", "view", str(_rows_file(tmp_path / "rows.parquet"))],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert "error:" in result.stderr and "dataset rows file" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout


def test_a_mismatched_tokenizer_falls_back_to_ids(
    files: dict[str, Path], caplog: pytest.LogCaptureFixture
) -> None:
    pack = Path(__file__).resolve().parents[4] / "shared" / "tokenizers" / "qwen2.5-1.5b-instruct"
    if not (pack / "tokenizer.json").exists():
        pytest.skip(f"tokenizer pack not found at {pack}")
    with caplog.at_level("WARNING"):
        output = view(str(files["parquet"]), "--episode", "0", "--tokenizer", str(pack))
    assert "do not decode to its first message" in caplog.text
    assert "ids (no tokenizer)" in output


def test_script_json_cannot_end_its_script_element() -> None:
    value = {"text": HOSTILE + "<!-- & \u2028", "n": [1, 2.5]}
    text = script_json(value)
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text) == value


def test_viewer_errors_are_agentsgym_errors() -> None:
    assert issubclass(TrajectoryFileError, AgentsGymError)
    assert issubclass(ViewFilterError, AgentsGymError)


def _text(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def _bytes(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _rows_file(path: Path) -> Path:
    from agentsgym.runtime import rows_to_dataset

    rows_to_dataset(
        [{"env_class_path": GUESS, "env_config": {}, "task_data": {"seed": 1}}]
    ).to_parquet(str(path))
    return path


def _other_parquet(path: Path) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"text": ["a", "b"], "label": [0, 1]}), path)
    return path
