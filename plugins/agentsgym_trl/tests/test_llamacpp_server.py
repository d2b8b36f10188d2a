"""llama.cpp's own OpenAI-compatible server (llama-cpp-python) serving the ``smollm2`` GGUF,
played through the ``openai`` agent.

llama-cpp-python builds llama.cpp from source (15-30 minutes), so CI does not install it
and these tests skip without it (``bench/bench_real_model_llamacpp.py`` has the
measured figures). What they pin down is what that server does and does not return:
no sampled token ids and no prompt ids, so a chat episode is text only and the runner
re-tokenizes it (``token_source: "retokenized"``); and no token-id prompts, so
``api="completions"`` (token-in) is refused.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

import agentsgym
from agentsgym.errors import MissingPluginError
from agentsgym_trl.llamacpp import llama_cpp_server
from agentsgym_trl.models import SMOLLM2_GGUF, find_gguf

if importlib.util.find_spec("llama_cpp") is None:
    pytest.skip(
        "llama-cpp-python is not installed (pip install 'llama-cpp-python[server]' builds "
        "llama.cpp from source; CI does not)",
        allow_module_level=True,
    )

GUESS = "agentsgym/GuessTheNumber-v0"


@pytest.fixture(scope="module")
def base_url() -> Any:
    try:
        find_gguf(SMOLLM2_GGUF)
    except MissingPluginError as exc:
        pytest.skip(f"the real model is not installed ({exc})")
    with llama_cpp_server(threads=1) as url:
        yield url


def play(base_url: str, api: str, **options: Any) -> Any:
    env = agentsgym.make(
        GUESS, tokenizer="smollm2", env_config={"high": 10, "max_steps_per_episode": 2}
    )
    agent = agentsgym.make_agent(
        "openai",
        base_url=base_url,
        model="smollm2",
        api=api,
        max_tokens=8,
        temperature=0.7,
        max_retries=0,
        timeout=120,
        **options,
    )
    try:
        return env.run_trial([{"seed": 0}, {"seed": 1}], agent, num_rollouts=1)
    finally:
        agent.close()


def test_chat_episodes_are_text_only_and_retokenized(base_url: str) -> None:
    batch = play(base_url, "chat")
    assert not batch.failed, batch.failed[0].error
    for episode in batch.all_episodes:
        for step in episode.steps:
            assert step.token_source == "retokenized"
            segment, start, end = step.token_span
            ids = episode.segments[segment].token_ids.tolist()[start:end]
            assert ids and episode.segments[segment].agent_mask.tolist()[start:end] == [1] * len(
                ids
            )
        assert episode.segments[0].logprobs is None  # no logprobs came back


def test_token_in_completions_are_refused_by_the_server(base_url: str) -> None:
    batch = play(base_url, "completions")
    assert len(batch.failed) == 2
    assert "HTTP 500" in batch.failed[0].error
