"""`agentsgym serve` answers OpenEnv's messages as openenv-core's own server does (issue
27, points 14 and 15): the same script of ``/ws`` messages, sent to openenv-core's
server of its template env (``openenv_echo``) and to agentsgym's, gets the same kinds of
replies (a reset with a key the env does not take, a step before any reset, a step after
the end); observations carry a ``prompt``; and with ``--observation textarena`` the
observations have the shape of OpenEnv's text envs, which TRL's OpenEnv Wordle example
reads (``messages[0].content`` is the transcript so far, the new part what follows the
previous content)."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import httpx
import pytest

pytest.importorskip("openenv.core")
from openenv.core import GenericEnvClient
from openenv.core.env_server.types import Observation, SchemaResponse
from pydantic import BaseModel

from agentsgym_serve import BackgroundServer
from agentsgym_serve.openenv_models import AgentsgymObservation, TextArenaObservation
from openenv_echo import MAX_STEPS, echo_app
from serve_helpers import GUESS, served

pytestmark = pytest.mark.timeout(180)
CONFIG = {"max_steps_per_episode": MAX_STEPS}  # both envs end after MAX_STEPS steps
WRONG = {"message": "[0]"}  # never the number: each guess is a step that goes on
SCRIPT = [
    {"type": "step", "data": WRONG},  # before any reset
    {"type": "reset", "data": {"task_data": {"seed": 1}, "level": 3}},  # a key nobody takes
    *[{"type": "step", "data": WRONG}] * MAX_STEPS,  # the last one ends the episode
    {"type": "step", "data": WRONG},  # after the end
    {"type": "state"},
    {"type": "reset", "data": {}},
]


async def exchange(url: str, script: list[dict[str, Any]]) -> list[dict[str, Any]]:
    from websockets.asyncio.client import connect

    replies = []
    async with connect(url.replace("http", "ws", 1) + "/ws") as ws:
        for message in script:
            await ws.send(json.dumps(message))
            replies.append(json.loads(await ws.recv()))
    return replies


def kinds(replies: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    """Each reply's type, with ``done`` for an observation and the code for an error."""
    out = []
    for reply in replies:
        data = reply["data"]
        if reply["type"] == "observation":
            out.append(("observation", data["done"]))
        elif reply["type"] == "error":
            out.append(("error", data["code"]))
        else:
            out.append((reply["type"], None))
    return out


def test_the_same_messages_get_the_replies_openenv_core_gives() -> None:
    with BackgroundServer(echo_app()) as theirs:
        reference = asyncio.run(exchange(theirs.url, SCRIPT))
    with served(GUESS, CONFIG) as ours:
        replies = asyncio.run(exchange(ours.url, SCRIPT))
    assert kinds(replies) == kinds(reference)
    assert kinds(replies)[-4:] == [
        ("observation", True),  # the step that ended it
        ("observation", True),  # after the end: answered, not an error
        ("state", None),
        ("observation", False),
    ]
    before, reset, *steps, after, state, _ = (r["data"] for r in replies)
    # a step before any reset started an episode (the split's next task) and was applied
    assert before["observation"]["episode"] == 1 and before["observation"]["step"] == 1
    assert before["observation"]["info"]["guess"] == 0
    # the unknown key was dropped; the known ones picked the task
    assert reset["observation"]["episode"] == 2 and reset["observation"]["step"] == 0
    assert [s["observation"]["step"] for s in steps] == list(range(1, MAX_STEPS + 1))
    # after the end nothing is applied, and the reply says so
    ignored = after["observation"]
    assert after["reward"] == 0.0 and ignored["messages"] == [] and ignored["step"] == MAX_STEPS
    assert "was not applied" in ignored["metadata"]["ignored"]
    assert state["step_count"] == MAX_STEPS and state["episode"] == 2
    AgentsgymObservation.model_validate(ignored)


def test_a_step_after_the_episode_failed_is_an_execution_error_as_openenv_answers_a_raise() -> None:
    script = [
        {"type": "reset", "data": {"task_data": {"seed": 1}}},
        {"type": "step", "data": {"message": "boom"}},
        {"type": "step", "data": {"message": "[2]"}},
    ]
    with served("serve_envs:ExplodingEnv", allow_class_paths=True) as server:
        replies = asyncio.run(exchange(server.url, script))
    assert kinds(replies) == [
        ("observation", False),
        ("error", "EXECUTION_ERROR"),  # the env raised
        ("error", "EXECUTION_ERROR"),  # and the episode stays failed until a reset
    ]
    assert "reset to start a new one" in replies[2]["data"]["message"]


def test_every_observation_carries_the_episodes_prompt() -> None:
    with served(GUESS, CONFIG) as server, GenericEnvClient(base_url=server.url).sync() as env:
        first = env.reset(data_idx=3).observation
        assert first["prompt"] == first["text"] and first["prompt"].startswith("I am thinking")
        result = env.step({"message": "[50]"})
        assert result.observation["prompt"] == first["prompt"]
        assert result.observation["text"] != first["prompt"]


class ArenaMessage(BaseModel):
    """A message as OpenEnv's textarena_env defines it: every field required."""

    sender_id: int
    content: str
    category: str


class ArenaObservation(Observation):
    """OpenEnv's TextArenaObservation: what TRL's Wordle example is handed."""

    prompt: str
    messages: list[ArenaMessage]
    current_player_id: int = 0
    legal_players: list[int]
    info: dict[str, Any]


class FeedbackReader:
    """The way TRL's OpenEnv Wordle example reads a TextArena env: the whole transcript
    is ``messages[0].content``; the feedback of a move is what was appended to it."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.last = ""
        self.reward = 0.0
        self.done = False

    def reset(self, **kwargs: Any) -> str:
        result = self.client.reset(**kwargs)
        self.last = self.parse(result.observation).messages[0].content
        self.reward, self.done = 0.0, False
        return self.last

    def move(self, message: str) -> str:
        result = self.client.step({"message": message})
        full = self.parse(result.observation).messages[0].content
        feedback, self.last = full[len(self.last) :], full
        self.reward, self.done = float(result.reward or 0.0), bool(result.done)
        return feedback

    @staticmethod
    def parse(observation: dict[str, Any]) -> ArenaObservation:
        fields = {k: v for k, v in observation.items() if k != "metadata"}
        return ArenaObservation.model_validate(fields)


def test_textarena_observations_are_read_by_trls_wordle_reading_code() -> None:
    with (
        served(GUESS, CONFIG | {"max_steps_per_episode": 8}, observation="textarena") as server,
        GenericEnvClient(base_url=server.url).sync() as env,
    ):
        reader = FeedbackReader(env)
        wins = 0
        for task in range(4):
            opening = reader.reset(data_idx=task)
            assert opening.startswith("I am thinking of an integer")
            low, high, feedbacks = 1, 100, []
            while not reader.done:
                guess = (low + high) // 2
                feedback = reader.move(f"[{guess}]")
                feedbacks.append(feedback)
                if "higher" in feedback:
                    low = guess + 1
                elif "lower" in feedback:
                    high = guess - 1
            assert feedbacks and feedbacks[-1] == ""  # the winning step: nothing more to say
            assert all(f.startswith("\n\n") and "wrong" in f for f in feedbacks[:-1])
            wins += reader.reward == 1.0
        assert wins == 4  # bisection finds 1..100 within 7 guesses
        metadata = env.step({"message": "[1]"}).observation["metadata"]
        assert metadata["env_id"] == GUESS and "was not applied" in metadata["ignored"]
        with httpx.Client(base_url=server.url) as http:
            schema = SchemaResponse.model_validate(http.get("/schema").json())
        assert schema.observation == TextArenaObservation.model_json_schema()


def test_textarena_observations_lose_nothing_of_agentsgyms() -> None:
    with served(GUESS, CONFIG, observation="textarena") as server:
        replies = asyncio.run(
            exchange(
                server.url,
                [
                    {"type": "reset", "data": {"data_idx": 3}},
                    {"type": "step", "data": {"message": "[50]"}},
                ],
            )
        )
    with served(GUESS, CONFIG) as server:
        plain = asyncio.run(
            exchange(
                server.url,
                [
                    {"type": "reset", "data": {"data_idx": 3}},
                    {"type": "step", "data": {"message": "[50]"}},
                ],
            )
        )
    for arena, chat in zip(replies, plain, strict=True):
        observation = TextArenaObservation.model_validate(arena["data"]["observation"])
        expected = chat["data"]["observation"]
        assert observation.prompt == expected["prompt"] and observation.info == expected["info"]
        kept = {k: v for k, v in expected.items() if k not in ("prompt", "info")}
        assert observation.metadata == {"env_id": GUESS, **kept}
        assert (arena["data"]["reward"], arena["data"]["done"]) == (
            chat["data"]["reward"],
            chat["data"]["done"],
        )
    transcript = replies[1]["data"]["observation"]["messages"][0]["content"]
    assert (
        transcript
        == plain[0]["data"]["observation"]["text"]
        + "\n\n"
        + (plain[1]["data"]["observation"]["text"])
    )
    assert re.search(r"50 is wrong", transcript)


def test_serve_takes_the_observation_shape_option() -> None:
    from typer.testing import CliRunner

    from agentsgym.cli import build_app

    result = CliRunner().invoke(build_app(), ["serve", GUESS, "--observation", "chat"])
    assert result.exit_code != 0 and "agentsgym or textarena" in result.output
