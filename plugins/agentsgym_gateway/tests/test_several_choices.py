"""A request for n choices: a record per choice, each sampled token an agent token once;
a backend that does not sample n choices is a clear error."""

from __future__ import annotations

import json
import secrets
from typing import Any

import httpx
import openai
import pytest

import agentsgym
from agentsgym_gateway import ModelGateway
from agentsgym_gateway.agent_backend import AgentBackend
from agentsgym_gateway.backend import BackendAnswer
from agentsgym_gateway.episodes import episode_from_calls
from gateway_fixtures import MODEL, TOKENIZER, FakeBackend, gateway_over

MESSAGES = [{"role": "user", "content": "Name a colour."}]


class _SeveralChoices(FakeBackend):
    """A backend that samples ``n`` choices as vLLM does (scripted texts; ids and
    logprobs from the tiny template), with the prompt ids once for all of them."""

    base_url = "several://"

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts
        self.chat = agentsgym.runtime.ChatTokenizer(agentsgym.load_tokenizer(TOKENIZER))

    async def post(self, path: str, body: bytes, context: Any = None) -> BackendAnswer:
        request = json.loads(body)
        prompt = self.chat.encode_prompt(request["messages"])
        choices = []
        for index in range(request.get("n") or 1):
            text = self.texts[index % len(self.texts)]
            ids = self.chat.encode_model_text(text) + list(self.chat.eot_ids)
            logprobs = {"content": [{"token": "", "logprob": -0.5} for _ in ids]}
            message = {"role": "assistant", "content": text}
            choice = {"index": index, "message": message, "logprobs": logprobs}
            choices.append({**choice, "finish_reason": "stop", "token_ids": ids})
        answer = {
            "id": f"chatcmpl-{secrets.token_hex(4)}",
            "object": "chat.completion",
            "created": 0,
            "model": request["model"],
            "choices": choices,
            "usage": None,
            "prompt_token_ids": prompt,
        }
        return BackendAnswer(200, json.dumps(answer).encode(), "application/json")


def test_each_choice_is_its_own_record_and_the_continued_one_continues_its_row() -> None:
    with ModelGateway(backend=_SeveralChoices(["Red.", "Blue."])) as gateway:
        session = gateway.open_session()
        client = openai.OpenAI(base_url=session.base_url, api_key=session.api_key)
        answer = client.chat.completions.create(model=MODEL, messages=MESSAGES, n=2)
        picked = answer.choices[1].message.content  # the program goes on with the second
        follow_up = [
            *MESSAGES,
            {"role": "assistant", "content": picked},
            {"role": "user", "content": "Another?"},
        ]
        client.chat.completions.create(model=MODEL, messages=follow_up)
        calls = gateway.close_session(session)
    assert [c.message.content for c in answer.choices] == ["Red.", "Blue."]
    assert [c.text for c in calls] == ["Red.", "Blue.", "Red."]
    assert calls[0].prompt_token_ids == calls[1].prompt_token_ids  # one prompt, two samples
    chat = agentsgym.runtime.ChatTokenizer(agentsgym.load_tokenizer(TOKENIZER))
    episode = episode_from_calls(
        calls, session_id="s", env_id="gateway/test", task_data={}, reward=1.0, chat=chat
    )
    assert episode.ok, episode.error
    # a row per choice; the call after them continues the row of the choice it saw
    assert len(episode.segments) == 2
    assert [s.token_span[0] for s in episode.steps] == [0, 1, 1]
    agent_tokens = [
        [t for t, m in zip(segment.token_ids, segment.agent_mask) if m]
        for segment in episode.segments
    ]
    assert agent_tokens == [
        calls[0].completion_token_ids,
        calls[1].completion_token_ids + calls[2].completion_token_ids,
    ]  # every sampled token is an agent token exactly once
    second_row = episode.segments[1].token_ids.tolist()
    assert second_row[: len(calls[1].prompt_token_ids)] == calls[1].prompt_token_ids


def test_a_streamed_request_for_several_choices_gets_every_choice() -> None:
    with ModelGateway(backend=_SeveralChoices(["Red.", "Blue."])) as gateway:
        session = gateway.open_session()
        client = openai.OpenAI(base_url=session.base_url, api_key=session.api_key)
        chunks = list(
            client.chat.completions.create(model=MODEL, messages=MESSAGES, n=2, stream=True)
        )
        calls = gateway.close_session(session)
    texts = {0: "", 1: ""}
    for chunk in chunks:
        for choice in chunk.choices:
            texts[choice.index] += choice.delta.content or ""
    assert texts == {0: "Red.", 1: "Blue."}
    assert [c.text for c in calls] == ["Red.", "Blue."]


def test_a_backend_that_ignores_n_is_a_clear_error() -> None:
    with gateway_over(["only one"]) as (gateway, _):
        session = gateway.open_session()
        client = openai.OpenAI(base_url=session.base_url, api_key=session.api_key)
        with pytest.raises(openai.BadRequestError, match="n=2") as refused:
            client.chat.completions.create(model=MODEL, messages=MESSAGES, n=2)
        (call,) = gateway.close_session(session)
    assert "one call per sample" in str(refused.value)
    assert not call.ok and call.status == 400 and "n=2" in (call.error or "")


def test_an_agent_backend_refuses_several_choices() -> None:
    with ModelGateway(backend=AgentBackend(agent=None, chat=None)) as gateway:
        session = gateway.open_session()
        body = {"model": MODEL, "messages": MESSAGES, "n": 3}
        headers = {"Authorization": f"Bearer {session.api_key}"}
        answer = httpx.post(f"{session.base_url}/chat/completions", json=body, headers=headers)
        gateway.close_session(session)
    assert answer.status_code == 400
    assert "one choice per call" in answer.json()["error"]["message"]
