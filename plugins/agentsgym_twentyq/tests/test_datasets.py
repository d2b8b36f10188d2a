"""Train/eval splits: disjoint, seeded, covering every word, in the core's row schema."""

from __future__ import annotations

from typing import Any

import pytest

import agentsgym
from agentsgym.runtime import parse_rows
from agentsgym_twentyq.words import word_list
from twentyq_testutil import BASIC, HARDCORE


@pytest.mark.parametrize(
    ("env_id", "level", "hardcore"), [(BASIC, "basic", False), (HARDCORE, "hardcore", True)]
)
def test_splits(env_id: str, level: str, hardcore: bool) -> None:
    env = agentsgym.make(env_id)
    train, evals = parse_rows(env.get_train_dataset()), parse_rows(env.get_eval_dataset())
    train_words = [r.task_data["solution"] for r in train]
    eval_words = [r.task_data["solution"] for r in evals]
    assert not set(train_words) & set(eval_words)
    assert sorted(train_words + eval_words) == sorted(s.word for s in word_list(level))  # type: ignore[arg-type]
    assert len(eval_words) == pytest.approx(0.2 * (len(train_words) + len(eval_words)), abs=3)
    categories = {s.word: s.category for s in word_list(level)}  # type: ignore[arg-type]
    assert {categories[w] for w in eval_words} == {"place", "person", "thing"}
    for row in train + evals:
        assert row.env_class_path == env_id
        assert set(row.task_data) == {"solution", "seed"}
        assert row.env_config.get("hardcore", False) is hardcore
        assert (
            agentsgym.make(row.env_class_path, env_config=row.env_config).config.hardcore
            is hardcore
        )


def test_splits_are_seeded(basic_env: Any) -> None:
    def words(**kwargs: Any) -> list[str]:
        return [t["solution"] for t in basic_env.get_eval_dataset(**kwargs)["task_data"]]

    assert words() == words(seed=0)
    assert words(seed=1) == words(seed=1)
    assert set(words(seed=1)) != set(words())
    assert len(words(eval_fraction=0.5)) > len(words())
    with pytest.raises(ValueError):
        words(eval_fraction=1.0)
