"""--chat-template: the model's own template, TRL's training variant, or a file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import agentsgym
from agentsgym.errors import TemplateMismatchError
from agentsgym.tokenization import ChatTokenizer
from agentsgym_trl.chat_templates import apply_chat_template_choice, renders_alike
from trainer_agents import THINK_STRIPPING_TEMPLATE, with_template

trl_templates = pytest.importorskip("trl.chat_template_utils")

TINY = "agentsgym/tiny-chatml"
HISTORY = [
    {"role": "user", "content": "What is 2+2?"},
    {"role": "assistant", "content": "<think>\nAdd them.\n</think>\n\n4."},
    {"role": "user", "content": "And 3+3?"},
]


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return agentsgym.load_tokenizer(TINY)


def test_qwen3_gets_trls_training_template_and_stops_splitting(qwen3: Any) -> None:
    """The pack is an older Qwen3 revision than the one TRL knows by its text; it
    renders like it, so TRL's qwen3 training template applies: earlier think blocks
    are kept, and the first prompt is the one the model's own template gives."""
    assert not ChatTokenizer(qwen3).is_prefix_preserving()
    assert qwen3.chat_template != trl_templates.qwen3_chat_template
    training, how = apply_chat_template_choice(qwen3, "training")
    assert "qwen3_training" in how
    assert training is not qwen3 and qwen3.chat_template != training.chat_template
    assert training.chat_template == trl_templates.qwen3_training_chat_template
    assert ChatTokenizer(training).is_prefix_preserving()
    later = training.apply_chat_template(HISTORY, tokenize=False, add_generation_prompt=True)
    assert "Add them." in later  # kept; the model's own template drops it
    own = qwen3.apply_chat_template(HISTORY, tokenize=False, add_generation_prompt=True)
    assert "Add them." not in own
    first = HISTORY[:1]
    assert training.apply_chat_template(
        first, tokenize=False, add_generation_prompt=True
    ) == qwen3.apply_chat_template(first, tokenize=False, add_generation_prompt=True)
    assert training("x")["input_ids"] == qwen3("x")["input_ids"]  # one vocabulary


def test_a_template_trl_knows_by_its_text(tokenizer: Any) -> None:
    known = with_template(tokenizer, trl_templates.qwen3_chat_template)
    training, how = apply_chat_template_choice(known, "training")
    assert how == "TRL's training variant of this template"
    assert training.chat_template == trl_templates.qwen3_training_chat_template
    assert renders_alike(known, known.chat_template, trl_templates.qwen3_chat_template)
    assert not renders_alike(known, known.chat_template, THINK_STRIPPING_TEMPLATE)


@pytest.mark.parametrize("pack", ["qwen25", "llama3", "tiny"])
def test_prefix_preserving_templates_are_kept(pack: str, request: Any, tokenizer: Any) -> None:
    tok = tokenizer if pack == "tiny" else request.getfixturevalue(pack)
    before = tok.chat_template
    kept, how = apply_chat_template_choice(tok, "training")
    assert kept is tok and tok.chat_template == before
    assert "already prefix-preserving" in how
    assert apply_chat_template_choice(tok, "model") == (tok, "the model's own template")


def test_unknown_splitting_templates_and_bad_paths_are_errors_that_say_what_to_do(
    tokenizer: Any, tmp_path: Path
) -> None:
    splitting = with_template(tokenizer, THINK_STRIPPING_TEMPLATE)
    with pytest.raises(TemplateMismatchError, match="--chat-template PATH.jinja"):
        apply_chat_template_choice(splitting, "training")
    with pytest.raises(TemplateMismatchError, match="not 'model', 'training'"):
        apply_chat_template_choice(tokenizer, str(tmp_path / "missing.jinja"))
    path = tmp_path / "keep.jinja"
    path.write_text(trl_templates.qwen3_training_chat_template, encoding="utf-8")
    chosen, how = apply_chat_template_choice(splitting, str(path))
    assert chosen.chat_template == trl_templates.qwen3_training_chat_template
    assert str(path) in how and splitting.chat_template == THINK_STRIPPING_TEMPLATE
