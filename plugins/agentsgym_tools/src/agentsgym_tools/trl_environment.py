"""An agentsgym tool env in the form of TRL's ``GRPOTrainer(environment_factory=...)``.

TRL builds one instance per rollout, calls ``reset(**row)`` (its text is appended to
the prompt), offers every other public method as a tool, and scores rollouts with its
reward functions. :func:`trl_environment` makes such a class from a :class:`ToolEnv`:

* ``reset(**row)`` starts an episode of ``row["task_data"]`` (else the row's other
  fields) and returns the env's first prompt;
* one method per tool of the env, with the tool's own signature and docstring (TRL
  derives the same schema from them), running the tool as the env's runner does;
* ``reward`` (a class attribute, not a tool) is the reward function to pass to TRL: it
  gives each rollout's final reply to the env's ``step_episode``.

Here TRL plays the episode and tokenizes it; agentsgym's own ``trl-grpo`` adapter
plays it with agentsgym's runner instead, token-exact (docs/training.md).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import agentsgym
from agentsgym.aio import run_sync
from agentsgym_tools.env import ToolEnv
from agentsgym_tools.errors import ToolDeclarationError
from agentsgym_tools.runner import ToolRunner
from agentsgym_tools.tool import Tool

__all__ = ["trl_environment"]


def trl_environment(
    env: str | ToolEnv, *, tokenizer: Any = None, env_config: dict[str, Any] | None = None
) -> type:
    """A class for TRL's ``environment_factory`` playing ``env`` (an id or an instance)."""
    built = (
        env
        if isinstance(env, ToolEnv)
        else agentsgym.make(env, tokenizer=tokenizer, env_config=env_config)
    )
    if not isinstance(built, ToolEnv):
        raise ToolDeclarationError(f"{built.env_id} is not a ToolEnv: it declares no tools for TRL")
    tools = built.episode_tools({})
    if tools is None:
        raise ToolDeclarationError(f"{built.env_id} has no tools for an episode of empty task_data")
    namespace: dict[str, Any] = {
        "__doc__": f"{built.env_id} for TRL's environment_factory (agentsgym_tools.trl_environment).",
        "env": built,
        "reset": _reset,
        "reward": _Reward(),
    }
    for tool in tools.tools:
        namespace[tool.name] = _method(tool, tools.runner)
    name = "".join(
        part.capitalize() for part in built.env_id.replace("/", "-").split("-") if part.isalnum()
    )
    return type(f"{name or 'Tool'}Environment", (), namespace)


def _reset(self: Any, **row: Any) -> str:
    task_data = dict(row.get("task_data") or {k: v for k, v in row.items() if k != "prompt"})
    env = self.env
    session = f"trl-{id(self):x}"
    self.state = _settled(
        env.hook.initialize_episode(env=env, session_id=session, task_data=task_data)
    )
    prompt = _settled(env.hook.format_prompt(env=env, state=self.state, step=0))
    if isinstance(prompt, str):
        return prompt
    return "\n\n".join(str(m.get("content", "")) for m in prompt if m.get("role") == "user")


class _Reward:
    """Each rollout's final reply, judged by its env's ``step_episode`` (TRL's reward
    function; an object, not a function, so that TRL does not offer it as a tool)."""

    __name__ = "agentsgym_step_episode"

    def __call__(
        self, completions: list[Any], environments: list[Any] | None = None, **_: Any
    ) -> list[float | None]:
        return _rewards(completions, environments)


def _rewards(completions: list[Any], environments: list[Any] | None) -> list[float | None]:
    rewards: list[float | None] = []
    for completion, environment in zip(completions, environments or [None] * len(completions)):
        if environment is None or not hasattr(environment, "state"):
            rewards.append(None)
            continue
        text = (
            completion[-1].get("content", "") if isinstance(completion, list) else str(completion)
        )
        env = environment.env
        result = _settled(
            env.hook.step_episode(
                env=env,
                state=environment.state,
                action=text or "",
                step=0,
                reply=agentsgym.AgentAction(text=text or ""),
            )
        )
        rewards.append(float(result[1]))
    return rewards


def _settled(result: Any) -> Any:
    """An async hook's result, awaited on agentsgym's background loop."""
    return run_sync(result) if inspect.isawaitable(result) else result


def _method(tool: Tool, runner: ToolRunner) -> Callable[..., Any]:
    """A method with the tool's signature and docstring that answers as the runner does."""
    if tool.function is None:
        raise ToolDeclarationError(f"tool {tool.name} has no Python function for TRL to call")
    signature = inspect.signature(tool.function)
    self_parameter = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)

    def method(self: Any, **arguments: Any) -> str:
        call = {
            "id": "call_0",
            "type": "function",
            "function": {"name": tool.name, "arguments": arguments},
        }
        return str(run_sync(runner.run([call]))[0]["content"])

    method.__name__ = method.__qualname__ = tool.name
    method.__doc__ = inspect.getdoc(tool.function)
    method.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[self_parameter, *signature.parameters.values()]
    )
    method.__annotations__ = dict(getattr(tool.function, "__annotations__", {}))
    return method
