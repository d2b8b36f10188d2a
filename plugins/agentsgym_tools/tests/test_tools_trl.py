"""A tool env in the form of TRL's environment_factory: reset, the tools as methods with
the tools' own schemas, and a reward function judging the final reply; then TRL's
GRPOTrainer takes it and trains a step on the tiny model."""

from __future__ import annotations

from typing import Any

import pytest

from agentsgym_tools import trl_environment

CALCULATOR = "tools/Calculator-v0"


def test_the_environment_class_has_the_env_tools_and_judges_the_final_reply() -> None:
    from transformers.utils import get_json_schema

    from agentsgym_tools.calculator import add, multiply

    factory = trl_environment(CALCULATOR)
    environment = factory()
    prompt = environment.reset(prompt=[], task_data={"a": 3, "b": 4, "c": 5})
    assert prompt.startswith("What is 3 * 4 + 5?")
    assert get_json_schema(environment.multiply) == get_json_schema(multiply)
    assert get_json_schema(environment.add) == get_json_schema(add)
    assert environment.multiply(a=3, b=4) == "12"
    assert environment.add(a=1).startswith("Error: bad arguments for add")
    other = factory()
    other.reset(a=1, b=1, c=1)  # a row's fields are the task when it has no task_data
    completions = [
        [{"role": "assistant", "content": "\\boxed{17}"}],
        [{"role": "assistant", "content": "5"}],
    ]
    assert factory.reward(completions, environments=[environment, other]) == [1.0, 0.0]


def test_grpo_trains_a_step_on_it(tmp_path: Any) -> None:
    pytest.importorskip(
        "agentsgym_trl", reason="TRL's GRPOTrainer and the tiny model come with agentsgym-trl"
    )
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer
    from trl.chat_template_utils import qwen2_5_chat_template

    import agentsgym
    from agentsgym_trl.chat_templates import with_template
    from agentsgym_trl.tiny_model import build_tiny_model

    # a copy (the bundled tokenizer is shared) with Qwen2.5's template: TRL parses its calls
    tokenizer = with_template(
        agentsgym.load_tokenizer(agentsgym.DEFAULT_TOKENIZER), qwen2_5_chat_template
    )
    factory = trl_environment(CALCULATOR, tokenizer=tokenizer)
    rows = [
        {"prompt": [{"role": "user", "content": "Solve it."}], "task_data": {"seed": i}}
        for i in range(4)
    ]
    config = GRPOConfig(
        output_dir=str(tmp_path),
        max_steps=1,
        per_device_train_batch_size=4,
        num_generations=2,
        max_completion_length=8,
        max_tool_calling_iterations=2,
        use_cpu=True,
        bf16=False,
        save_strategy="no",
        report_to="none",
        seed=0,
    )
    trainer = GRPOTrainer(
        model=build_tiny_model(tokenizer, seed=0),
        args=config,
        processing_class=tokenizer,
        train_dataset=Dataset.from_list(rows),
        environment_factory=factory,
        reward_funcs=[factory.reward],
    )
    assert {t.__name__ for t in trainer.tools} == {"multiply", "add"}
    output = trainer.train()
    assert output.global_step == 1
