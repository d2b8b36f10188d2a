"""The gateway records each call's exact ids and hands the program the backend's answer."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from gateway_fixtures import MODEL, gateway_over

MESSAGES = [{"role": "user", "content": "Say hello."}]
VOLATILE = ("id", "created")


def _stable(body: dict) -> dict:
    return {k: v for k, v in body.items() if k not in VOLATILE}


def test_a_chat_call_is_recorded_with_the_ids_the_backend_conditioned_on() -> None:
    with gateway_over(["hello there"]) as (gateway, server):
        session = gateway.open_session()
        client = openai.OpenAI(base_url=session.base_url, api_key=session.api_key)
        answer = client.chat.completions.create(model=MODEL, messages=MESSAGES)
        direct = httpx.post(
            f"{server.base_url}/chat/completions",
            json={"model": MODEL, "messages": MESSAGES, "return_token_ids": True},
        ).json()
        calls = gateway.close_session(session)
    assert answer.choices[0].message.content == "hello there"
    (call,) = calls
    assert call.token_source == "server"
    assert call.prompt_token_ids == direct["prompt_token_ids"]
    assert call.completion_token_ids == direct["choices"][0]["token_ids"]
    assert call.logprobs == [0.0] * len(call.completion_token_ids)
    assert call.messages == MESSAGES and call.text == "hello there"


def test_the_program_receives_what_the_backend_would_have_sent() -> None:
    with gateway_over(["hello there"]) as (gateway, server):
        session = gateway.open_session()
        headers = {"Authorization": f"Bearer {session.api_key}"}
        for extra in ({}, {"return_token_ids": True, "logprobs": True}):
            body = {"model": MODEL, "messages": MESSAGES, **extra}
            through = httpx.post(f"{session.base_url}/chat/completions", json=body, headers=headers)
            direct = httpx.post(f"{server.base_url}/chat/completions", json=body)
            assert _stable(through.json()) == _stable(direct.json())
            # written as the backend writes JSON: compact, the backend's key order
            stable_bytes = json.dumps(through.json(), separators=(",", ":")).encode()
            assert through.content == stable_bytes
            assert list(through.json()) == list(direct.json())


def test_a_streaming_program_gets_the_same_answer_as_events() -> None:
    with gateway_over(["streamed words"]) as (gateway, _):
        session = gateway.open_session()
        client = openai.OpenAI(base_url=session.base_url, api_key=session.api_key)
        stream = client.chat.completions.create(
            model=MODEL, messages=MESSAGES, stream=True, stream_options={"include_usage": True}
        )
        chunks = list(stream)
        calls = gateway.close_session(session)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "streamed words"
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0
    assert calls[0].completion_token_ids


def test_completions_are_recorded_with_their_ids() -> None:
    with gateway_over(["42"]) as (gateway, _):
        session = gateway.open_session()
        client = openai.OpenAI(base_url=session.prefixed_base_url, api_key="unused")
        answer = client.completions.create(model=MODEL, prompt="6 x 7 =")
        (call,) = gateway.close_session(session)
    assert answer.choices[0].text == "42"
    assert call.endpoint == "completions" and call.prompt == "6 x 7 ="
    assert call.token_source == "server" and call.prompt_token_ids


def test_a_backend_without_token_ids_gives_retokenized_records() -> None:
    with gateway_over(["plain"], vllm=False) as (gateway, _):
        session = gateway.open_session()
        client = openai.OpenAI(base_url=session.base_url, api_key=session.api_key)
        for _ in range(2):
            answer = client.chat.completions.create(model=MODEL, messages=MESSAGES)
            assert answer.choices[0].message.content == "plain"
        calls = gateway.close_session(session)
    assert [c.token_source for c in calls] == ["retokenized", "retokenized"]
    assert calls[0].text == "plain" and calls[0].completion_token_ids is None


def test_keys_open_only_their_own_session() -> None:
    with gateway_over(["a"]) as (gateway, _):
        first, second = gateway.open_session(), gateway.open_session()
        assert first.api_key != second.api_key and len(first.api_key) > 40
        url = f"{first.base_url}/chat/completions"
        body = {"model": MODEL, "messages": MESSAGES}
        assert httpx.post(url, json=body).status_code == 401
        assert (
            httpx.post(url, json=body, headers={"Authorization": "Bearer guess"}).status_code == 401
        )
        # a key is never taken from a query string (URLs reach logs)
        assert httpx.post(url, params={"key": first.api_key}, json=body).status_code == 401
        ok = httpx.post(url, json=body, headers={"Authorization": f"Bearer {first.api_key}"})
        assert ok.status_code == 200
        assert gateway.session(second).calls == []
        gateway.close_session(first)
        late = httpx.post(url, json=body, headers={"Authorization": f"Bearer {first.api_key}"})
        assert late.status_code == 401
        assert "OPENAI_API_KEY" in late.json()["error"]["message"]


def test_request_bodies_are_bounded() -> None:
    with gateway_over(["a"], max_body_bytes=1000) as (gateway, _):
        session = gateway.open_session()
        body = {"model": MODEL, "messages": [{"role": "user", "content": "x" * 2000}]}
        headers = {"Authorization": f"Bearer {session.api_key}"}
        answer = httpx.post(f"{session.base_url}/chat/completions", json=body, headers=headers)
        assert answer.status_code == 413
        assert "max_body_bytes" in answer.json()["error"]["message"]
        assert gateway.close_session(session) == []


def test_keys_and_backend_secrets_reach_no_record_or_log(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("DEBUG")
    secret = "sk-backend-secret-123456"
    with gateway_over(["a"], backend_api_key=secret) as (gateway, _):
        session = gateway.open_session()
        client = openai.OpenAI(base_url=session.prefixed_base_url, api_key="x")
        client.chat.completions.create(model=MODEL, messages=MESSAGES)
        calls = gateway.close_session(session)
    assert calls[0].ok
    # the gateway's own logs and its backend client's (the program's client logs its URL)
    ours = ("agentsgym", "uvicorn", "httpx", "httpcore")
    logged = "".join(r.getMessage() for r in caplog.records if r.name.split(".")[0] in ours)
    written = json.dumps([c.to_dict() for c in calls]) + logged + repr(session)
    assert secret not in written and session.api_key not in written


def test_the_responses_api_is_served_over_chat() -> None:
    with gateway_over(["a short answer"]) as (gateway, _):
        session = gateway.open_session()
        client = openai.OpenAI(base_url=session.base_url, api_key=session.api_key)
        response = client.responses.create(
            model=MODEL, instructions="Be brief.", input="What is up?"
        )
        (call,) = gateway.close_session(session)
    assert response.output_text == "a short answer"
    assert call.endpoint == "responses" and call.token_source == "server"
    assert call.messages == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is up?"},
    ]


def test_hermes_tool_calls_are_parsed_for_the_program_as_vllm_would() -> None:
    reply = '<tool_call>{"name": "add", "arguments": {"a": 2, "b": 3}}</tool_call>'
    tools = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]
    with gateway_over([reply], tool_parser="hermes") as (gateway, _):
        session = gateway.open_session()
        client = openai.OpenAI(base_url=session.base_url, api_key=session.api_key)
        answer = client.chat.completions.create(model=MODEL, messages=MESSAGES, tools=tools)
        (call,) = gateway.close_session(session)
    (tool_call,) = answer.choices[0].message.tool_calls
    assert tool_call.function.name == "add"
    assert json.loads(tool_call.function.arguments) == {"a": 2, "b": 3}
    assert answer.choices[0].finish_reason == "tool_calls"
    assert call.text == reply and call.tool_calls[0]["function"]["name"] == "add"


def test_a_streamed_responses_call_gets_the_responses_events() -> None:
    reply = '<tool_call>{"name": "add", "arguments": {"a": 2, "b": 3}}</tool_call>'
    tools = [{"type": "function", "name": "add", "parameters": {"type": "object"}}]
    with gateway_over(["plain words", reply], tool_parser="hermes") as (gateway, _):
        session = gateway.open_session()
        client = openai.OpenAI(base_url=session.base_url, api_key=session.api_key)
        events = list(client.responses.create(model=MODEL, input="hi", stream=True))
        calls = list(client.responses.create(model=MODEL, input="add", tools=tools, stream=True))
        gateway.close_session(session)
    kinds = [e.type for e in events]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert deltas == "plain words" == events[-1].response.output_text
    (done,) = [e for e in calls if e.type == "response.function_call_arguments.done"]
    assert json.loads(done.arguments) == {"a": 2, "b": 3}
    assert calls[-1].response.output[0].name == "add"
