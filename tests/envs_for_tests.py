"""Small envs and agents the core tests play with."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from pydantic import Field

import agentsgym
from agentsgym import EnvConfig, MultistepEnv, StepResult, hookimpl


class CountdownConfig(EnvConfig):
    max_steps_per_episode: int = Field(default=5)
    start: int = 3
    step_reward: float = 0.5


class CountdownEnv(MultistepEnv):
    """The agent must say numbers counting down from task_data['start'] to 1.

    Each right number earns ``step_reward``; reaching 1 ends the episode with an
    extra 1.0. A reply of ``"boom"`` raises inside the env (to test failures).
    """

    config_class = CountdownConfig

    @hookimpl
    def initialize_episode(self, session_id: str, task_data: dict[str, Any]) -> dict[str, Any]:
        return {"next": int(task_data.get("start", self.config.start))}

    @hookimpl
    def format_prompt(self, state: dict[str, Any], step: int) -> Any:
        if step == 0:
            return [
                {"role": "system", "content": "Count down."},
                {"role": "user", "content": f"Say {state['next']}."},
            ]
        return f"Now say {state['next']}."

    @hookimpl
    def step_episode(self, state: dict[str, Any], action: str) -> StepResult:
        if "boom" in action:
            raise RuntimeError("the env exploded")
        words = action.split()
        if not words or words[-1] != str(state["next"]):
            return StepResult(state, 0.0, False, {"right": False})
        nxt = state["next"] - 1
        reward = self.config.step_reward + (1.0 if nxt == 0 else 0.0)
        return StepResult({"next": nxt}, reward, nxt == 0, {"right": True})


class InlineCountdownEnv(CountdownEnv):
    """CountdownEnv whose hooks (microseconds each) run on the event loop, not in a
    worker thread (bench/bench_openenv.py --inline-hooks)."""

    run_hooks_inline = True


class CountingAgent:
    """Counts down correctly, reading the number from the last user message."""

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.active = 0
        self.peak = 0
        self.calls = 0
        self._lock = threading.Lock()

    def get_action(self, messages: list[dict[str, str]], agent_state: Any) -> tuple[str, Any]:
        with self._lock:
            self.active += 1
            self.calls += 1
            self.peak = max(self.peak, self.active)
        try:
            if self.delay:
                time.sleep(self.delay)
            last = messages[-1]["content"]
            number = "".join(ch for ch in last if ch.isdigit())
            seen = (agent_state or 0) + 1
            return number, seen
        finally:
            with self._lock:
                self.active -= 1


def countdown(tokenizer: Any = None, **config: Any) -> CountdownEnv:
    return CountdownEnv(tokenizer=agentsgym.load_tokenizer(tokenizer), env_config=config)


class ConfiguredCountdownConfig(CountdownConfig):
    """A config with nested options and a URL, as envs that call services have."""

    service_url: str = ""
    service_options: dict[str, Any] = Field(default_factory=dict)


class ConfiguredCountdownEnv(CountdownEnv):
    config_class = ConfiguredCountdownConfig

    def get_train_dataset(self) -> Any:
        return self.make_dataset({"start": start} for start in (2, 3, 4))

    @hookimpl
    def initialize_episode(self, session_id: str, task_data: dict[str, Any]) -> dict[str, Any]:
        options, url = self.config.service_options, self.config.service_url
        if options.get("unreachable"):  # an error that quotes its config
            raise ConnectionError(f"cannot reach {url} with {options}")
        outage = options.get("outage_file")  # the service is down while this file exists
        if outage and Path(outage).exists() and task_data["start"] in options["outage_starts"]:
            raise ConnectionError(f"the service at {url} is down")
        return super().initialize_episode(session_id, task_data)


class ClosingCountdownEnv(ConfiguredCountdownEnv):
    """Counts its close() calls (what a run must do with an env that holds a client)."""

    closed = 0

    def close(self) -> None:
        type(self).closed += 1


class _SchemaOnlyToolbox:
    """The core's toolbox protocol at its smallest: schemas, and no call ever answered."""

    def __init__(self, schemas: list[dict[str, Any]]) -> None:
        self.schemas = schemas

    async def respond(self, action: Any) -> None:
        return None


def _function(name: str, description: str) -> dict[str, Any]:
    parameters = {"type": "object", "properties": {}}
    return {"type": "function", "function": {"name": name, "description": description,
                                             "parameters": parameters}}


class PerTaskToolsCountdownEnv(CountdownEnv):
    """Countdown whose tasks name their tools (``episode_tools`` written by hand)."""

    def get_train_dataset(self) -> Any:
        return self.make_dataset([{"start": 2, "tools": ["peek", "poke"]}, {"start": 3}])

    def episode_tools(self, task_data: dict[str, Any]) -> Any:
        names = task_data.get("tools", [])
        return _SchemaOnlyToolbox([_function(n, f"{n} at the counter") for n in names]) if names else None


class BrokenToolsCountdownEnv(CountdownEnv):
    """Countdown whose tools cannot be had."""

    def episode_tools(self, task_data: dict[str, Any]) -> Any:
        raise ConnectionError("the tool server is down")
