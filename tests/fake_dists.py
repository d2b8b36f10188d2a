"""Build installed-looking distributions (dist-info + module) in a folder on sys.path.

importlib.metadata finds them exactly as it finds a pip-installed package, so the
entry-point discovery under test is the real one.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

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


def install_fake_dist(
    root: Path, dist: str, module: str, source: str, *, ep_name: str | None = None, version: str = "1.0"
) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / f"{module}.py").write_text(textwrap.dedent(source).replace("{module}", module))
    info = root / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(f"[agentsgym]\n{ep_name or module} = {module}\n")


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
