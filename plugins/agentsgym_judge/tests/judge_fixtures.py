"""Judge servers for the tests: agentsgym-serve's loopback OpenAI-compatible server
answering with scripted judges (a test module importing this is skipped without
agentsgym-serve and its extras). The fixtures serving them are in conftest.py."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
model_server = pytest.importorskip("agentsgym_serve.model_server")

JUDGE_MODEL = "judge-model"
GUARD = 60.0  # seconds: a hang guard, never a measurement


def field(prompt: str, name: str) -> str:
    """One field of the default template's prompt (the text under its heading)."""
    return prompt.split(f"{name}:\n", 1)[1].split("\n\n", 1)[0]


def exact_judge(messages: list[dict[str, str]]) -> str:
    """A judge that is right on numbers: yes when the response's text holds the reference."""
    prompt = messages[-1]["content"]
    return "yes" if field(prompt, "Reference answer") in field(prompt, "Response") else "no"


QUESTION = re.compile(r"What is (\d+) (.) (\d+)\?")


def player_and_judge(messages: list[dict[str, str]]) -> str:
    """Both parts of an OpenAnswer episode on one server: the player answers sums right
    and differences wrong; the judge is right on numbers but unreadable about products."""
    prompt = messages[-1]["content"]
    if "Reference answer:" in prompt:  # the judge
        return "I cannot tell." if " × " in prompt else exact_judge(messages)
    found = QUESTION.search(prompt)
    assert found is not None, prompt
    a, symbol, b = int(found.group(1)), found.group(2), int(found.group(3))
    if symbol == "+":
        return f"The answer is {a + b}."
    return str(a - b + 1) if symbol == "-" else str(a * b)


def wait_until(condition: Callable[[], bool], what: str) -> None:
    """Poll ``condition`` until it holds (a hang guard, not a timing)."""
    deadline = time.monotonic() + GUARD
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"still waiting for {what} after {GUARD:g}s")
        time.sleep(0.01)


class GatedPolicy:
    """A judge that holds every request until the gate opens (in the server's worker
    threads), counting the requests that arrived."""

    def __init__(self, reply: Callable[[list[dict[str, str]]], str] = exact_judge) -> None:
        self.reply = reply
        self.gate = threading.Event()
        self.arrived = 0
        self._lock = threading.Lock()

    def chat(self, messages: list[dict[str, str]], params: dict[str, Any]) -> Any:
        with self._lock:
            self.arrived += 1
        self.gate.wait(GUARD)
        return model_server.Reply(self.reply(messages))

    def complete(self, prompt: Any, params: dict[str, Any]) -> Any:
        raise NotImplementedError("a judge is asked through the chat API")


def serve(policy: Any) -> Any:
    """A started loopback server answering with ``policy`` as ``JUDGE_MODEL``."""
    return model_server.OpenAICompatServer(policy, models=[JUDGE_MODEL])


def judge_settings(server: Any, **settings: Any) -> dict[str, Any]:
    """JudgeConfig fields for ``server``: quick retries, no waiting on a dead server."""
    defaults = {
        "base_url": server.base_url,
        "model": JUDGE_MODEL,
        "retry_backoff_seconds": 0.01,
        "timeout_seconds": GUARD,
        "deadline_seconds": GUARD,
    }
    return {**defaults, **settings}
