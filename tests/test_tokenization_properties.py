"""The linear-cost EpisodeTokenizer gives exactly the full-render reference's tokens.

Generated episodes on the three real tokenizer packs (Qwen2.5, Llama-3.2, Qwen3):
system prompts or none; contents with unicode and combining characters, leading and
trailing whitespace and newlines, special-token text, think blocks, empty replies;
text-only agents, token-in agents with non-canonical ids (some cut at the length
limit, some returning no token at all), and chat servers reporting the prompt ids
they conditioned on (the right ones or not). The real tokenizer and the reference
(tests/reference_tokenization.py) are driven with the same turns and must agree on
every segment's ids, mask and logprobs and on where every action landed.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from agentsgym.tokenization import ChatTokenizer, EpisodeTokenizer
from agentsgym.types import AgentAction, Message
from reference_tokenization import ReferenceEpisodeTokenizer
from tokenizer_packs import LLAMA_KWARGS, load_pack

PACKS = {
    "qwen2.5": ("qwen2.5-1.5b-instruct", {}),
    "llama-3.2": ("llama-3.2-instruct", LLAMA_KWARGS),
    "qwen3": ("qwen3-4b", {}),
}
_CHATS: dict[str, ChatTokenizer] = {}


def chat_for(name: str) -> ChatTokenizer:
    if name not in _CHATS:
        folder, kwargs = PACKS[name]
        _CHATS[name] = ChatTokenizer(load_pack(folder), kwargs)
    return _CHATS[name]


# ------------------------------------------------------------------ contents
WORDS = st.text(
    alphabet=st.sampled_from(list("abcdefghijklmnopqrstuvwxyz ABCXYZ0123456789.,!?:;'\"()[]-_/")),
    max_size=30,
)
UNICODE = st.text(
    alphabet=st.characters(categories=("L", "M", "N", "P", "S", "Zs"), exclude_characters="\x00"),
    max_size=20,
)
COMBINING = st.builds(
    lambda base, marks: "".join(b + m for b, m in zip(base, marks)),
    st.text(alphabet="aeiouxyz", min_size=1, max_size=6),
    st.lists(st.sampled_from(["\u0301", "\u0308", "\u0327", "\u20d7", ""]), min_size=6, max_size=6),
)
SPECIAL = st.sampled_from(
    [
        "<|im_start|>",
        "<|im_end|>",
        "<|im_start|>user\n",
        "<|eot_id|>",
        "<|start_header_id|>assistant<|end_header_id|>\n\n",
        "<|begin_of_text|>",
        "<|endoftext|>",
        "<think>",
        "</think>",
    ]
)
PAD = st.sampled_from(["", " ", "  ", "\n", "\n\n", " \n", "\t", "\n \n"])
CORE = st.one_of(
    WORDS,
    UNICODE,
    COMBINING,
    st.builds(lambda a, s, b: a + s + b, WORDS, SPECIAL, WORDS),
    st.just(""),
)
CONTENT = st.builds(lambda left, core, right: left + core + right, PAD, CORE, PAD)
REPLY = st.one_of(
    CONTENT,
    st.builds(lambda t, a: f"<think>\n{t}\n</think>\n\n{a}", CONTENT, CONTENT),
    st.builds(lambda p, a: f"{p}<think>{a}</think>", PAD, WORDS),
)
ENV_TURN = st.lists(
    st.tuples(st.sampled_from(["user", "user", "user", "system"]), CONTENT), min_size=1, max_size=2
)
AGENTS = st.sampled_from(["text", "sampled", "canonical-sampled", "server", "server-other"])


@dataclass
class Script:
    pack: str
    system: str | None
    first: str
    turns: list[tuple[str, list[tuple[str, str]] | None]]
    agent: str
    seed: int


SCRIPTS = st.builds(
    Script,
    pack=st.sampled_from(list(PACKS)),
    system=st.one_of(st.none(), CONTENT),
    first=CONTENT,
    turns=st.lists(st.tuples(REPLY, ENV_TURN), min_size=1, max_size=5).flatmap(
        lambda turns: st.tuples(REPLY).map(lambda last: [*turns, (last[0], None)])
    ),
    agent=AGENTS,
    seed=st.integers(0, 2**16),
)


# ------------------------------------------------------------------ agents
def action_for(
    kind: str, reply: str, chat: ChatTokenizer, messages: list[Message], rng: random.Random
) -> tuple[AgentAction, bool]:
    """(the action, whether the agent is token-in)."""
    eot = chat.eot_ids
    if kind == "text":
        return AgentAction(text=reply, truncated=rng.random() < 0.1), False
    if kind in ("sampled", "canonical-sampled"):
        if kind == "sampled":  # non-canonical: one character at a time
            ids = [i for ch in reply for i in chat.encode_model_text(ch)]
        else:
            ids = chat.encode_model_text(reply)
        roll, truncated = rng.random(), False
        if roll < 0.1:
            ids, truncated = [], roll < 0.05  # nothing came back; or cut before any token
        elif roll < 0.8:
            ids = ids + eot  # else cut at the length limit: no end-of-turn
        logprobs = [-rng.random() for _ in ids]
        action = AgentAction(text=reply, token_ids=ids, logprobs=logprobs, truncated=truncated)
        return action, True
    prompt = chat.encode_prompt(messages)
    if kind == "server-other" and prompt and rng.random() < 0.5:
        prompt = prompt[:-1] + [prompt[-1] + 1]
    ids = chat.encode_model_text(reply) + eot
    return AgentAction(
        text=reply, token_ids=ids, logprobs=[-0.25] * len(ids), prompt_token_ids=prompt
    ), False


def play(tokens: Any, script: Script, chat: ChatTokenizer) -> tuple[list[Any], list[Message]]:
    rng = random.Random(script.seed)
    messages: list[Message] = []
    if script.system is not None:
        messages.append(Message(role="system", content=script.system))
    messages.append(Message(role="user", content=script.first))
    tokens.add_env_turn(messages, list(messages))
    spans = []
    for reply, env_turn in script.turns:
        action, token_in = action_for(script.agent, reply, chat, messages, rng)
        spans.append(tokens.add_agent_turn(action, token_in=token_in))
        messages.append(Message(role="assistant", content=reply))
        if env_turn is None:
            tokens.finish(messages)
            break
        new = [Message(role=role, content=content) for role, content in env_turn]
        messages.extend(new)
        tokens.add_env_turn(messages, new)
    return spans, messages


def assert_same(script: Script) -> EpisodeTokenizer:
    chat = chat_for(script.pack)
    fast = EpisodeTokenizer(chat)
    assert fast.incremental, f"{script.pack}: the cheap path should be on for this template"
    reference = ReferenceEpisodeTokenizer(chat)
    fast_spans, messages = play(fast, script, chat)
    ref_spans, _ = play(reference, script, chat)
    where = f"{script.pack}, agent {script.agent}, messages {messages!r}"
    assert len(fast.segments) == len(reference.segments), where
    for mine, theirs in zip(fast.segments, reference.segments):
        assert mine.token_ids == theirs.token_ids, where
        assert mine.agent_mask == theirs.agent_mask, where
        assert _same_floats(mine.logprobs, theirs.logprobs), where
    assert fast.has_logprobs == reference.has_logprobs
    for mine, theirs in zip(fast_spans, ref_spans):
        assert (mine.segment, mine.positions, mine.token_source) == (
            theirs.segment,
            theirs.positions,
            theirs.token_source,
        ), where
    return fast


def _same_floats(a: list[float], b: list[float]) -> bool:
    return len(a) == len(b) and all(
        x == y or (math.isnan(x) and math.isnan(y)) for x, y in zip(a, b)
    )


@pytest.fixture(scope="module", autouse=True)
def _packs_present() -> None:
    for name in PACKS:
        chat_for(name)  # skips the module when ../shared/tokenizers is absent


@settings(
    max_examples=300,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(SCRIPTS)
def test_incremental_tokens_equal_the_full_render_reference(script: Script) -> None:
    # A known disagreement, kept by the strict xfail tests below: see KNOWN_DISAGREEMENTS.
    assume(not _text_reply_with_special_text(script))
    assert_same(script)


def _text_reply_with_special_text(script: Script) -> bool:
    specials = ("<|im_start|>", "<|im_end|>", "<|eot_id|>", "<|start_header_id|>", "<|endoftext|>")
    return script.agent == "text" and any(
        special in reply for reply, _ in script.turns for special in specials
    )


KNOWN_DISAGREEMENTS = [
    Script(
        pack="qwen3",
        system=None,
        first="",
        turns=[
            ("<think>\n\n</think>\n\n<|im_start|>", [("user", "")]),
            ("<|im_start|>\n", [("user", "")]),
            ("<think></think>", None),
        ],
        agent="text",
        seed=1,
    ),
    Script(
        pack="llama-3.2",
        system=None,
        first="\n\n:<|eot_id|> ",
        turns=[
            ("\t", [("system", "")]),
            ("<|eot_id|>", [("user", " ")]),
            ("\n<think></think>", None),
        ],
        agent="text",
        seed=0,
    ),
]
"""Episodes where a reply given as text (no token ids) holds special-token text and a
later turn renders the whole conversation: the reference starts a new segment there,
the incremental stream does not. Found by the property test above (before it drew from
a fixed seed); the same on the code of 2026-11-25. Open: which of the two follows what
a server that renders the template would condition on."""


@pytest.mark.xfail(strict=True, reason="known: see KNOWN_DISAGREEMENTS")
@pytest.mark.parametrize("script", KNOWN_DISAGREEMENTS, ids=["qwen3", "llama-3.2"])
def test_text_replies_with_special_text_split_as_the_reference(script: Script) -> None:
    assert_same(script)


@pytest.mark.parametrize("pack", list(PACKS))
def test_a_plain_episode_never_renders_the_whole_conversation(pack: str) -> None:
    script = Script(
        pack=pack,
        system="Play the game.",
        first="Guess my number.",
        turns=[(f"[{n}]", [("user", "Higher.")]) for n in range(20)] + [("[99]", None)],
        agent="text",
        seed=0,
    )
    tokens = assert_same(script)
    assert tokens.whole_renders == 0 and len(tokens.segments) == 1


@pytest.mark.parametrize(
    ("pack", "reply", "why"),
    [
        ("qwen3", "<think>\nhm\n</think>\n\n[3]", "Qwen3 drops earlier think blocks"),
        ("llama-3.2", " [3]\n", "Llama-3 trims assistant content"),
        ("qwen2.5", "\n\n[3]", "a leading newline merges with the generation prompt's"),
    ],
)
def test_what_the_template_renders_differently_splits_exactly_as_the_reference(
    pack: str, reply: str, why: str
) -> None:
    script = Script(
        pack=pack,
        system=None,
        first="Count down from 3.",
        turns=[(reply, [("user", "Go on.")]), ("[2]", [("user", "Go on.")]), ("[1]", None)],
        agent="text",
        seed=0,
    )
    tokens = assert_same(script)
    assert len(tokens.segments) == 2, why


def test_a_date_that_changes_mid_episode_splits_as_the_reference(monkeypatch) -> None:
    """Llama-3.2's system header holds today's date from strftime_now when no
    date_string is given; the date changing between two turns starts a new view."""
    from transformers.utils.chat_template_utils import _compile_jinja_template

    tokenizer = load_pack("llama-3.2-instruct")
    environment = _compile_jinja_template(tokenizer.chat_template).environment
    today = ["24 Nov 2026"]
    monkeypatch.setitem(environment.globals, "strftime_now", lambda fmt: today[0])
    chat = ChatTokenizer(tokenizer)
    results = []
    for tokens in (EpisodeTokenizer(chat), ReferenceEpisodeTokenizer(chat)):
        today[0] = "24 Nov 2026"
        messages = [Message(role="user", content="Count down from 3.")]
        tokens.add_env_turn(messages, list(messages))
        for step, reply in enumerate(["[3]", "[2]", "[1]"]):
            tokens.add_agent_turn(AgentAction(text=reply))
            messages.append(Message(role="assistant", content=reply))
            if step == 1:
                today[0] = "25 Nov 2026"  # midnight passed while the model answered
            new = [Message(role="user", content="Go on.")]
            messages.extend(new)
            tokens.add_env_turn(messages, new)
        results.append([(s.token_ids, s.agent_mask) for s in tokens.segments])
    assert results[0] == results[1]
    assert len(results[0]) == 2
    assert "25 Nov 2026" in tokenizer.decode(results[0][1][0])


def test_special_token_text_equal_to_a_template_token_stays_text() -> None:
    """An observation that is exactly "<|im_start|>" (the template's own token) is
    found by placeholder, not by searching the text, so it stays plain text."""
    chat = chat_for("qwen2.5")
    tokens = EpisodeTokenizer(chat)
    messages = [Message(role="user", content="<|im_start|>")]
    tokens.add_env_turn(messages, list(messages))
    tokens.add_agent_turn(AgentAction(text="ok"))
    messages.append(Message(role="assistant", content="ok"))
    new = [Message(role="user", content="<|im_start|>")]
    messages.extend(new)
    tokens.add_env_turn(messages, new)
    ids = tokens.current.token_ids
    start_id = chat.tokenizer.convert_tokens_to_ids("<|im_start|>")
    # the template's own <|im_start|>: system, user, assistant, user, assistant
    assert ids.count(start_id) == 5
    plain = chat.encode_model_text("<|im_start|>")
    assert sum(ids[i : i + len(plain)] == plain for i in range(len(ids))) == 2
