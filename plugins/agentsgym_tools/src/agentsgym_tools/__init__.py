"""agentsgym-tools: tool-using environments for agentsgym.

An env declares plain functions as tools (:class:`ToolEnv`); their schemas reach the
chat template's ``tools=``, the model's calls are read by transformers' response
parsing, run concurrently under timeouts, and answered as ``tool`` messages that the
core tokenizes as deltas, token-exact. See the README of agentsgym-tools.
"""

from agentsgym_tools.agent import ScriptedToolAgent, ToolCalls, Turn
from agentsgym_tools.context import ToolContext
from agentsgym_tools.env import (
    ToolEnv,
    ToolEnvConfig,
    ToolLike,
    renders_parallel_calls,
    renders_tools,
)
from agentsgym_tools.errors import ToolDeclarationError, ToolError, ToolUnavailableError
from agentsgym_tools.mcp_tools import MCPToolError, MCPTools
from agentsgym_tools.parsing import HERMES_TEMPLATE, ParsedReply, ToolCallParser
from agentsgym_tools.runner import ToolRunner, tool_message
from agentsgym_tools.threads import ToolThreads
from agentsgym_tools.tool import Tool, as_tools, tool
from agentsgym_tools.toolbox import Toolbox
from agentsgym_tools.trl_environment import trl_environment

__all__ = [
    "HERMES_TEMPLATE",
    "MCPToolError",
    "MCPTools",
    "ParsedReply",
    "ScriptedToolAgent",
    "Tool",
    "ToolCallParser",
    "ToolCalls",
    "ToolContext",
    "ToolDeclarationError",
    "ToolEnv",
    "ToolEnvConfig",
    "ToolError",
    "ToolLike",
    "ToolRunner",
    "ToolThreads",
    "ToolUnavailableError",
    "Toolbox",
    "Turn",
    "as_tools",
    "renders_parallel_calls",
    "renders_tools",
    "tool",
    "tool_message",
    "trl_environment",
]
__version__ = "0.1.0"
