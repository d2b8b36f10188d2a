"""Llama-3 JSON tool calls are read as vLLM's llama3_json parser reads them, and a
Llama-3.2 session with tool calls stays one segment."""

from __future__ import annotations

import json
from contextlib import closing
from typing import Any

import openai
import pytest

import agentsgym
from agentsgym_gateway import ModelGateway
from agentsgym_gateway.episodes import episode_from_calls
from agentsgym_gateway.tool_parsing import (
    parse_hermes,
    parse_llama3_json,
    parser_for_template,
    resolve_tool_parser,
)
from agentsgym_serve.model_server import OpenAICompatServer, ScriptedPolicy
from gateway_fixtures import MODEL
from tokenizer_packs import load_pack, pack_path

LLAMA = "llama-3.2-instruct"
ADD_CALL = '{"name": "add", "parameters": {"a": 17, "b": 25}}'
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two integers.",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"],
            },
        },
    }
]


def test_llama3_json_calls_are_parsed_as_vllm_parses_them() -> None:
    content, (call,) = parse_llama3_json(ADD_CALL)
    assert content is None
    assert call["function"]["name"] == "add" and call["type"] == "function"
    assert json.loads(call["function"]["arguments"]) == {"a": 17, "b": 25}
    # after <|python_tag|>, several separated by ";", "arguments" read too
    text = '<|python_tag|>{"name": "a", "parameters": {}}; {"name": "b", "arguments": {"x": 1}}'
    content, calls = parse_llama3_json(text)
    assert content is None and [c["function"]["name"] for c in calls] == ["a", "b"]
    assert json.loads(calls[1]["function"]["arguments"]) == {"x": 1}


@pytest.mark.parametrize(
    "text",
    [
        "The sum is 42.",
        'I will call {"name": "add", "parameters": {}}',  # text first: not a call
        '{"name": "add", "parameters": {"a": 1}} and then words',  # words after
        '{"name": "add"}',  # no parameters
        '{"parameters": {"a": 1}}',  # no name
        '{"name": "add", "parameters": {"a": 1}',  # cut off
    ],
)
def test_a_reply_that_is_not_wholly_llama3_calls_stays_text(text: str) -> None:
    assert parse_llama3_json(text) == (text, [])


def test_the_parser_is_picked_by_the_chat_template() -> None:
    assert parser_for_template(load_pack(LLAMA).chat_template) == "llama3_json"
    assert parser_for_template(load_pack("qwen2.5-1.5b-instruct").chat_template) == "hermes"
    assert parser_for_template(load_pack("qwen3-4b").chat_template) == "hermes"
    assert resolve_tool_parser("hermes") == "hermes" and resolve_tool_parser(None) is None
    with pytest.raises(ValueError, match="chat_template"):
        resolve_tool_parser("auto")
    with pytest.raises(ValueError, match="no format"):
        resolve_tool_parser("auto", "{{ messages }}")
    with pytest.raises(ValueError, match="unknown tool_parser"):
        resolve_tool_parser("mistral")
    # each parser leaves the other's format alone
    assert parse_hermes(ADD_CALL) == (ADD_CALL, [])


def _calculator(messages: Any) -> str:
    return "The sum is 42." if messages[-1]["role"] == "tool" else ADD_CALL


def test_a_llama_session_with_tool_calls_round_trips_in_one_segment() -> None:
    tokenizer = load_pack(LLAMA)
    policy = ScriptedPolicy(_calculator, tokenizer=str(pack_path(LLAMA)))
    with (
        OpenAICompatServer(policy, models=[MODEL]) as server,
        ModelGateway(
            server.base_url, tool_parser="auto", chat_template=tokenizer.chat_template
        ) as gateway,
    ):
        session = gateway.open_session()
        client = openai.OpenAI(base_url=session.base_url, api_key=session.api_key)
        messages: list[dict[str, Any]] = [{"role": "user", "content": "What is 17 + 25?"}]
        first = client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS)
        (tool_call,) = first.choices[0].message.tool_calls
        arguments = json.loads(tool_call.function.arguments)
        messages.append(
            {"role": "assistant", "content": None, "tool_calls": [tool_call.model_dump()]}
        )
        messages.append(
            {"role": "tool", "tool_call_id": tool_call.id, "content": str(sum(arguments.values()))}
        )
        second = client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS)
        calls = gateway.close_session(session)
    assert first.choices[0].finish_reason == "tool_calls"
    assert first.choices[0].message.content is None
    assert tool_call.function.name == "add" and arguments == {"a": 17, "b": 25}
    assert second.choices[0].message.content == "The sum is 42."
    assert calls[0].text == ADD_CALL and calls[0].tool_calls[0]["function"]["name"] == "add"
    chat = agentsgym.runtime.ChatTokenizer(tokenizer)
    episode = episode_from_calls(
        calls, session_id="s", env_id="gateway/test", task_data={}, reward=1.0, chat=chat
    )
    assert episode.ok, episode.error
    assert len(episode.segments) == 1 and episode.metrics["new_segments"] == 0.0
    assert episode.metrics["sampled_token_share"] == 1.0
    (segment,) = episode.segments
    sampled = calls[0].completion_token_ids + calls[1].completion_token_ids
    assert [t for t, m in zip(segment.token_ids, segment.agent_mask) if m] == sampled


def test_the_tool_loop_env_on_the_llama_pack_reads_calls_with_its_templates_parser() -> None:
    tokenizer = load_pack(LLAMA)
    policy = ScriptedPolicy(_calculator, tokenizer=str(pack_path(LLAMA)))
    with OpenAICompatServer(policy, models=[MODEL]) as server:
        config = {"backend_url": server.base_url, "model": MODEL, "tool_parser": "auto"}
        env = agentsgym.make("gateway/OpenAIToolLoop-v0", tokenizer=tokenizer, env_config=config)
        with closing(env):
            batch = env.run_trial([{"a": 17, "b": 25}])
    (episode,) = batch.groups[0].trials[0]
    assert episode.ok, episode.error
    assert episode.final_reward == 1.0 and episode.num_turns == 2
    assert episode.steps[0].info["tool_calls"] == 1
    assert episode.metrics["segments"] == 1.0 and episode.metrics["sampled_token_share"] == 1.0
