"""Every call through the gateway carries the version of the weights that answered it:
a harness env's steps (and so its tokens) are versioned per call, as the loopback model
server's weight updates move the version between two calls of one program."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import openai

import agentsgym
from agentsgym_gateway.harness import HarnessEnv
from agentsgym_gateway.programs import ProgramOutcome, ProgramRun
from agentsgym_gateway.relay import StreamAssembler
from agentsgym_serve.model_server import OpenAICompatServer, ScriptedPolicy
from gateway_fixtures import MODEL, TOKENIZER

UNKNOWN = -1  # the padded batch's version of env tokens and of padding


class TwoCallsAcrossAnUpdate(HarnessEnv):
    """A program that asks twice; the server's weights move on between its calls (the
    second call streams, so the version comes from the stream's chunks)."""

    server: OpenAICompatServer

    def program(self, task_data: dict[str, Any]) -> Any:
        def run(run: ProgramRun) -> str:
            client = openai.OpenAI(base_url=run.base_url, api_key=run.api_key)
            messages: list[Any] = [{"role": "user", "content": "count"}]
            first = client.chat.completions.create(model=run.model, messages=messages)
            self.server.update_weights()  # what a trainer does between two calls
            messages += [
                {"role": "assistant", "content": first.choices[0].message.content},
                {"role": "user", "content": "again"},
            ]
            stream = client.chat.completions.create(model=run.model, messages=messages, stream=True)
            return "".join(chunk.choices[0].delta.content or "" for chunk in stream)

        return run

    def verify(self, task_data: dict[str, Any], workdir: Path, outcome: ProgramOutcome) -> float:
        return 1.0


def test_each_call_of_a_harness_episode_has_the_version_that_answered_it() -> None:
    policy = ScriptedPolicy(["one", "two"], tokenizer=TOKENIZER)
    with OpenAICompatServer(policy, models=[MODEL]) as server:
        env = TwoCallsAcrossAnUpdate(
            agentsgym.load_tokenizer(TOKENIZER), {"backend_url": server.base_url, "model": MODEL}
        )
        env.server = server
        try:
            batch = env.run_trial([{"q": 1}])
        finally:
            env.close()
    (episode,) = batch.all_episodes
    assert episode.ok, episode.error
    assert [step.policy_version for step in episode.steps] == [0, 1]
    assert (episode.min_policy_version, episode.max_policy_version) == (0, 1)
    # per token: each call's sampled tokens have its version, env tokens none
    (segment,) = episode.segments
    (row,) = batch.padded_policy_versions
    for step in episode.steps:
        _, start, end = step.token_span
        assert set(row[start:end]) == {step.policy_version}
    agent = segment.agent_mask.tolist()
    assert {v for v, a in zip(row, agent) if not a} == {UNKNOWN}


def _chunk(ids: list[int], version: int | None, finish: str | None = None) -> dict[str, Any]:
    chunk: dict[str, Any] = {
        "id": "c",
        "choices": [{"index": 0, "delta": {"content": "x"}, "token_ids": ids}],
    }
    chunk["choices"][0]["finish_reason"] = finish
    if version is not None:
        chunk["policy_version"] = version
    return chunk


def test_a_stream_whose_chunks_came_from_two_versions_gives_a_version_per_token() -> None:
    """An engine updated in place mid-answer: the chunks before the update carry the old
    version, those after it the new one; the call's version is the oldest."""
    assembler = StreamAssembler("chat")
    for chunk in (_chunk([5, 6], 3), _chunk([7], 4), _chunk([8], 4, "stop")):
        assembler.feed(chunk)
    assert assembler.token_versions() == [3, 3, 4, 4]
    assert assembler.response()["policy_version"] == 3
    # one version throughout, or a chunk that says none: no per-token versions
    steady = StreamAssembler("chat")
    for chunk in (_chunk([5], 3), _chunk([6], 3, "stop")):
        steady.feed(chunk)
    assert steady.token_versions() is None and steady.response()["policy_version"] == 3
    partial = StreamAssembler("chat")
    for chunk in (_chunk([5], 3), _chunk([6], None, "stop")):
        partial.feed(chunk)
    assert partial.token_versions() is None
