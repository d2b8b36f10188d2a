"""Which chat template a training run renders with: the model's own, or a training one.

Some chat templates are not prefix-preserving: Qwen3's and DeepSeek-R1's drop the
think blocks of earlier assistant turns when the conversation goes on, so the prompt
of turn ``k + 1`` is not the prompt of turn ``k`` plus what the model said. The
runner then splits the episode into one segment per view the model really saw
(``on_template_mismatch="split"``). That is exact, but each view re-reads the whole
history, and a trainer must train every view.

TRL ships *training* variants of those templates
(:func:`trl.chat_template_utils.get_training_chat_template`, e.g.
``qwen3_training.jinja``): the same rendering, except that earlier turns keep what
the model wrote (and ``{% generation %}`` markers are added). Rendering with one for
generation *and* training (``--chat-template training``) keeps every episode in one
segment: the model is conditioned on its own earlier think blocks, and every token is
trained once.

Choices (:func:`apply_chat_template_choice`):

* ``"model"`` (default): the tokenizer's own template, untouched;
* ``"training"``: a template that is already prefix-preserving is kept as is
  (Qwen2.5, Llama 3); otherwise TRL's training variant of it. TRL recognises
  templates by their exact text; a template that is a different revision of a known
  one (the same rendering of plain text conversations, e.g. an older Qwen3 release)
  is matched by rendering probe conversations with both. Anything else is an error
  naming what to do;
* a path to a ``.jinja`` file: that template.

A training template is checked with the runner's own probe (a think block in an
earlier turn); one that still re-renders it differently is used with a warning.
DeepSeek-R1 distills are such a case: their generation prompt pre-fills
``<think>\n``, which the recorded reply does not start with, so their episodes keep
splitting (into views that now show the earlier reasoning). The chosen template is set
on a copy of the tokenizer that the env renders with, the policy generates with and
the trainer trains with, and the saved model folder carries the template it was
trained with.
"""

from __future__ import annotations

import copy
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentsgym.errors import TemplateMismatchError, TrainerOptionError

if TYPE_CHECKING:
    from agentsgym.runtime import RolloutSource

logger = logging.getLogger(__name__)

MODEL = "model"
TRAINING = "training"

_THINK = "<think>\nLet me think.\n</think>\n\nThe answer is 4."
_PROBES: list[list[dict[str, str]]] = [
    [{"role": "user", "content": "What is 2+2?"}],
    [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "4."},
    ],
    [
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": _THINK},
        {"role": "user", "content": "And 3+3?"},
    ],
    [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "4."},
        {"role": "user", "content": "And 3+3?"},
        {"role": "assistant", "content": "<think>\nSix.\n</think>\n\n6."},
    ],
]


def _render(tokenizer: Any, template: str, messages: list[dict[str, str]], prompt: bool) -> str:
    return tokenizer.apply_chat_template(  # type: ignore[no-any-return]
        messages, chat_template=template, tokenize=False, add_generation_prompt=prompt
    )


def renders_alike(tokenizer: Any, first: str, second: str) -> bool:
    """Whether two templates render every probe conversation to the same text."""
    try:
        return all(
            _render(tokenizer, first, m, p) == _render(tokenizer, second, m, p)
            for m in _PROBES
            for p in (True, False)
        )
    except Exception:  # noqa: BLE001 - a template that cannot render a probe is not a match
        return False


def _known_pairs() -> list[tuple[str, str, str]]:
    """(name, original template, training template) of every pair TRL ships."""
    from trl import chat_template_utils as utils

    pairs = []
    for attr in sorted(dir(utils)):
        if not attr.endswith("_training_chat_template"):
            continue
        name = attr.removesuffix("_training_chat_template")
        original = getattr(utils, f"{name}_chat_template", None)
        training = getattr(utils, attr)
        if isinstance(original, str) and isinstance(training, str):
            pairs.append((name, original, training))
    return pairs


def _template_text(tokenizer: Any) -> str:
    template = getattr(tokenizer, "chat_template", None)
    if isinstance(template, dict):  # named variants: the default one renders chats
        template = template.get("default")
    if not isinstance(template, str):
        raise TemplateMismatchError(
            f"tokenizer {getattr(tokenizer, 'name_or_path', tokenizer)!r} has no chat "
            "template; agentsgym renders every turn with it"
        )
    return template


def is_prefix_preserving(tokenizer: Any, template: str) -> bool:
    """Whether ``template`` keeps earlier turns (think blocks included) as the model saw them."""
    from agentsgym.runtime import ChatTokenizer

    return ChatTokenizer(with_template(tokenizer, template)).is_prefix_preserving()


def with_template(tokenizer: Any, template: str) -> Any:
    """A shallow copy of ``tokenizer`` rendering with ``template``.

    It shares the vocabulary, the Rust tokenizer and its encode lock with the
    original, which keeps its own template: tokenizers are shared (the bundled one
    is cached per process), so none is changed in place.
    """
    copied = copy.copy(tokenizer)
    copied.chat_template = template
    return copied


def training_chat_template(tokenizer: Any) -> tuple[str, str]:
    """(template, how it was chosen) of TRL's training variant of the tokenizer's template.

    Raises :class:`~agentsgym.errors.TemplateMismatchError` when there is none and
    the tokenizer's own template is not prefix-preserving.
    """
    try:
        from trl.chat_template_utils import get_training_chat_template
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise TemplateMismatchError(
            "--chat-template training uses TRL's training templates: pip install trl "
            "(agentsgym-trl requires it)"
        ) from exc
    own = _template_text(tokenizer)
    if is_prefix_preserving(tokenizer, own):
        # TRL would still add {% generation %} markers, which agentsgym has no use for.
        return own, "the model's own template, which is already prefix-preserving"
    try:
        patched = get_training_chat_template(tokenizer)
        found = "TRL's training variant of this template"
    except ValueError:  # TRL knows templates by their exact text only
        patched, found = None, ""
        for name, original, training in _known_pairs():
            if renders_alike(tokenizer, own, original):
                patched = training
                found = f"TRL's {name}_training template (this template renders like {name})"
                break
    if patched is None:
        raise TemplateMismatchError(
            "--chat-template training: TRL has no training variant of this tokenizer's chat "
            "template, and the template is not prefix-preserving (it re-renders earlier "
            "turns, e.g. drops think blocks). Write a template that keeps earlier assistant "
            "turns as they were and pass its path (--chat-template PATH.jinja), or keep "
            "--chat-template model: episodes then split into one segment per view, and both "
            "trainers train every view."
        )
    if not is_prefix_preserving(tokenizer, patched):
        # DeepSeek-R1 distills: the generation prompt ends in a "<think>\n" prefill that
        # the recorded reply does not start with, so the re-rendered turn differs.
        logger.warning(
            "--chat-template training: %s still re-renders agentsgym's probe conversation "
            "differently (e.g. a generation prompt that pre-fills '<think>'), so episodes "
            "may still split into views; both trainers train every view",
            found,
        )
    return patched, found


def apply_chat_template_choice(tokenizer: Any, choice: str | None) -> tuple[Any, str]:
    """(the tokenizer to render and train with, how its template was chosen).

    The tokenizer itself when its own template is kept, else a shallow copy of it
    with the chosen template (see :func:`with_template`).

    :param choice: ``"model"`` / ``None``, ``"training"``, or a path to a ``.jinja``
        file (see the module docstring).
    """
    if choice is None or choice == MODEL:
        return tokenizer, "the model's own template"
    if choice == TRAINING:
        template, found = training_chat_template(tokenizer)
        logger.info("chat template: %s", found)
        if template == _template_text(tokenizer):
            return tokenizer, found
        return with_template(tokenizer, template), found
    path = Path(choice)
    if not path.is_file():
        raise TemplateMismatchError(
            f"--chat-template {choice!r}: not 'model', 'training' or a template file that "
            "exists; give a path to a .jinja chat template"
        )
    template = path.read_text(encoding="utf-8")
    if not is_prefix_preserving(tokenizer, template):
        logger.warning(
            "the chat template %s is not prefix-preserving: episodes will split into one "
            "segment per view",
            path,
        )
    return with_template(tokenizer, template), f"the template in {path}"


def check_source_template(source: RolloutSource, tokenizer: Any, choice: str | None) -> None:
    """A chosen chat template must be the one the rollouts are rendered with."""
    if choice in (None, "model"):
        return
    if getattr(source.tokenizer, "chat_template", None) != tokenizer.chat_template:
        raise TrainerOptionError(
            f"chat_template={choice!r} was set on the trainer's tokenizer, but the rollout "
            "source renders with another template: build the RolloutSource with "
            "tokenizer=trainer.tokenizer, so rollouts and training share one template"
        )
