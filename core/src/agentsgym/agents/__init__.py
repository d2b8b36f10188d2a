"""Agents: the Agent protocol and the scripted agents that ship with the core."""

from agentsgym.agents.base import Agent, call_agent
from agentsgym.agents.scripted import FunctionAgent, ScriptedAgent

__all__ = ["Agent", "FunctionAgent", "ScriptedAgent", "call_agent"]
