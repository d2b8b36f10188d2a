"""The rollout stream: plays ahead of the trainer by at most ``max_staleness`` versions.

The tests drive the stream with a fake ``play`` that blocks until the test lets each
step finish, and advance the trainer's version by hand: nothing depends on timing.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from agentsgym.trajectory import Episode, StepRecord, TrajectoryBatch, TrajectoryGroup
from agentsgym_trl.rollout_stream import RolloutStream

WAIT = 60.0  # a safety net only: every wait below ends as soon as the stream acts


class StepSource:
    """Rows are step numbers; the state is how many were taken."""

    def __init__(self) -> None:
        self.taken = 0

    def next_rows(self) -> list[int]:
        self.taken += 1
        return [self.taken]

    def state_dict(self) -> dict[str, Any]:
        return {"taken": self.taken}


def group(task: int, versions: list[int | None]) -> TrajectoryGroup:
    steps = [StepRecord(action="a", reward=1.0, done=False, policy_version=v) for v in versions]
    episode = Episode(session_id=f"s{task}", env_id="x/Y-v0", task_data={}, steps=steps)
    return TrajectoryGroup(task, {}, "x/Y-v0", [[episode]], pad_token_id=0, tokenized=False)


class ControlledPlay:
    """``play(rows)``: records that a step started, waits until the test finishes it,
    and returns one group whose turns carry the version the test gives."""

    def __init__(self) -> None:
        self.started: dict[int, threading.Event] = {}
        self.finish: dict[int, threading.Event] = {}
        self.versions: dict[int, list[int | None]] = {}
        self.lock = threading.Lock()

    def events(self, step: int) -> tuple[threading.Event, threading.Event]:
        with self.lock:
            started = self.started.setdefault(step, threading.Event())
            finish = self.finish.setdefault(step, threading.Event())
        return started, finish

    def __call__(self, rows: list[int]) -> TrajectoryBatch:
        [step] = rows
        started, finish = self.events(step)
        started.set()
        assert finish.wait(WAIT)
        return TrajectoryBatch([group(step, self.versions.get(step, [None]))])

    def done(self, step: int, versions: list[int | None]) -> None:
        self.versions[step] = versions
        self.events(step)[1].set()

    def has_started(self, step: int) -> bool:
        return self.events(step)[0].is_set()


def wait_until_played(rollouts: RolloutStream, steps: set[int]) -> None:
    """Wait until the stream holds the played batches of ``steps``: a step's play can
    return before its thread hands the batch to the stream."""
    with rollouts._cond:
        assert rollouts._cond.wait_for(lambda: steps <= set(rollouts._played), WAIT)


def stream(play: ControlledPlay, max_staleness: int, last_step: int = 6) -> RolloutStream:
    return RolloutStream(
        StepSource(),  # type: ignore[arg-type]
        agent=None,  # type: ignore[arg-type]
        max_staleness=max_staleness,
        last_step=last_step,
        play=play,
    )


def test_max_staleness_zero_plays_each_step_after_the_previous_update() -> None:
    play = ControlledPlay()
    with stream(play, 0) as rollouts:
        assert play.events(1)[0].wait(WAIT)
        play.done(1, [0])
        first = rollouts.take(1)
        assert not play.has_started(2)  # update 1 is not done: step 2 may not play
        rollouts.advance(1)
        assert play.events(2)[0].wait(WAIT)
        play.done(2, [1])
        second = rollouts.take(2)
    assert first.metrics["staleness_max"] == 0 and second.metrics["staleness_max"] == 0
    assert first.source_state == {"taken": 1} and second.source_state == {"taken": 2}


def test_the_stream_runs_ahead_by_the_bound_and_is_throttled_there() -> None:
    play = ControlledPlay()
    with stream(play, 2) as rollouts:
        for step in (1, 2, 3):  # versions 0..2 ahead of a trainer at version 0
            assert play.events(step)[0].wait(WAIT)
        play.done(2, [0])
        play.done(3, [0])
        play.done(1, [0])
        wait_until_played(rollouts, {1, 2, 3})
        taken = rollouts.take(1)
        assert taken.metrics["groups_waiting"] == 2  # steps 2 and 3 are played already
        assert not play.has_started(4)  # it would be 3 versions old at update 3
        rollouts.advance(1)
        assert play.events(4)[0].wait(WAIT)
        rollouts.advance(2)
        second = rollouts.take(2)
        assert second.metrics["staleness_max"] == 2 and second.metrics["groups_discarded"] == 0
        rollouts.close()
        play.done(4, [1])


def test_a_group_older_than_the_bound_is_discarded_and_counted() -> None:
    play = ControlledPlay()
    with stream(play, 1, last_step=2) as rollouts:
        assert play.events(1)[0].wait(WAIT)
        play.done(1, [0])
        assert play.events(2)[0].wait(WAIT)
        play.done(2, [-5, 0])  # an agent that reports an old version of its own
        rollouts.take(1)
        rollouts.advance(1)
        taken = rollouts.take(2)
    assert taken.metrics["groups_discarded"] == 1 and len(taken.batch.groups) == 0


def test_an_unversioned_group_is_aged_from_when_it_was_dispatched() -> None:
    play = ControlledPlay()
    with stream(play, 1, last_step=2) as rollouts:
        assert play.events(1)[0].wait(WAIT)
        assert play.events(2)[0].wait(WAIT)  # dispatched at version 0
        play.done(1, [None])
        play.done(2, [None])
        rollouts.take(1)
        rollouts.advance(1)
        taken = rollouts.take(2)
    assert taken.metrics["staleness_max"] == 1 and taken.metrics["unversioned_episodes"] == 1


def test_a_failed_play_is_raised_to_the_trainer() -> None:
    def fail(rows: list[int]) -> TrajectoryBatch:
        raise RuntimeError("the env server went away")

    rollouts = RolloutStream(
        StepSource(),  # type: ignore[arg-type]
        agent=None,  # type: ignore[arg-type]
        max_staleness=0,
        last_step=1,
        play=fail,
    )
    with rollouts, pytest.raises(RuntimeError, match="went away"):
        rollouts.take(1)
