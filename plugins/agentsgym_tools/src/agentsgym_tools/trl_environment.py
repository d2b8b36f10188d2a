"""An agentsgym tool env in the form of TRL's ``GRPOTrainer(environment_factory=...)``.

TRL builds one instance per rollout, calls ``reset(**row)`` (its text is appended to
the prompt), offers every other public method as a tool, and scores rollouts with its
reward functions. :func:`trl_environment` makes such a class from a :class:`ToolEnv`:

Each rollout is one episode played through the env's hooks by the core's episode
protocol (:class:`agentsgym.runtime.EpisodeSession`), as every other producer plays
it: the same tool turns, step limit, hook budgets (``hook_timeout_seconds``, and
``episode_timeout_seconds`` from the reset), ``reward_shaping`` and ``finish_episode``.

* ``reset(**row)`` starts an episode of ``row["task_data"]`` (else the row's other
  fields): the task's tools (``get_tools(task_data)``) and the env's first prompt, its
  system message included, returned as text (TRL appends it to the user turn);
* one method per tool, with the signature and docstring the model is shown (TRL derives
  the same schema from them; a :class:`~agentsgym_tools.ToolContext` parameter stays
  hidden), taking its arguments by keyword or position. A call is a tool turn of the
  episode (it counts toward ``max_steps_per_episode``), answered by the episode's
  tools. The methods are the tools of ``sample_task`` (default: the env's first
  training task): a task whose tools lack one answers its call with an error;
* ``reward`` (a class attribute, not a tool) is the reward function to pass to TRL: it
  gives each rollout's final reply to the episode as its last step, finishes the
  episode, and answers its whole reward (``episode.final_reward``: the steps' rewards
  and terms, and ``finish_episode``'s); ``None`` for an episode that failed (its error
  is on ``environment.episode``, the finished record).

Here TRL tokenizes the episode (the session records messages and rewards only);
agentsgym's own ``trl-grpo`` adapter plays it with agentsgym's runner instead,
token-exact (docs/training.md).
"""

from __future__ import annotations

import inspect
import keyword
import logging
import time
import typing
from collections.abc import Callable
from typing import Any

import agentsgym
from agentsgym import TOOL_ERROR_PREFIX, AgentAction, Episode
from agentsgym.errors import EpisodeTimeoutError
from agentsgym.runtime import EpisodeSession, HookRuntime, WorkerPool, run_sync
from agentsgym_tools.env import ToolEnv
from agentsgym_tools.errors import ToolDeclarationError
from agentsgym_tools.tool import Tool, without_parameter

__all__ = ["trl_environment"]

logger = logging.getLogger(__name__)

WORKER_THREADS = 8
"""Threads for the plain hooks of one environment class's episodes (TRL plays a
batch of rollouts, each from its own call)."""

JSON_TYPES: dict[str, type] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "array": list,
    "object": dict,
}


def trl_environment(
    env: str | ToolEnv,
    *,
    tokenizer: Any = None,
    env_config: dict[str, Any] | None = None,
    sample_task: dict[str, Any] | None = None,
) -> type:
    """A class for TRL's ``environment_factory`` playing ``env`` (an id or an instance);
    its methods are the tools of ``sample_task`` (default: the env's first training
    task, else empty task data)."""
    built = (
        env
        if isinstance(env, ToolEnv)
        else agentsgym.make(env, tokenizer=tokenizer, env_config=env_config)
    )
    if not isinstance(built, ToolEnv):
        raise ToolDeclarationError(f"{built.env_id} is not a ToolEnv: it declares no tools for TRL")
    sample = dict(sample_task) if sample_task is not None else _first_task(built)
    try:
        tools = built.episode_tools(sample)
    except Exception as exc:
        raise ToolDeclarationError(
            f"{built.env_id}: the tools of the sample task {sample!r:.120} could not be made "
            f"({type(exc).__name__}: {exc}); pass trl_environment(..., sample_task={{...}}) "
            "with a task whose tools are the methods TRL should offer"
        ) from exc
    if tools is None:
        raise ToolDeclarationError(
            f"{built.env_id} has no tools for the sample task {sample!r:.120}; pass "
            "trl_environment(..., sample_task={...}) with a task that has tools"
        )
    namespace: dict[str, Any] = {
        "__doc__": f"{built.env_id} for TRL's environment_factory (agentsgym_tools.trl_environment).",
        "env": built,
        "runtime": HookRuntime(built, WorkerPool(WORKER_THREADS, name="agentsgym-trl-env")),
    }
    for tool in tools.tools:
        namespace[tool.name] = _method(tool)
    name = "".join(
        part.capitalize() for part in built.env_id.replace("/", "-").split("-") if part.isalnum()
    )
    return type(f"{name or 'Tool'}Environment", (TrlEpisode,), namespace)


def _first_task(env: ToolEnv) -> dict[str, Any]:
    """The task of the env's first training row, or ``{}`` if it has no dataset."""
    try:
        rows = env.get_train_dataset(1)
        return dict(rows[0]["task_data"])
    except Exception:  # no dataset (or an odd one): the empty task
        logger.debug("%s: no first training task; the sample task is {}", env.env_id, exc_info=True)
        return {}


class TrlEpisode:
    """One rollout's episode, as TRL's ``environment_factory`` makes and calls it (the
    class :func:`trl_environment` makes adds ``env``, its hook ``runtime`` and a method
    per tool)."""

    env: ToolEnv
    runtime: HookRuntime
    session: EpisodeSession | None = None
    episode: Episode | None = None
    """The finished record of the episode, once ``reward`` judged it."""
    _started = 0.0

    def reset(self, **row: Any) -> str:
        """Start the episode of a dataset row; its first prompt as text."""
        task_data = dict(row.get("task_data") or {k: v for k, v in row.items() if k != "prompt"})
        self.session = EpisodeSession(
            self.env, f"trl-{id(self):x}", task_data, runtime=self.runtime, tokenize=False
        )
        self.episode = None
        self._started = time.monotonic()
        prompt = run_sync(self.session.start())
        shown = [m for m in prompt if m.get("role") in ("system", "user")]
        return "\n\n".join(str(m.get("content", "")) for m in shown)

    def _live_session(self) -> EpisodeSession | None:
        """The episode, failed once it outlived ``episode_timeout_seconds``."""
        session = self.session
        budget = self.env.config.episode_timeout_seconds
        if session is not None and time.monotonic() - self._started > budget:
            session.fail(
                EpisodeTimeoutError(
                    f"the episode did not finish within episode_timeout_seconds={budget:g}; "
                    "raise the budget with env_config episode_timeout_seconds=N"
                )
            )
        return session

    def _call_tool(self, name: str, arguments: dict[str, Any]) -> str:
        """A tool turn of the episode: the call answered by the episode's tools."""
        session = self._live_session()
        if session is None:
            return f"{TOOL_ERROR_PREFIX}this episode has no tools (reset() makes a task's tools)"
        if session.over:
            return f"{TOOL_ERROR_PREFIX}the episode is over; no tool runs any more"
        call = {"type": "function", "function": {"name": name, "arguments": arguments}}
        try:
            outcome = run_sync(session.step(AgentAction("", tool_calls=[call])))
        except Exception as exc:  # noqa: BLE001 - recorded on the episode; the model is told
            return f"{TOOL_ERROR_PREFIX}{type(exc).__name__}: {exc}"
        results = outcome.tool_results or []
        return "\n\n".join(str(m.get("content", "")) for m in results)

    def _judge(self, text: str) -> float | None:
        """The final reply as the episode's last step, then the episode finished: its
        whole reward, or ``None`` if it failed."""
        session = self._live_session()
        if session is None:
            return None
        if not session.over:
            try:
                run_sync(session.step(AgentAction(text)))
            except Exception:
                logger.debug("%s: the final step failed", self.env.env_id, exc_info=True)
        finished = run_sync(session.finish(truncated=not session.over))
        self.episode = finished.episode
        return finished.episode.final_reward if finished.episode.ok else None

    reward: Any = None  # the class's reward function, set below


class _Reward:
    """Each rollout's final reply, judged by its episode (TRL's reward function; an
    object, not a function, so that TRL does not offer it as a tool)."""

    __name__ = "agentsgym_episode_reward"

    def __call__(
        self, completions: list[Any], environments: list[Any] | None = None, **_: Any
    ) -> list[float | None]:
        rewards: list[float | None] = []
        for completion, environment in zip(completions, environments or [None] * len(completions)):
            if not isinstance(environment, TrlEpisode):
                rewards.append(None)
                continue
            text = (
                completion[-1].get("content", "")
                if isinstance(completion, list)
                else str(completion)
            )
            rewards.append(environment._judge(text or ""))
        return rewards


TrlEpisode.reward = _Reward()


def _method(tool: Tool) -> Callable[..., Any]:
    """A method with the tool's shown signature and docstring that runs the tool of the
    current episode as the runner does."""
    signature, hints, doc = _shown(tool)
    self_parameter = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)

    def method(self: Any, *args: Any, **kwargs: Any) -> str:
        try:
            arguments = dict(signature.bind(*args, **kwargs).arguments)
        except TypeError as exc:
            return f"{TOOL_ERROR_PREFIX}bad arguments for {tool.name}: {exc}"
        return self._call_tool(tool.name, arguments)  # type: ignore[no-any-return]

    method.__name__ = method.__qualname__ = tool.name
    method.__doc__ = doc
    method.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[self_parameter, *signature.parameters.values()]
    )
    method.__annotations__ = hints
    return method


def _shown(tool: Tool) -> tuple[inspect.Signature, dict[str, Any], str | None]:
    """The signature, resolved hints and docstring the model is shown: the function's,
    less its ToolContext parameter; made from the schema for a tool without one."""
    function = tool.function
    if inspect.isfunction(function) or inspect.ismethod(function):
        target = function
        if tool.context_parameter is not None:
            target = without_parameter(function, tool.context_parameter)
        return inspect.signature(target), typing.get_type_hints(target), inspect.getdoc(target)
    return _from_schema(tool)


def _from_schema(tool: Tool) -> tuple[inspect.Signature, dict[str, Any], str | None]:
    """A signature and a Google-style docstring from a tool's JSON schema (an MCP tool)."""
    properties: dict[str, Any] = tool.parameters.get("properties") or {}
    required = set(tool.parameters.get("required") or [])
    for name in properties:
        if not name.isidentifier() or keyword.iskeyword(name):
            raise ToolDeclarationError(
                f"tool {tool.name}: its parameter {name!r} is not a Python name, so TRL "
                "cannot offer the tool as a method; rename it in the tool's schema"
            )
    ordered = sorted(properties, key=lambda n: n not in required)  # required ones first
    parameters, hints, lines = [], {}, []
    for name in ordered:
        spec = properties[name]
        kind = JSON_TYPES.get(spec.get("type"), str)
        needed = name in required
        hints[name] = kind if needed else kind | None
        default = inspect.Parameter.empty if needed else None
        parameters.append(
            inspect.Parameter(
                name,
                inspect.Parameter.POSITIONAL_OR_KEYWORD,
                default=default,
                annotation=hints[name],
            )
        )
        lines.append(f"    {name}: {spec.get('description') or spec.get('title') or name}")
    description = tool.schema["function"].get("description") or tool.name
    doc = description + ("\n\nArgs:\n" + "\n".join(lines) if lines else "")
    return inspect.Signature(parameters), hints, doc
