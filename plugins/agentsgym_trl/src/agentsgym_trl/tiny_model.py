"""A tiny random-weight causal LM on the bundled tokenizer, for offline tests and demos.

Nothing is downloaded: the model is a small Qwen2 architecture built from a config
(hidden size 64, 2 layers, ~0.1M parameters) whose vocabulary is the bundled
``agentsgym/tiny-chatml`` tokenizer's 1024 tokens. It generates noise, which is all a
test of the token plumbing needs. For a training demo that can earn reward, it can
be *warm-started*: a few supervised steps on replies in an env's answer format
(``warm_start="guess-number"`` teaches it to answer ``[k]`` for GuessTheNumber), so
that sampled rollouts differ in reward and GRPO has a signal.

    from agentsgym_trl.tiny_model import save_tiny_model
    save_tiny_model("tiny-model", warm_start="guess-number", high=3)

or ``python -m agentsgym_trl.tiny_model tiny-model --warm-start guess-number --high 3``.
``agentsgym train ... --model tiny`` builds an untrained one on the fly.
"""

from __future__ import annotations

import argparse
import logging
import random
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from transformers import PreTrainedModel

logger = logging.getLogger(__name__)

TINY_MODEL = "tiny"
"""The name that model options accept to mean "build a tiny random model"."""

WARM_STARTS = {"guess-number": "agentsgym/GuessTheNumber-v0"}
"""The named warm starts, and the env whose answer format each teaches."""

Example = tuple[list[dict[str, str]], str]
"""A warm-start example: the conversation so far, and the assistant reply to learn."""


def _default_tokenizer(tokenizer: Any = None) -> Any:
    if tokenizer is not None:
        return tokenizer
    from agentsgym import DEFAULT_TOKENIZER, load_tokenizer

    return load_tokenizer(DEFAULT_TOKENIZER)


def tiny_config(
    tokenizer: Any = None,
    *,
    hidden_size: int = 64,
    num_hidden_layers: int = 2,
    num_attention_heads: int = 4,
    num_key_value_heads: int = 2,
    intermediate_size: int = 128,
    max_position_embeddings: int = 4096,
) -> Any:
    """A Qwen2 config sized for CPU tests, with the tokenizer's vocabulary and ids."""
    from transformers import Qwen2Config

    tokenizer = _default_tokenizer(tokenizer)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    return Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=num_hidden_layers,
        num_attention_heads=num_attention_heads,
        num_key_value_heads=num_key_value_heads,
        max_position_embeddings=max_position_embeddings,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=pad,
        bos_token_id=tokenizer.bos_token_id,
    )


def build_tiny_model(
    tokenizer: Any = None,
    *,
    seed: int = 0,
    warm_start: str | Sequence[Example] | None = None,
    low: int = 1,
    high: int = 3,
    **config: Any,
) -> PreTrainedModel:
    """A tiny causal LM with random weights (deterministic under ``seed``).

    :param tokenizer: the tokenizer whose vocabulary the model uses (default: the
        bundled one).
    :param warm_start: ``"guess-number"`` or a list of ``(messages, reply)``
        examples to fit briefly (see :func:`warm_start`); ``low``/``high`` set the
        guess range of the ``"guess-number"`` examples, which play GuessTheNumber
        (agentsgym-classical must be installed).
    :param config: overrides of :func:`tiny_config` (``hidden_size``, ...).
    """
    import torch
    from transformers import Qwen2ForCausalLM

    tokenizer = _default_tokenizer(tokenizer)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(tiny_config(tokenizer, **config))
    model.generation_config.pad_token_id = model.config.pad_token_id
    model.generation_config.eos_token_id = model.config.eos_token_id
    if warm_start is not None:
        examples = (
            guess_number_examples(low=low, high=high, seed=seed)
            if isinstance(warm_start, str)
            else list(warm_start)
        )
        if isinstance(warm_start, str) and warm_start != "guess-number":
            raise ValueError(
                f"unknown warm_start {warm_start!r}; use 'guess-number' or a list of examples"
            )
        fit_examples(model, tokenizer, examples, seed=seed)
    model.eval()
    return model


def guess_number_examples(
    *, low: int = 1, high: int = 3, count: int = 64, seed: int = 0
) -> list[Example]:
    """Conversations in GuessTheNumber's format, each answered with a random ``[k]``."""
    import agentsgym

    rng = random.Random(seed)
    examples: list[Example] = []
    for _ in range(count):
        steps = rng.randint(2, 4)
        env = agentsgym.make(
            "agentsgym/GuessTheNumber-v0",
            env_config={"low": low, "high": high, "max_steps_per_episode": steps},
        )
        state = env.initialize_episode(session_id="warm", task_data={"seed": rng.randrange(10**6)})
        messages: list[dict[str, str]] = []
        for step in range(rng.randrange(steps)):
            messages.append({"role": "user", "content": env.format_prompt(state=state, step=step)})
            reply = f"[{rng.randint(low, high)}]"
            messages.append({"role": "assistant", "content": reply})
            state = env.step_episode(state=state, action=reply).state
        messages.append(
            {"role": "user", "content": env.format_prompt(state=state, step=len(messages) // 2)}
        )
        examples.append((messages, f"[{rng.randint(low, high)}]"))
    return examples


def fit_examples(
    model: Any,
    tokenizer: Any,
    examples: Sequence[Example],
    *,
    steps: int = 40,
    learning_rate: float = 3e-3,
    batch_size: int = 8,
    seed: int = 0,
) -> float:
    """A few supervised steps on the replies of ``examples`` (loss on reply tokens only).

    The reply is followed by the template's end-of-turn token, so the model also
    learns to stop. Returns the last loss.
    """
    import torch

    from agentsgym.runtime import ChatTokenizer

    chat = ChatTokenizer(tokenizer)
    rows: list[tuple[list[int], list[int]]] = []
    for messages, reply in examples:
        prompt = chat.encode_prompt(messages)
        answer = chat.encode_model_text(reply) + chat.eot_ids
        rows.append((prompt + answer, [-100] * len(prompt) + answer))
    rng = random.Random(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate, weight_decay=0.0)
    pad = chat.pad_token_id
    model.train()
    loss_value = float("nan")
    for _ in range(steps):
        batch = rng.sample(rows, min(batch_size, len(rows)))
        width = max(len(ids) for ids, _ in batch)
        input_ids = torch.tensor([ids + [pad] * (width - len(ids)) for ids, _ in batch])
        labels = torch.tensor([lab + [-100] * (width - len(lab)) for _, lab in batch])
        attention = torch.tensor([[1] * len(ids) + [0] * (width - len(ids)) for ids, _ in batch])
        loss = model(input_ids=input_ids, attention_mask=attention, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        loss_value = float(loss.detach())
    model.eval()
    logger.info("warm start: %d steps, final loss %.3f", steps, loss_value)
    return loss_value


def save_tiny_model(
    path: str | Path,
    *,
    tokenizer: Any = None,
    seed: int = 0,
    warm_start: str | Sequence[Example] | None = None,
    low: int = 1,
    high: int = 3,
    **config: Any,
) -> Path:
    """Build a tiny model (see :func:`build_tiny_model`) and save it with its tokenizer.

    The folder loads with ``AutoModelForCausalLM.from_pretrained`` and
    ``AutoTokenizer.from_pretrained``, so it works anywhere a model path does
    (``agentsgym train --model PATH``, ``--agent-option model=PATH``).
    """
    tokenizer = _default_tokenizer(tokenizer)
    model = build_tiny_model(
        tokenizer, seed=seed, warm_start=warm_start, low=low, high=high, **config
    )
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m agentsgym_trl.tiny_model", description="Save a tiny random causal LM."
    )
    parser.add_argument("path")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--warm-start", choices=sorted(WARM_STARTS), default=None)
    parser.add_argument("--low", type=int, default=1)
    parser.add_argument("--high", type=int, default=3)
    parser.add_argument("--hidden-size", type=int, default=64)
    args = parser.parse_args(argv)
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    out = save_tiny_model(
        args.path,
        seed=args.seed,
        warm_start=args.warm_start,
        low=args.low,
        high=args.high,
        hidden_size=args.hidden_size,
    )
    print(f"saved a tiny model to {out}")


if __name__ == "__main__":
    main()
