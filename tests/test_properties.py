"""Property-based tests: junk in, typed errors (or results) out; never a crash, never a hang.

* dataset rows: ``run_dataset`` and ``load_rows`` on arbitrary rows;
* env_config values: ``EnvConfig``, ``GuessTheNumberConfig`` and ``make``;
* agent replies (unicode, lone surrogates, huge, special-token text, think blocks)
  on the built-in env with the bundled tokenizer, down to the output file.

"Typed" means an :class:`agentsgym.errors.AgentsGymError`; an episode may also fail,
recorded on the episode, but the run itself must not raise anything else.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentsgym
from agentsgym import EnvConfig
from agentsgym.agents import FunctionAgent, ScriptedAgent
from agentsgym.engine import TrialJob
from agentsgym.errors import AgentsGymError, DatasetRowError, EnvConfigError
from agentsgym.output.journal import encode_rows
from agentsgym.output.records import rollout_rows
from agentsgym.rows import load_rows
from agentsgym_classical import GuessTheNumberConfig

pytestmark = pytest.mark.timeout(120)

GUESS = "agentsgym/GuessTheNumber-v0"
# No example database: runs are reproducible from the seed and leave no folder behind.
FAST = settings(
    max_examples=40,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


@pytest.fixture(scope="module")
def tiny() -> Any:
    return agentsgym.load_tokenizer("agentsgym/tiny-chatml")


# ---------------------------------------------------------------------- values
def mostly(
    usual: st.SearchStrategy[Any], rare: st.SearchStrategy[Any], odds: int = 5
) -> st.SearchStrategy[Any]:
    """``usual`` ``odds`` times out of ``odds + 1`` (one_of would pick each branch alike)."""
    return st.integers(0, odds).flatmap(lambda i: rare if i == odds else usual)


SURROGATES = st.characters(categories=["Cs"])
TEXT = st.text(st.one_of(st.characters(), SURROGATES), max_size=20)
FLOATS = st.floats(allow_nan=True, allow_infinity=True)
JSONISH = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(10**20), 10**20), FLOATS, TEXT),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(TEXT, inner, max_size=3)),
    max_leaves=8,
)
# Counts are mostly small and valid, else junk or far out of bounds: an in-bounds
# 10,000-step episode is legal, just slow, and says nothing about robustness.
COUNTS = mostly(
    st.integers(1, 4),
    st.one_of(st.integers(-3, 0), st.integers(10**4, 10**12), FLOATS, st.booleans(), TEXT),
    3,
)
BUDGETS = mostly(st.floats(0.5, 60), st.one_of(FLOATS, st.integers(-5, 10**9), TEXT), 3)
BOUNDS = mostly(st.integers(-(10**6), 10**6), JSONISH, 3)
CONFIG_KEYS = {
    "max_steps_per_episode": COUNTS,
    "episodes_per_trial": COUNTS,
    "free_shots": mostly(st.just(0), COUNTS, 3),
    "hook_timeout_seconds": BUDGETS,
    "episode_timeout_seconds": BUDGETS,
    "reward_strategy": mostly(st.sampled_from(["spread", "last_token", "terminal"]), TEXT, 3),
    "on_template_mismatch": mostly(st.sampled_from(["split", "error"]), TEXT, 3),
    "chat_template_kwargs": mostly(st.just({}), JSONISH, 3),
    "low": BOUNDS,
    "high": BOUNDS,
}
KNOWN_KEYS_CONFIG = st.fixed_dictionaries({}, optional=CONFIG_KEYS)
ENV_CONFIGS = mostly(
    KNOWN_KEYS_CONFIG, st.one_of(st.dictionaries(TEXT, JSONISH, max_size=3), JSONISH), 2
)
TASK_DICT = st.fixed_dictionaries(
    {}, optional={"target": st.one_of(st.integers(-200, 200), JSONISH), "seed": JSONISH}
)
ENV_PATHS = st.one_of(
    st.sampled_from(
        [
            "agentsgym/GuessNumber-v0",
            "agentsgym_classical.guess_number:GuessTheNumberEnv",
            "os:system",
            "",
            "a/b/c",
            "/",
            ":",
        ]
    ),
    TEXT,
    JSONISH,
)
# Mostly well-formed rows with junk values (they reach the env), some junk rows.
ROW = st.fixed_dictionaries(
    {
        "env_class_path": mostly(st.just(GUESS), ENV_PATHS),
        "env_config": mostly(KNOWN_KEYS_CONFIG, ENV_CONFIGS),
        "task_data": mostly(TASK_DICT, JSONISH),
    },
    optional={"extra": JSONISH},
)
JUNK_ROW = st.one_of(
    JSONISH,
    st.dictionaries(st.sampled_from(["env_class_path", "env_config", "task_data"]), JSONISH),
)
ROWS = st.lists(mostly(ROW, JUNK_ROW, 8), min_size=1, max_size=3)


# ---------------------------------------------------------------------- dataset rows
@FAST
@given(rows=ROWS)
def test_run_dataset_on_junk_rows_raises_only_typed_errors(rows: list[Any], tiny: Any) -> None:
    try:
        batch = agentsgym.runtime.run_dataset(
            rows, ScriptedAgent(["[1]", "[2]"]), 1, tokenizer=tiny, max_concurrency=2
        )
    except AgentsGymError:
        return
    assert len(batch.groups) == len(rows)
    for episode in batch.all_episodes:
        assert episode.error is None or isinstance(episode.error, str)
    json.loads(b"[" + encode_rows(batch.to_records()).replace(b"\n", b",").rstrip(b",") + b"]")


@FAST
@given(rows=st.lists(st.one_of(ROW, JUNK_ROW), min_size=1, max_size=4))
def test_load_rows_on_junk_jsonl_raises_only_dataset_row_errors(
    rows: list[Any], tmp_path_factory: pytest.TempPathFactory
) -> None:
    path = tmp_path_factory.mktemp("rows") / "rows.jsonl"
    # what a file can hold: JSON text (surrogates escaped, NaN as JSON5-ish tokens json reads)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    try:
        loaded = load_rows(path)
    except DatasetRowError:
        return
    assert len(loaded) == len(rows)
    for row in loaded:
        assert isinstance(row.env_class_path, str) and isinstance(row.task_data, dict)


# ---------------------------------------------------------------------- env_config
@settings(max_examples=300, deadline=None, database=None)
@given(config=ENV_CONFIGS)
def test_env_configs_validate_or_raise_env_config_error(config: Any) -> None:
    for cls in (EnvConfig, GuessTheNumberConfig):
        try:
            parsed = cls.parse(config, env_name=cls.__name__)
        except EnvConfigError:
            continue
        # whatever is accepted is a sane, bounded run
        assert (
            isinstance(parsed.max_steps_per_episode, int)
            and 1 <= parsed.max_steps_per_episode <= 10_000
        )
        assert (
            isinstance(parsed.episodes_per_trial, int) and 1 <= parsed.episodes_per_trial <= 1_000
        )
        assert 0 <= parsed.free_shots < parsed.episodes_per_trial
        for budget in (parsed.hook_timeout_seconds, parsed.episode_timeout_seconds):
            assert math.isfinite(budget) and budget > 0
        if isinstance(parsed, GuessTheNumberConfig):
            assert parsed.low <= parsed.high


@settings(max_examples=60, deadline=None, database=None)
@given(config=ENV_CONFIGS)
def test_make_with_junk_env_config_raises_only_typed_errors(config: Any) -> None:
    try:
        env = agentsgym.make(GUESS, env_config=config)
    except AgentsGymError:
        return
    assert env.config.max_steps_per_episode >= 1


# ---------------------------------------------------------------------- agent replies
SPECIALS = st.sampled_from(
    [
        "<|im_start|>",
        "<|im_end|>",
        "<|endoftext|>",
        "<|im_start|>assistant\n",
        "<think>",
        "</think>",
        "<think>\nhmm\n</think>\n",
        "<|eot_id|>",
        "<|start_header_id|>user<|end_header_id|>",
        "[50]",
        "[-3]",
        "[ 7 ]",
        "\n",
        "\x00",
    ]
)
PIECES = st.one_of(TEXT, SPECIALS, SURROGATES, st.integers(1, 3000).map(lambda n: "x" * n))
REPLY = st.lists(PIECES, max_size=8).map("".join)
HUGE = st.tuples(st.integers(20_000, 100_000), PIECES).map(
    lambda t: t[1] * (t[0] // max(len(t[1]), 1))
)


@settings(
    max_examples=25,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(replies=st.lists(mostly(REPLY, HUGE, 4), min_size=1, max_size=3))
def test_any_reply_plays_and_writes_cleanly(replies: list[str], tiny: Any) -> None:
    env = agentsgym.make(GUESS, tokenizer=tiny, env_config={"max_steps_per_episode": 3})

    def policy(messages: Any, state: Any) -> tuple[str, Any]:
        turn = sum(1 for m in messages if m["role"] == "assistant")
        return replies[min(turn, len(replies) - 1)], state

    agent = FunctionAgent(policy)
    batch = env.run_trial([{"seed": 3}], agent, 1)
    (episode,) = batch.all_episodes
    assert episode.error is None, episode.error
    for message in episode.messages:
        message["content"].encode("utf-8")  # no surrogate left anywhere
    assert episode.num_tokens > episode.num_agent_tokens > 0  # token invariants were checked
    rows = rollout_rows(TrialJob(env, {"seed": 3}, 0, 0), [episode])
    back = [json.loads(line) for line in encode_rows(rows).splitlines()]
    assert back[0]["messages"] == episode.messages
