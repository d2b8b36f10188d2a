"""A tool env in the form of TRL's environment_factory: reset, the tools as methods with
the tools' own schemas, and a reward function judging the final reply; then TRL's
GRPOTrainer takes it and trains a step on the tiny model."""

from __future__ import annotations

from typing import Any

import pytest

from agentsgym import StepResult, hookimpl
from agentsgym_tools import ToolContext, ToolDeclarationError, ToolEnv, tool, trl_environment

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
    assert environment.multiply(3, 4) == "12"  # positional, as the signature shows
    assert environment.multiply(3, 4, 5).startswith("Error: bad arguments for multiply")
    assert environment.add(a=1).startswith("Error: bad arguments for add")
    other = factory()
    other.reset(a=1, b=1, c=1)  # a row's fields are the task when it has no task_data
    completions = [
        [{"role": "assistant", "content": "\\boxed{17}"}],
        [{"role": "assistant", "content": "5"}],
    ]
    assert factory.reward(completions, environments=[environment, other]) == [1.0, 0.0]


ACCOUNTS = {1: ["ACC-1", "ACC-2"], 2: ["ACC-9"]}


class BankEnv(ToolEnv):
    """Per-task tools: a task's accounts, read by a tool that sees the episode, and a
    tool that only some tasks have."""

    run_hooks_inline = True

    def get_tools(self, task_data: dict[str, Any]) -> list[Any]:
        seed = task_data["seed"]  # no seed, no tools: a KeyError on empty task data

        def close_account(account: str) -> str:
            """Close an account.

            Args:
                account: which
            """
            return f"closed {account}"

        return [list_accounts, close_account] if seed == 1 else [list_accounts]

    @hookimpl
    def initialize_episode(self, session_id: str, task_data: dict[str, Any]) -> dict[str, Any]:
        return {"seed": task_data["seed"]}

    @hookimpl
    def format_prompt(self, state: dict[str, Any], step: int) -> list[dict[str, str]]:
        return [
            {"role": "system", "content": "You are a bank clerk."},
            {"role": "user", "content": "Which accounts does the customer have?"},
        ]

    @hookimpl
    def step_episode(self, state: dict[str, Any], action: str) -> StepResult:
        return StepResult(state, 1.0, True, {})


def list_accounts(context: ToolContext, prefix: str = "") -> list[str]:
    """List the customer's accounts.

    Args:
        prefix: only those that start with it
    """
    return [a for a in ACCOUNTS[context.task_data["seed"]] if a.startswith(prefix)]


def test_tools_are_made_per_task_and_the_system_prompt_is_kept() -> None:
    from transformers.utils import get_json_schema

    with pytest.raises(ToolDeclarationError, match="sample_task"):
        trl_environment(BankEnv())  # no dataset, and empty task data has no tools
    factory = trl_environment(BankEnv(), sample_task={"seed": 1})
    first, second = factory(), factory()
    prompt = first.reset(prompt=[], task_data={"seed": 1})
    assert prompt == "You are a bank clerk.\n\nWhich accounts does the customer have?"
    second.reset(task_data={"seed": 2})
    assert first.list_accounts() == '["ACC-1", "ACC-2"]'
    assert second.list_accounts() == '["ACC-9"]'  # its own task, not the sample's
    assert second.list_accounts("ACC-9") == '["ACC-9"]'
    assert first.close_account("ACC-1") == "closed ACC-1"
    assert second.close_account("ACC-9").startswith("Error: there is no tool named")
    shown = get_json_schema(first.list_accounts)
    assert list(shown["function"]["parameters"]["properties"]) == ["prefix"]


class Remote:
    """A tool with only a schema to show (as an MCP server's): keyword arguments in."""

    async def __call__(self, **arguments: Any) -> str:
        return ",".join(f"{k}={v}" for k, v in sorted(arguments.items()))


REMOTE = {
    "name": "transfer",
    "description": "Move money.",
    "parameters": {
        "type": "object",
        "properties": {
            "amount": {"type": "integer", "description": "how much"},
            "to": {"type": "string", "description": "which account"},
            "memo": {"type": "string"},
        },
        "required": ["to", "amount"],
    },
}


def test_a_tool_with_only_a_schema_gets_a_signature_from_it() -> None:
    from transformers.utils import get_json_schema

    class RemoteEnv(BankEnv):
        def get_tools(self, task_data: dict[str, Any]) -> list[Any]:
            return [tool(Remote(), schema=REMOTE)]

    environment = trl_environment(RemoteEnv(), sample_task={})()
    environment.reset(task_data={"seed": 1})
    assert environment.transfer(5, "ACC-9") == "amount=5,to=ACC-9"  # the schema's order
    assert environment.transfer(to="ACC-9", amount=5, memo="rent").endswith("memo=rent,to=ACC-9")
    shown = get_json_schema(environment.transfer)["function"]
    assert shown["description"] == "Move money."
    assert shown["parameters"]["required"] == ["amount", "to"]
    assert shown["parameters"]["properties"]["amount"] == {
        "type": "integer",
        "description": "how much",
    }


def test_grpo_trains_a_step_on_it(tmp_path: Any) -> None:
    pytest.importorskip(
        "agentsgym_trl", reason="TRL's GRPOTrainer and the tiny model come with agentsgym-trl"
    )
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer
    from trl.chat_template_utils import qwen2_5_chat_template

    import agentsgym
    from agentsgym_trl import build_tiny_model, with_template

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
