"""Reading a reply's calls: what the model wrote, never an end it did not write; a call
that is not a JSON object is an error for the model, not a crash of the episode."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import agentsgym
from agentsgym import AgentAction, ScriptedAgent
from agentsgym_tools import ToolCallParser

PACKS = Path(__file__).resolve().parents[3].parent / "shared" / "tokenizers"


def _pack(name: str) -> object:
    folder = PACKS / name
    if not (folder / "tokenizer.json").exists():
        pytest.skip(f"tokenizer pack {name} not found at {folder} (../shared is absent)")
    return agentsgym.load_tokenizer(str(folder))


def test_a_reply_cut_at_the_length_limit_is_not_given_an_end() -> None:
    parser = ToolCallParser(agentsgym.load_tokenizer(agentsgym.DEFAULT_TOKENIZER))
    cut = AgentAction(text='<tool_call>\n{"name": "add", "argu', truncated=True)
    parsed = parser.parse(cut)
    assert parsed.error is not None and "<|im_end|>" not in parsed.error
    assert parser.parse(AgentAction(text=cut.text)).error == parsed.error


def test_llama_calls_close_at_the_end_of_turn_only_when_the_reply_ended() -> None:
    parser = ToolCallParser(_pack("llama-3.2-instruct"), eot_text="<|eot_id|>")
    text = '{"name": "add", "parameters": {"a": 1, "b": 2}}'
    ended = parser.parse(AgentAction(text=text))
    assert [c["function"] for c in ended.calls] == [{"name": "add", "arguments": {"a": 1, "b": 2}}]
    cut = parser.parse(AgentAction(text=text, truncated=True))
    assert cut.calls == []  # never completed with an end it lacked
    assert cut.error is not None and "<|eot_id|>" not in cut.error
    broken = parser.parse(AgentAction(text='{"name": "add", "parameters": {"a": 1,, "b": 2}}'))
    assert broken.error is not None and "<|eot_id|>" not in broken.error


@pytest.mark.parametrize("call", ["[1, 2]", '"add"', "3", "null"])
def test_a_call_that_is_not_a_json_object_is_answered_with_an_error(call: str) -> None:
    env = agentsgym.make("tools/Calculator-v0", tokenizer=agentsgym.DEFAULT_TOKENIZER)
    as_text = f"<tool_call>\n{call}\n</tool_call>"
    structured = AgentAction(text="", tool_calls=[json.loads(call)])
    for reply in (as_text, structured):
        agent = ScriptedAgent([reply, "\\boxed{7}"])
        episode = env.run_trial([{"a": 1, "b": 2, "c": 5}], agent).all_episodes[0]
        assert episode.ok, episode.error
        assert episode.messages[2]["content"].startswith(
            'Error: your tool call could not be read: a call is a JSON object {"name": ...'
        )
        assert episode.final_reward == 1.0
