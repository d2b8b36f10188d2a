"""Property-based tests of the installed env plugins: Twenty Questions and the classical
envs get junk env_config values, junk task_data and any agent reply (unicode, lone
surrogates, special-token text, think blocks, huge), and answer with typed errors or
recorded episode failures: never an untyped exception out of the run, never a hang.

The built-in env's properties are in test_properties.py (its strategies are reused).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import agentsgym
from agentsgym.agents import FunctionAgent
from agentsgym.engine import TrialJob
from agentsgym.errors import AgentsGymError
from agentsgym.output.journal import encode_rows
from agentsgym.output.records import rollout_rows
from test_properties import (
    BUDGETS,
    COUNTS,
    FLOATS,
    HUGE,
    JSONISH,
    REPLY,
    TEXT,
    mostly,
)

pytest.importorskip("agentsgym_twentyq")
pytest.importorskip("agentsgym_classical")

pytestmark = pytest.mark.timeout(600)

TWENTYQ = "twentyq/TwentyQuestions-v0"
ARITHMETIC = "classical/Arithmetic-v0"
CHOICE = "classical/MultipleChoice-v0"
SOME = settings(
    max_examples=20,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
# Replies are played with a short turn budget: a hook that hangs fails its episode,
# and the property (no episode fails on a reply) catches it.
PLAY_CONFIG = {"max_steps_per_episode": 3, "hook_timeout_seconds": 60.0}


@pytest.fixture(scope="module")
def tiny() -> Any:
    return agentsgym.load_tokenizer("agentsgym/tiny-chatml")


# ---------------------------------------------------------------------- env_config
REWARDS = mostly(st.floats(-2, 2), st.one_of(FLOATS, TEXT, st.booleans()), 3)
TWENTYQ_CONFIGS = st.fixed_dictionaries(
    {},
    optional={
        "max_steps_per_episode": COUNTS,
        "hook_timeout_seconds": BUDGETS,
        "hardcore": mostly(st.booleans(), JSONISH, 3),
        "gamemaster": mostly(st.just("rules"), st.one_of(TEXT, JSONISH), 3),
        "gamemaster_options": mostly(st.just({}), JSONISH, 3),
        "show_history": mostly(st.booleans(), JSONISH, 3),
    },
)
CLASSICAL_CONFIGS = st.fixed_dictionaries(
    {},
    optional={
        "max_steps_per_episode": COUNTS,
        "correct_reward": REWARDS,
        "wrong_reward": REWARDS,
        "unparsed_reward": REWARDS,
        "attempt_penalty": REWARDS,
        "grading_timeout_seconds": BUDGETS,
        "max_reply_chars": mostly(st.integers(1, 10**6), st.one_of(COUNTS, JSONISH), 3),
        "num_tasks": mostly(st.integers(1, 50), st.one_of(COUNTS, JSONISH), 3),
        "seed": mostly(st.integers(0, 10**6), st.one_of(st.integers(), FLOATS, TEXT), 3),
        "instruction": mostly(st.none(), TEXT, 1),
        "min_operations": COUNTS,
        "max_operations": COUNTS,
    },
)


def sane(config: Any) -> None:
    """What an accepted config may hold: bounded integer counts, finite floats."""
    for name, value in config.model_dump().items():
        if isinstance(value, bool):
            continue
        if isinstance(value, float):
            assert math.isfinite(value), name
        if isinstance(value, int):
            assert abs(value) < 2**63, name
    assert 1 <= config.max_steps_per_episode <= 10_000


@settings(max_examples=150, deadline=None, database=None)
@given(
    case=st.one_of(
        st.tuples(st.just(TWENTYQ), mostly(TWENTYQ_CONFIGS, JSONISH, 4)),
        st.tuples(
            st.sampled_from([ARITHMETIC, "classical/GSM8K-v0"]),
            mostly(CLASSICAL_CONFIGS, JSONISH, 4),
        ),
    )
)
def test_plugin_env_configs_validate_or_raise_typed_errors(case: tuple[str, Any]) -> None:
    env_id, config = case
    try:
        env = agentsgym.make(env_id, env_config=config)
    except AgentsGymError:
        return
    sane(env.config)


# ---------------------------------------------------------------------- task data
TWENTYQ_TASKS = st.fixed_dictionaries(
    {},
    optional={
        "solution": mostly(st.sampled_from(["apple", "yo-yo", "Paris"]), st.one_of(TEXT, JSONISH)),
        "seed": mostly(st.integers(0, 100), JSONISH),
        "theme": JSONISH,
    },
)
CLASSICAL_TASKS = st.fixed_dictionaries(
    {},
    optional={
        "id": mostly(st.just("p1"), JSONISH),
        "problem": mostly(st.just("What is 2 + 3?"), st.one_of(TEXT, JSONISH)),
        "answer": mostly(st.sampled_from(["5", "\\frac{1}{2}", "B"]), st.one_of(TEXT, JSONISH)),
        "choices": mostly(st.none(), JSONISH, 2),
    },
)


@SOME
@given(
    rows=st.lists(
        st.one_of(
            st.builds(
                lambda t: {"env_class_path": TWENTYQ, "task_data": t},
                mostly(TWENTYQ_TASKS, JSONISH, 4),
            ),
            st.builds(
                lambda e, t: {"env_class_path": e, "task_data": t},
                st.sampled_from([ARITHMETIC, CHOICE]),
                mostly(CLASSICAL_TASKS, JSONISH, 4),
            ),
        ),
        min_size=1,
        max_size=3,
    )
)
def test_junk_task_data_gives_typed_errors_or_recorded_failures(rows: list[Any], tiny: Any) -> None:
    replies = FunctionAgent(lambda messages, state: ("Is it big? \\boxed{5} [apple] (B)", state))
    for row in rows:
        row["env_config"] = dict(PLAY_CONFIG)
    try:
        batch = agentsgym.runtime.run_dataset(rows, replies, 1, tokenizer=tiny, max_concurrency=3)
    except AgentsGymError:
        return
    assert len(batch.groups) == len(rows)
    for episode in batch.all_episodes:
        assert episode.error is None or isinstance(episode.error, str)
        assert "EpisodeTimeoutError" not in (episode.error or ""), episode.error
    encode_rows(batch.to_records())


# ---------------------------------------------------------------------- agent replies
def play(env_id: str, replies: list[str], tokenizer: Any, task: dict[str, Any]) -> None:
    """Play one episode with these replies; it must end without an error, and its rows
    must be clean UTF-8 JSON."""
    env = agentsgym.make(env_id, tokenizer=tokenizer, env_config=PLAY_CONFIG)

    def policy(messages: Any, state: Any) -> tuple[str, Any]:
        turn = sum(1 for m in messages if m["role"] == "assistant")
        return replies[min(turn, len(replies) - 1)], state

    batch = env.run_trial([task], FunctionAgent(policy), 1)
    (episode,) = batch.all_episodes
    assert episode.error is None, episode.error
    for message in episode.messages:
        message["content"].encode("utf-8")  # no surrogate left anywhere
    assert episode.num_tokens > episode.num_agent_tokens > 0
    rows = rollout_rows(TrialJob(env, task, 0, 0), [episode])
    back = [json.loads(line) for line in encode_rows(rows).splitlines()]
    assert back[0]["messages"] == episode.messages


@SOME
@given(replies=st.lists(mostly(REPLY, HUGE, 4), min_size=1, max_size=3))
def test_any_reply_plays_twenty_questions_cleanly(replies: list[str], tiny: Any) -> None:
    play(TWENTYQ, replies, tiny, {"solution": "apple", "seed": 1})


# Long degenerate replies HUGE draws only now and then: math-verify could not read them
# whole in any budget (their episodes failed with GradingError after 21 s); the grader
# reads their answer region and scores them. Always played, so a return shows every run.
DEGENERATE = ["1 " * 50_000, "7\n" * 50_000, "[50]" * 25_000, "x" * 100_000]


@SOME
@example(replies=DEGENERATE[:3])
@example(replies=DEGENERATE[3:])
@given(replies=st.lists(mostly(REPLY, HUGE, 4), min_size=1, max_size=3))
def test_any_reply_plays_a_classical_env_cleanly(replies: list[str], tiny: Any) -> None:
    task = agentsgym.make(ARITHMETIC).get_eval_dataset()["task_data"][0]
    play(ARITHMETIC, replies, tiny, task)


@SOME
@example(replies=DEGENERATE[:2])
@given(replies=st.lists(mostly(REPLY, HUGE, 4), min_size=1, max_size=2))
def test_any_reply_plays_multiple_choice_cleanly(replies: list[str], tiny: Any) -> None:
    task = agentsgym.make(CHOICE).get_eval_dataset()["task_data"][0]
    play(CHOICE, replies, tiny, task)


def test_twentyq_judges_a_long_reply() -> None:
    # A reply of 200 kB without "?" took 135 s with the old regex parser; in a child
    # process, so that a return of the quadratic scan is a hang caught at a deadline
    # far above the milliseconds it takes, not a core burnt for minutes.
    code = (
        "from agentsgym_twentyq.parsing import extract_question\n"
        "assert extract_question('a' * 1_000_000) == 'a' * 500\n"
    )
    try:
        subprocess.run([sys.executable, "-c", code], timeout=120, check=True)
    except subprocess.TimeoutExpired:
        pytest.fail("judging a 1 MB reply hung (the question parser is quadratic again)")
