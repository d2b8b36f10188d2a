"""Tools that see their episode: a parameter annotated ToolContext gets the task and the
state, is left out of the schema, and is never the model's to set."""

from __future__ import annotations

from typing import Any

import pytest

import agentsgym
from agentsgym import StepResult, hookimpl
from agentsgym_tools import (
    ScriptedToolAgent,
    ToolContext,
    ToolDeclarationError,
    ToolEnv,
    tool,
)

ACCOUNTS = {1: ["ACC-1", "ACC-2"], 2: ["ACC-9"]}


def list_accounts(context: ToolContext, prefix: str = "") -> list[str]:
    """List the customer's accounts.

    Args:
        prefix: only the accounts that start with it
    """
    context.state["listed"] += 1
    return [a for a in ACCOUNTS[context.task_data["seed"]] if a.startswith(prefix)]


class BankEnv(ToolEnv):
    """Name the customer's accounts."""

    tools = (list_accounts,)
    run_hooks_inline = True

    @hookimpl
    def initialize_episode(self, session_id: str, task_data: dict[str, Any]) -> dict[str, Any]:
        return {"listed": 0}

    @hookimpl
    def format_prompt(self, state: dict[str, Any], step: int) -> str:
        return "Which accounts does the customer have?"

    @hookimpl
    def step_episode(self, state: dict[str, Any], action: str) -> StepResult:
        return StepResult(state, float(state["listed"]), True, {"listed": state["listed"]})


def test_the_context_parameter_is_hidden_from_the_model() -> None:
    made = tool(list_accounts)
    assert made.context_parameter == "context" and made.hidden == ("context",)
    assert list(made.parameters["properties"]) == ["prefix"]
    assert "context" not in str(made.schema)


def test_a_tool_sees_its_episode_task_and_state() -> None:
    def solve(messages: Any) -> Any:
        results = [m["content"] for m in messages if m["role"] == "tool"]
        return f"They have {results[-1]}." if results else [("list_accounts", {})]

    env = BankEnv(agentsgym.load_tokenizer(agentsgym.DEFAULT_TOKENIZER))
    batch = env.run_trial([{"seed": 1}, {"seed": 2}], ScriptedToolAgent(solve), num_rollouts=2)
    for episode in batch.episodes:
        assert episode.ok, episode.error
        answer = next(m["content"] for m in episode.messages if m["role"] == "tool")
        assert answer == str(ACCOUNTS[episode.task_data["seed"]]).replace("'", '"')
        assert episode.final_reward == 1.0  # the tool changed the state step_episode read


def test_the_model_cannot_set_the_hidden_parameter() -> None:
    script = [[("list_accounts", {"context": {"task_data": {"seed": 2}}})], "done"]
    env = BankEnv(agentsgym.load_tokenizer(agentsgym.DEFAULT_TOKENIZER))
    episode = env.run_trial([{"seed": 1}], ScriptedToolAgent(script)).episodes[0]
    answer = next(m["content"] for m in episode.messages if m["role"] == "tool")
    assert answer == (
        "Error: bad arguments for list_accounts: got an unexpected keyword argument 'context'"
    )


def test_a_schema_that_shows_the_context_parameter_is_refused() -> None:
    schema = {
        "name": "list_accounts",
        "parameters": {"type": "object", "properties": {"context": {"type": "object"}}},
    }
    with pytest.raises(ToolDeclarationError, match="leave it out of the schema"):
        tool(list_accounts, schema=schema)


def test_an_async_env_binds_its_state_too() -> None:
    class AsyncBankEnv(BankEnv):
        @hookimpl
        async def initialize_episode(
            self, session_id: str, task_data: dict[str, Any]
        ) -> dict[str, Any]:
            return {"listed": 0}

    env = AsyncBankEnv(agentsgym.load_tokenizer(agentsgym.DEFAULT_TOKENIZER))
    script = [[("list_accounts", {})], "done"]
    episode = env.run_trial([{"seed": 2}], ScriptedToolAgent(script)).episodes[0]
    assert episode.ok, episode.error
    assert episode.final_reward == 1.0  # the tool counted in the state the hook returned
