"""Sources of plugin modules for the tests of discovery, installed as distributions
with :func:`agentsgym_scaffold.install_plugin`."""

from __future__ import annotations

GOOD_PLUGIN = '''
import agentsgym
from agentsgym import MultistepEnv, StepResult, hookimpl


class EchoEnv(MultistepEnv):
    """Say the secret word to win."""

    @hookimpl
    def initialize_episode(self, session_id, task_data):
        return task_data.get("word", "hello")

    @hookimpl
    def format_prompt(self, state, step):
        return f"Say {state}."

    @hookimpl
    def step_episode(self, state, action):
        won = state in action
        return StepResult(state, float(won), won, {"won": won})

    def get_train_dataset(self):
        return self.make_dataset([{"word": "alpha"}, {"word": "beta"}])

    def get_eval_dataset(self):
        return self.make_dataset([{"word": "gamma"}])


class EchoAgent:
    def get_action(self, messages, agent_state):
        return messages[-1]["content"].split()[-1].rstrip("."), agent_state


@hookimpl
def register_envs(register):
    register("echo/Echo-v0", "{module}:EchoEnv", description="say the word", default_agent="echo/echo")


@hookimpl
def register_agents(register):
    register("echo/echo", "{module}:EchoAgent", description="repeats the word")


class RecordingTrainer:
    """A trainer adapter that only remembers its options."""

    def __init__(self, **options):
        self.options = options


@hookimpl
def register_trainers(register):
    register("echo/recording", "{module}:RecordingTrainer", description="records options")
'''


STALLING_AGENT = '''
import os
import time
from pathlib import Path

from agentsgym import hookimpl


class CountingUpAgent:
    """Guesses [1], [2], ... in turn; at guess 5 it stalls, like a hung model server."""

    def get_action(self, messages, agent_state):
        guess = sum(1 for m in messages if m["role"] == "user")
        if guess >= 5:
            Path(os.environ["STALL_MARKER"]).touch()
            time.sleep(30)
        return f"[{guess}]", agent_state


@hookimpl
def register_agents(register):
    register("stall/counting-up", "{module}:CountingUpAgent", description="stalls at guess 5")
'''
