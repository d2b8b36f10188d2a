"""Train with TRL's OpenEnv integration on an agentsgym env served by `agentsgym serve`.

TRL's ``GRPOTrainer(environment_factory=...)`` plays environments as tools: each
rollout gets an instance of the factory's class; TRL calls its ``reset(**row)`` with
the dataset row (its text is appended to the prompt), exposes its other public
methods as tools the model calls, and scores the rollout with its ``get_reward()``.
Here that class is a thin wrapper around openenv-core's own ``GenericEnvClient``,
connected to ``agentsgym serve``'s OpenEnv endpoint (``/ws``): the env logic, its
rewards and its step limit stay on the server.

Runs on a CPU in about a minute, on the tiny model (random weights: a smoke run of
the plumbing, whose replies rarely call the tool) with the bundled tokenizer and
TRL's Qwen2.5 chat template (TRL needs a template that renders tool calls)::

    python plugins/agentsgym_serve/examples/trl_openenv.py --max-steps 4 --output-dir runs/trl-openenv

    # or against a server you started yourself (any machine):
    agentsgym serve agentsgym/GuessTheNumber-v0 --port 8000
    python plugins/agentsgym_serve/examples/trl_openenv.py --url http://127.0.0.1:8000

For a real model, pass ``--model Qwen/Qwen2.5-0.5B-Instruct`` (its own tokenizer and
template are used), and train on a GPU with ``bf16``.
"""

from __future__ import annotations

import argparse
import logging
from typing import Any, ClassVar

logger = logging.getLogger(__name__)

ENV_ID = "agentsgym/GuessTheNumber-v0"
PROMPT = (
    "Play the guessing game: find the hidden integer between 1 and 100 with the guess "
    "tool. After each guess the game says whether the number is higher or lower."
)


class GuessTheNumberOverOpenEnv:
    """One rollout's game: an OpenEnv session on the agentsgym server.

    TRL uses ``reset`` and ``get_reward``; every other public method is a tool the model
    may call (its docstring and type hints are the tool's schema).
    """

    url: ClassVar[str] = "http://127.0.0.1:8000"

    def __init__(self) -> None:
        from openenv.core import GenericEnvClient

        self._client = GenericEnvClient(base_url=self.url).sync()
        self._client.connect()
        self._reward = 0.0
        self._done = False

    def reset(self, **row: Any) -> str:
        """Start the row's task (TRL passes the dataset row; ``data_idx`` picks the task)."""
        result = self._client.reset(data_idx=int(row["data_idx"]))
        self._reward, self._done = 0.0, False
        return str(result.observation["text"])

    def guess(self, number: int) -> str:
        """Guess the hidden number.

        Args:
            number: The integer to guess.

        Returns:
            Whether the hidden number is higher or lower, or that the game is won.
        """
        if self._done:
            raise ValueError("The game is over; stop guessing.")
        result = self._client.step({"message": f"[{number}]"})
        self._reward += float(result.reward or 0.0)
        self._done = bool(result.done)
        text = str(result.observation["text"])
        return text or ("You found it!" if self._reward > 0 else "No guesses left.")

    def get_reward(self) -> float:
        """The rollout's reward: what the server's env gave for the game."""
        return self._reward


def tiny_model_and_tokenizer() -> tuple[Any, Any]:
    """The tiny model on the bundled tokenizer, with TRL's Qwen2.5 (tool-calling) template."""
    from trl.chat_template_utils import qwen2_5_chat_template

    from agentsgym import DEFAULT_TOKENIZER, load_tokenizer
    from agentsgym_trl import build_tiny_model, with_template

    # a copy: the bundled tokenizer is shared by everything in this process
    tokenizer = with_template(load_tokenizer(DEFAULT_TOKENIZER), qwen2_5_chat_template)
    return build_tiny_model(tokenizer, seed=0), tokenizer


def train(
    url: str,
    output_dir: str,
    *,
    model: str = "tiny",
    max_steps: int = 4,
    num_tasks: int = 8,
    max_completion_length: int = 32,
) -> Any:
    """GRPO through TRL's OpenEnv integration; returns TRL's TrainOutput."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    GuessTheNumberOverOpenEnv.url = url
    if model == "tiny":
        policy, tokenizer = tiny_model_and_tokenizer()
    else:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        policy = AutoModelForCausalLM.from_pretrained(model)
        tokenizer = AutoTokenizer.from_pretrained(model)
    rows = [
        {"prompt": [{"role": "user", "content": PROMPT}], "data_idx": i} for i in range(num_tasks)
    ]
    config = GRPOConfig(
        output_dir=output_dir,
        max_steps=max_steps,
        per_device_train_batch_size=4,
        num_generations=2,
        max_completion_length=max_completion_length,
        max_tool_calling_iterations=4,
        learning_rate=1e-3,
        use_cpu=True,
        bf16=False,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        seed=0,
    )
    trainer = GRPOTrainer(
        model=policy,
        args=config,
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
        environment_factory=GuessTheNumberOverOpenEnv,
    )
    return trainer.train()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="an agentsgym serve server (default: start one here)")
    parser.add_argument("--model", default="tiny", help="a model folder or hub name, or tiny")
    parser.add_argument("--max-steps", type=int, default=4)
    parser.add_argument("--output-dir", default="runs/trl-openenv")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO)
    if args.url:
        result = train(args.url, args.output_dir, model=args.model, max_steps=args.max_steps)
    else:
        from agentsgym_serve import BackgroundServer, create_app

        with BackgroundServer(create_app(ENV_ID, openenv=True)) as server:
            result = train(server.url, args.output_dir, model=args.model, max_steps=args.max_steps)
    logger.info("trained %s steps: %s", result.global_step, result.metrics)


if __name__ == "__main__":
    main()
