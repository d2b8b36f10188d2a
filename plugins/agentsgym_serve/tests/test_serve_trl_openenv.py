"""TRL's OpenEnv integration on an agentsgym env (examples/trl_openenv.py): the
environment class TRL is given plays the served env through OpenEnv's client, and a
short GRPO run on the tiny model goes through TRL's ``environment_factory`` path."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openenv.core")
pytest.importorskip("trl")
pytest.importorskip("agentsgym_trl")

from serve_helpers import GUESS, served

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import trl_openenv

pytestmark = pytest.mark.timeout(300)


def test_the_environment_class_plays_the_served_env_and_owns_the_reward() -> None:
    with served(GUESS) as server:
        trl_openenv.GuessTheNumberOverOpenEnv.url = server.url
        game = trl_openenv.GuessTheNumberOverOpenEnv()
        low, high = 1, 100
        assert game.reset(data_idx=3, prompt=[]).startswith("I am thinking of an integer")
        answer = ""
        while not answer.startswith("You found it"):
            middle = (low + high) // 2
            answer = game.guess(middle)
            if "higher" in answer:
                low = middle + 1
            elif "lower" in answer:
                high = middle - 1
        assert game.get_reward() == 1.0
        with pytest.raises(ValueError, match="game is over"):
            game.guess(1)
        game._client.close()


def test_grpo_trains_through_the_environment_factory(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    with served(GUESS) as server:
        result = trl_openenv.train(server.url, str(tmp_path), max_steps=2, num_tasks=4)
        sessions = server.service.table.created_total
    assert result.global_step == 2
    assert sessions >= 4  # one OpenEnv session per environment instance TRL pooled
