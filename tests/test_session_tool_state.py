"""A toolbox whose ``respond`` takes ``state=`` is given the episode's current state (the
one ``step_episode`` returned last, not only the first), one that takes ``session_id=``
its episode's session id; one of the bare protocol, ``respond(action)``, is called
without them."""

from __future__ import annotations

import asyncio
from typing import Any

from agentsgym import AgentAction
from agentsgym.engine import EpisodeSession, HookRuntime, WorkerPool
from envs_for_tests import CountdownEnv

PEEK = {"type": "function", "function": {"name": "peek", "parameters": {}}}


class StateToolbox:
    """Answers a reply that says ``peek`` and records the state it was given."""

    def __init__(self) -> None:
        self.schemas = [PEEK]
        self.seen: list[Any] = []

    async def respond(self, action: AgentAction, *, state: Any = None) -> Any:
        if "peek" not in action.text:
            return None
        self.seen.append(state)
        call = {"id": "call_0", "type": "function", "function": {"name": "peek", "arguments": {}}}
        reply = {"role": "assistant", "content": "", "tool_calls": [call]}
        return reply, [{"role": "tool", "tool_call_id": "call_0", "name": "peek", "content": "?"}]


class BareToolbox(StateToolbox):
    """The core's protocol at its barest: ``respond(action)``."""

    async def respond(self, action: AgentAction) -> Any:  # type: ignore[override]
        return await super().respond(action, state="never given")


class SessionToolbox(StateToolbox):
    """Takes both: records the state and the session id it was given."""

    async def respond(self, action: AgentAction, **episode: Any) -> Any:
        return await super().respond(action, state=(episode["state"], episode["session_id"]))


class ToolCountdownEnv(CountdownEnv):
    def __init__(self, toolbox: StateToolbox) -> None:
        super().__init__(env_config={})
        self.toolbox = toolbox

    def episode_tools(self, task_data: dict[str, Any]) -> StateToolbox:
        return self.toolbox


def play(toolbox: StateToolbox) -> None:
    env = ToolCountdownEnv(toolbox)

    async def drive() -> None:
        session = EpisodeSession(env, "s-1", {"start": 3}, runtime=HookRuntime(env, WorkerPool(2)))
        await session.start()
        await session.step(AgentAction("peek"))
        await session.step(AgentAction("3"))  # step_episode returns the next state
        await session.step(AgentAction("peek"))
        await session.finish()

    asyncio.run(drive())


def test_the_tools_see_the_state_step_episode_returned() -> None:
    toolbox = StateToolbox()
    play(toolbox)
    assert toolbox.seen == [{"next": 3}, {"next": 2}]


def test_a_toolbox_of_the_bare_protocol_is_called_without_state() -> None:
    toolbox = BareToolbox()
    play(toolbox)
    assert toolbox.seen == ["never given", "never given"]


def test_a_toolbox_that_takes_the_session_id_is_told_its_episodes() -> None:
    """Two episodes of one task object at once: each call names its own episode (a
    toolbox never tells episodes apart by their task)."""
    env = ToolCountdownEnv(SessionToolbox())
    task = {"start": 3}

    async def drive() -> None:
        runtime = HookRuntime(env, WorkerPool(2))
        sessions = [EpisodeSession(env, f"s-{n}", task, runtime=runtime) for n in (1, 2)]
        await asyncio.gather(*(session.start() for session in sessions))
        for session in reversed(sessions):
            await session.step(AgentAction("peek"))

    asyncio.run(drive())
    assert env.toolbox.seen == [({"next": 3}, "s-2"), ({"next": 3}, "s-1")]
