"""Loading benchmark files: formats, column mappings, splits and the errors users meet."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import agentsgym
from agentsgym.errors import EnvConfigError
from agentsgym_classical.errors import DatasetColumnError, DatasetLoadError, NoSuchSplitError
from agentsgym_classical.formats import last_boxed

RowsFile = Callable[[str, list[dict[str, Any]]], str]
Rows = dict[str, list[dict[str, Any]]]


def eval_tasks(env_id: str, **config: Any) -> list[dict[str, Any]]:
    env = agentsgym.make(env_id, env_config=config)
    return [row["task_data"] for row in env.get_eval_dataset()]


@pytest.mark.parametrize("suffix", [".jsonl", ".json", ".parquet"])
def test_gsm8k_file(rows_file: RowsFile, suffix: str, benchmark_rows: Rows) -> None:
    tasks = eval_tasks(
        "classical/GSM8K-v0", dataset=rows_file(f"gsm8k{suffix}", benchmark_rows["gsm8k"])
    )
    assert [t["answer"] for t in tasks] == ["72", "1234"]
    assert tasks[0]["problem"].startswith("Natalia sold clips")
    assert tasks[0]["id"] == "test/0"


def test_math_file_takes_answer_column_else_last_boxed(
    rows_file: RowsFile, benchmark_rows: Rows
) -> None:
    tasks = eval_tasks("classical/MATH-v0", dataset=rows_file("math.json", benchmark_rows["math"]))
    assert [t["answer"] for t in tasks] == ["\\frac{3}{4}", "\\frac{\\sqrt{3}}{2}"]
    assert last_boxed("a \\boxed{1} then \\boxed{\\frac{a}{b}} end") == "\\frac{a}{b}"
    assert last_boxed("no box") is None


def test_aime_file_normalises_integers(rows_file: RowsFile, benchmark_rows: Rows) -> None:
    tasks = eval_tasks("classical/AIME-v0", dataset=rows_file("aime.jsonl", benchmark_rows["aime"]))
    assert [t["answer"] for t in tasks] == ["24", "6"]


def test_aime_rejects_a_non_integer_answer(rows_file: RowsFile) -> None:
    path = rows_file("aime.jsonl", [{"problem": "p", "answer": "1/2"}])
    with pytest.raises(DatasetColumnError, match=r"row 0: column 'answer'.*not an integer"):
        eval_tasks("classical/AIME-v0", dataset=path)


def test_multiple_choice_file(rows_file: RowsFile, benchmark_rows: Rows) -> None:
    tasks = eval_tasks(
        "classical/MultipleChoice-v0", dataset=rows_file("aqua.jsonl", benchmark_rows["choice"])
    )
    assert tasks[0]["answer"] == "B" and tasks[0]["choices"]["B"] == "40"
    assert tasks[1]["answer"] == "C" and tasks[1]["choices"] == {
        "A": "4",
        "B": "6",
        "C": "7",
        "D": "9",
    }
    env = agentsgym.make("classical/MultipleChoice-v0")
    prompt = env.problem_prompt(env.load_problems("eval")[0])
    assert "Options:\nA) " in prompt


def test_column_mapping(rows_file: RowsFile, benchmark_rows: Rows) -> None:
    rows = [{"Problem": r["question"], "Solution": r["answer"]} for r in benchmark_rows["gsm8k"]]
    tasks = eval_tasks(
        "classical/GSM8K-v0",
        dataset=rows_file("renamed.jsonl", rows),
        columns={"question": "Problem", "answer": "Solution"},
    )
    assert [t["answer"] for t in tasks] == ["72", "1234"]


def test_missing_column_names_the_row_and_column(rows_file: RowsFile, benchmark_rows: Rows) -> None:
    rows = [benchmark_rows["gsm8k"][0], {"question": "What is 2 + 2?"}]
    with pytest.raises(DatasetColumnError) as info:
        eval_tasks("classical/GSM8K-v0", dataset=rows_file("broken.jsonl", rows))
    message = str(info.value)
    assert "row 1" in message and "column 'answer'" in message and "columns=" in message


def test_mapping_an_unknown_field_is_a_config_error() -> None:
    with pytest.raises(EnvConfigError, match="unknown field"):
        agentsgym.make("classical/GSM8K-v0", env_config={"columns": {"problem": "q"}})


def test_one_file_is_the_eval_split_only(rows_file: RowsFile, benchmark_rows: Rows) -> None:
    env = agentsgym.make(
        "classical/GSM8K-v0", env_config={"dataset": rows_file("g.jsonl", benchmark_rows["gsm8k"])}
    )
    assert len(env.get_eval_dataset()) == 2
    with pytest.raises(NoSuchSplitError, match="eval split"):
        env.get_train_dataset()


def test_files_per_split_and_num_tasks(rows_file: RowsFile, benchmark_rows: Rows) -> None:
    files = {
        "train": rows_file("train.jsonl", benchmark_rows["gsm8k"]),
        "test": rows_file("test.jsonl", benchmark_rows["gsm8k"][:1]),
    }
    env = agentsgym.make("classical/GSM8K-v0", env_config={"dataset": files, "num_tasks": 1})
    assert len(env.get_train_dataset()) == 1 and len(env.get_eval_dataset()) == 1
    with pytest.raises(NoSuchSplitError, match="no 'validation' split"):
        agentsgym.make(
            "classical/GSM8K-v0", env_config={"dataset": files, "eval_split": "validation"}
        ).get_eval_dataset()


def test_missing_file() -> None:
    with pytest.raises(DatasetLoadError, match="does not exist"):
        eval_tasks("classical/GSM8K-v0", dataset="/nonexistent/gsm8k.jsonl")


@pytest.mark.parametrize("split", ["train", "eval"])
def test_a_missing_file_is_said_to_be_missing_whatever_the_split(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, split: str
) -> None:
    from agentsgym.testing import run_cli

    monkeypatch.chdir(tmp_path)  # a relative path: the message shows where it looked
    result = run_cli(
        "rollout",
        "classical/GSM8K-v0",
        "--env-config",
        "dataset=missing.jsonl",
        "--split",
        split,
        "--tokenizer",
        "none",
        "--out",
        str(tmp_path / "out.jsonl"),
    )
    assert result.code == 2, result.output
    assert "dataset file 'missing.jsonl' does not exist" in result.stderr
    assert f"looked for {tmp_path / 'missing.jsonl'}" in result.stderr
    assert "split" not in result.stderr  # nothing about splits: that is not the problem


def test_one_file_without_the_split_suggests_the_split_it_has(
    rows_file: RowsFile, benchmark_rows: Rows
) -> None:
    path = rows_file("g.jsonl", benchmark_rows["gsm8k"])
    env = agentsgym.make("classical/GSM8K-v0", env_config={"dataset": path})
    with pytest.raises(NoSuchSplitError, match="Play it with `--split eval`"):
        env.get_train_dataset()
    files = {"test": path}
    env = agentsgym.make("classical/GSM8K-v0", env_config={"dataset": files})
    with pytest.raises(NoSuchSplitError, match="play the eval split .* with `--split eval`"):
        env.get_train_dataset()
    files = {"train": path}
    env = agentsgym.make("classical/GSM8K-v0", env_config={"dataset": files})
    with pytest.raises(NoSuchSplitError, match="play the train split .* with `--split train`"):
        env.get_eval_dataset()
    config = {"dataset": path, "train_split": None}
    with pytest.raises(NoSuchSplitError, match="`--split eval`"):
        agentsgym.make("classical/GSM8K-v0", env_config=config).get_train_dataset()


def test_the_suggested_split_plays(
    tmp_path: Path, rows_file: RowsFile, benchmark_rows: Rows
) -> None:
    from agentsgym.testing import run_cli

    path = rows_file("g.jsonl", benchmark_rows["gsm8k"])
    result = run_cli(
        "rollout",
        "classical/GSM8K-v0",
        "--env-config",
        f"dataset={path}",
        "--split",
        "eval",
        "--tokenizer",
        "none",
        "--out",
        str(tmp_path / "out.jsonl"),
    )
    assert result.code == 0, result.output


def test_the_command_line_suggests_the_split(
    tmp_path: Path, rows_file: RowsFile, benchmark_rows: Rows
) -> None:
    from agentsgym.testing import run_cli

    path = rows_file("g.jsonl", benchmark_rows["gsm8k"])
    result = run_cli(
        "rollout",
        "classical/GSM8K-v0",
        "--env-config",
        f"dataset={path}",
        "--tokenizer",
        "none",
        "--out",
        str(tmp_path / "out.jsonl"),
    )
    assert result.code == 2 and "--split eval" in result.stderr, result.output


def test_unreachable_hub_dataset_says_what_to_do(monkeypatch: pytest.MonkeyPatch) -> None:
    import datasets

    def offline(*args: Any, **kwargs: Any) -> Any:
        raise ConnectionError("Couldn't reach 'openai/gsm8k' on the Hub (LocalEntryNotFoundError)")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(DatasetLoadError) as info:
        eval_tasks("classical/GSM8K-v0", dataset="openai/gsm8k", dataset_config="main")
    message = str(info.value)
    assert "openai/gsm8k" in message and "HF_HUB_OFFLINE" in message and ".jsonl" in message


def test_hub_dataset_is_read_through_the_format(
    monkeypatch: pytest.MonkeyPatch, benchmark_rows: Rows
) -> None:
    import datasets

    calls = []

    def fake(name: str, config: str | None = None, split: str | None = None) -> Any:
        calls.append((name, config, split))
        return datasets.Dataset.from_list(benchmark_rows["gsm8k"])

    monkeypatch.setattr(datasets, "load_dataset", fake)
    tasks = eval_tasks("classical/GSM8K-v0", dataset="openai/gsm8k", dataset_config="main")
    assert calls == [("openai/gsm8k", "main", "test")]
    assert [t["answer"] for t in tasks] == ["72", "1234"]


def test_same_train_and_eval_split_is_rejected() -> None:
    with pytest.raises(EnvConfigError, match="must differ"):
        agentsgym.make("classical/GSM8K-v0", env_config={"train_split": "test"})


def test_embedded_problems_in_every_format_are_disjoint() -> None:
    for env_id in (
        "classical/GSM8K-v0",
        "classical/MATH-v0",
        "classical/AIME-v0",
        "classical/MultipleChoice-v0",
        "classical/Arithmetic-v0",
    ):
        env = agentsgym.make(env_id, env_config={"num_tasks": 50})
        train = {row["task_data"]["problem"] for row in env.get_train_dataset()}
        test = [row["task_data"]["problem"] for row in env.get_eval_dataset()]
        assert len(train) == 50 and len(test) == 50 and not train.intersection(test)


def test_eval_only_hub_benchmark(monkeypatch: pytest.MonkeyPatch, benchmark_rows: Rows) -> None:
    import datasets

    # e.g. HuggingFaceH4/aime_2024 ships its 30 problems as its only split, "train"
    splits: list[str | None] = []

    def fake(name: str, config: str | None = None, split: str | None = None) -> Any:
        splits.append(split)
        return datasets.Dataset.from_list(
            [{**row, "answer": str(row["answer"])} for row in benchmark_rows["aime"]]
        )

    monkeypatch.setattr(datasets, "load_dataset", fake)
    env = agentsgym.make(
        "classical/AIME-v0",
        env_config={
            "dataset": "HuggingFaceH4/aime_2024",
            "eval_split": "train",
            "train_split": None,
        },
    )
    assert [row["task_data"]["answer"] for row in env.get_eval_dataset()] == ["24", "6"]
    assert splits == ["train"]
    with pytest.raises(NoSuchSplitError, match="eval-only"):
        env.get_train_dataset()


def test_generation_that_runs_out_of_distinct_problems_stops_with_a_clear_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from agentsgym_classical.arithmetic import generator
    from agentsgym_classical.errors import GenerationError

    one = generator.generate("0/train/0")
    monkeypatch.setattr(generator, "generate", lambda *args, **kwargs: one)
    with pytest.raises(GenerationError, match="only 1 distinct train problems in 1040 draws"):
        generator.generate_split("train", 2)
