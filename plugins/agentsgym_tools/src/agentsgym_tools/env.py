"""ToolEnv: a MultistepEnv whose episodes have tools.

Declare ``tools`` (functions, :func:`~agentsgym_tools.tool` objects or JSON schemas), or
override :meth:`ToolEnv.get_tools` for tools that differ per task. A reply that calls
tools gets their results as ``tool`` messages and the model goes on; a reply without
calls reaches ``step_episode`` as in any env. Tool turns count toward
``max_steps_per_episode``; ``max_tool_calls_per_turn``, ``tool_timeout_seconds`` and
``max_tool_result_chars`` bound each reply's calls.

A tool that asks for the :class:`~agentsgym_tools.ToolContext` gets the episode's task,
its current state and its session id: the engine gives the toolbox the episode's state
and session id with every reply (``Toolbox.respond``), so two episodes of one task, even
of one ``task_data`` object, never share or swap them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from pydantic import Field

from agentsgym import EnvConfig, Message, MultistepEnv
from agentsgym.runtime import ChatTokenizer
from agentsgym_tools.context import ToolContext
from agentsgym_tools.parsing import ToolCallParser
from agentsgym_tools.runner import DEFAULT_MAX_RESULT_CHARS, ToolRunner
from agentsgym_tools.tool import Tool, as_tools
from agentsgym_tools.toolbox import Toolbox

__all__ = ["ToolEnv", "ToolEnvConfig", "ToolLike", "renders_parallel_calls", "renders_tools"]

logger = logging.getLogger(__name__)

ToolLike = Tool | Callable[..., Any] | Mapping[str, Any]


class ToolEnvConfig(EnvConfig):
    """The settings of every tool env (subclass it for your own keys)."""

    max_tool_calls_per_turn: int = Field(
        8, ge=1, le=256, description="tool calls answered per reply; more get an error"
    )
    tool_timeout_seconds: float = Field(
        30.0, gt=0, le=3600, description="each tool call's budget; an overrun is an error"
    )
    max_tool_result_chars: int = Field(
        DEFAULT_MAX_RESULT_CHARS,
        ge=100,
        le=1_000_000,  # about 250k tokens: more than any model's context takes in one answer
        description="the longest tool answer in characters (100 to 1,000,000); a longer one"
        " is cut, saying so",
    )


class ToolEnv(MultistepEnv):
    """A :class:`~agentsgym.MultistepEnv` with tools (see the module docstring)."""

    config_class: ClassVar[type[EnvConfig]] = ToolEnvConfig
    tools: ClassVar[Sequence[ToolLike]] = ()

    def __init__(self, tokenizer: Any = None, env_config: dict[str, Any] | None = None, **kw: Any):
        super().__init__(tokenizer, env_config, **kw)
        eot = self.chat.eot_text if self.chat is not None else ""
        self.tool_parser = ToolCallParser(tokenizer, eot_text=eot)
        self._default_tools = as_tools(type(self).tools)  # declaration errors surface here
        self.one_call_per_reply = self.chat is not None and not renders_parallel_calls(self.chat)
        if self.chat is not None and self._default_tools and not renders_tools(self.chat):
            logger.warning(
                "the chat template of %s does not render tools: a model playing %s is never "
                "told its tools (see `agentsgym list-models`: smollm2-tools, say)",
                getattr(self.tokenizer, "name_or_path", "the tokenizer"),
                type(self).__name__,
            )

    def get_tools(self, task_data: dict[str, Any]) -> Sequence[ToolLike]:
        """The tools of an episode of ``task_data`` (default: the class's ``tools``)."""
        return self._default_tools

    def episode_tools(self, task_data: dict[str, Any]) -> Toolbox | None:
        tools = as_tools(self.get_tools(task_data))
        if not tools:
            return None
        config = self.config
        runner = ToolRunner(
            tools,
            timeout_seconds=float(getattr(config, "tool_timeout_seconds", 30.0)),
            max_calls=int(getattr(config, "max_tool_calls_per_turn", 8)),
            max_result_chars=int(
                getattr(config, "max_tool_result_chars", DEFAULT_MAX_RESULT_CHARS)
            ),
        )
        return Toolbox(
            tools,
            self.tool_parser,
            runner,
            context=ToolContext(task_data=task_data),
            one_call_per_reply=self.one_call_per_reply,
        )


_PROBE_TOOL = {
    "type": "function",
    "function": {
        "name": "probe",
        "description": "A probe.",
        "parameters": {"type": "object", "properties": {}},
    },
}


def renders_parallel_calls(chat: ChatTokenizer) -> bool:
    """Whether ``chat``'s template renders a reply of two calls (Llama-3.x's raises)."""
    calls = [
        {"id": f"call_{i}", "type": "function", "function": {"name": "probe", "arguments": {}}}
        for i in range(2)
    ]
    conversation = [
        Message(role="user", content="Hi."),
        Message(role="assistant", content="", tool_calls=calls),
        *(Message(role="tool", tool_call_id=c["id"], name="probe", content="1") for c in calls),
    ]
    kwargs = {**chat.template_kwargs, "tokenize": False, "tools": [_PROBE_TOOL]}
    try:
        chat.tokenizer.apply_chat_template(conversation, **kwargs)
    except Exception:  # noqa: BLE001 - jinja2's TemplateError, raised by the template
        return False
    return True


def renders_tools(chat: ChatTokenizer) -> bool:
    """Whether ``chat``'s template writes declared tools into the prompt at all
    (SmolLM2-135M-Instruct's ignores ``tools=``). Two renders, no ChatTokenizer built:
    ``with_tools`` would probe the template again and keep the probe in its cache."""
    hi = [Message(role="user", content="Hi.")]
    kwargs = {**chat.template_kwargs, "tokenize": False, "add_generation_prompt": True}
    with_tool = chat.tokenizer.apply_chat_template(hi, **{**kwargs, "tools": [_PROBE_TOOL]})
    return bool(with_tool != chat.tokenizer.apply_chat_template(hi, **kwargs))
