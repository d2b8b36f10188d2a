"""The progress bars of ``agentsgym train``: what they print of the env id."""

from __future__ import annotations

from typing import Any

import pytest

from agentsgym.runtime import TrainResult
from agentsgym_trl.train_progress import train_with_progress

PLANTED = "sk-plantedsecret0123456789abcdef"


class NoStepAdapter:
    """A trainer that ends before its first step: the bar keeps the text it began with."""

    def train(self, source: Any, *, max_steps: int, on_step: Any, agent: Any) -> TrainResult:
        return TrainResult()


class ClosableSource:
    on_episode: Any = None
    closed = False

    def close(self) -> None:
        self.closed = True


def test_the_steps_bar_names_the_env_without_the_credentials_of_its_url(
    capsys: pytest.CaptureFixture[str],
) -> None:
    source = ClosableSource()
    env_id = f"http://user:{PLANTED}@envs.example:8000"
    result, errors = train_with_progress(
        NoStepAdapter(),
        source,  # type: ignore[arg-type]
        trainer="grpo",
        env_id=env_id,
        max_steps=1,
        episodes_per_step=1,
        player=None,
        checkpointing={},
    )
    assert result.steps == [] and errors == [] and source.closed
    out = capsys.readouterr()
    shown = out.out + out.err
    assert "http://<redacted>@envs.example:8000" in shown  # the bar names the env
    assert PLANTED not in shown
    assert "user:" not in shown
