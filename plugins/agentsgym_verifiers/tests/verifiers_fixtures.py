"""What the verifiers tests share: verifiers' venv, a scripted model, served envs.

verifiers 0.4.0 cannot be installed beside the test venv (it pins ``openai<3`` and
``mcp==2.0.0``; agentsgym-gateway's tests pin openai 3, agentsgym-tools needs mcp
2.3), so the tests use a venv of its own: ``$AGENTSGYM_VERIFIERS_PYTHON`` when set,
else one they build once from the package index (``verifiers[openenv]==0.4.0`` and
``uv``, which verifiers' harnesses run) and keep in the temp dir for later runs. When
it cannot be built (no package index), the tests that need it are skipped, saying why.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentsgym_serve.model_server import OpenAICompatServer, ScriptedPolicy

VERIFIERS = "verifiers[openenv]==0.4.0"
TOKENIZER = "agentsgym/tiny-chatml"
MODEL = "agentsgym-test"
TASKSETS = Path(__file__).resolve().parent / "tasksets"
"""Taskset packages written as verifiers' docs say, put on verifiers' PYTHONPATH."""
BUILD_TIMEOUT_SECONDS = 1500


def verifiers_python() -> str:
    """The python of a venv with verifiers 0.4.0 (see the module docstring); skips the
    test when there is none and it cannot be built."""
    explicit = os.environ.get("AGENTSGYM_VERIFIERS_PYTHON")
    if explicit:
        return explicit
    venv = Path(tempfile.gettempdir()) / "agentsgym-verifiers-0.4.0"
    python = venv / "bin" / "python"
    done = venv / "installed"
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{venv}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one build, whichever test process comes first
        if not done.exists():
            _build(venv, python)
            done.write_text(VERIFIERS + "\n")
    return str(python)


def _build(venv: Path, python: Path) -> None:
    steps = [
        [sys.executable, "-m", "venv", "--clear", str(venv)],
        [str(python), "-m", "pip", "install", "-q", VERIFIERS, "uv"],
    ]
    for step in steps:
        try:
            result = subprocess.run(
                step, capture_output=True, text=True, timeout=BUILD_TIMEOUT_SECONDS, check=False
            )
        except subprocess.TimeoutExpired:
            pytest.skip(f"building verifiers' venv took over {BUILD_TIMEOUT_SECONDS} s")
        if result.returncode != 0:
            pytest.skip(
                f"verifiers' venv could not be built ({' '.join(step[2:4])} failed): "
                f"{result.stderr[-800:]}"
            )


@contextlib.contextmanager
def scripted_model(reply: Callable[[list[dict[str, Any]]], str]) -> Iterator[OpenAICompatServer]:
    """A loopback model server that answers ``reply(messages)`` and reports token ids
    the way vLLM does (prompt ids: the tiny tokenizer's rendering of the messages)."""
    with OpenAICompatServer(ScriptedPolicy(reply, tokenizer=TOKENIZER), models=[MODEL]) as server:
        yield server


def env_config(python: str, server: OpenAICompatServer | None, **extra: Any) -> dict[str, Any]:
    """A verifiers env's config: verifiers' python, the docs' tasksets on its path, and
    the scripted model as backend (none: the run's agent answers)."""
    config: dict[str, Any] = {
        "python": python,
        "python_path": [str(TASKSETS)],
        "sampling": {"max_tokens": 16},
    }
    if server is not None:
        config.update(backend_url=server.base_url, model=MODEL)
    return {**config, **extra}


def bisect_guess_the_number(messages: list[dict[str, Any]]) -> str:
    """Bisect GuessTheNumber from the hints in the payloads of verifiers' openenv
    taskset, answering with OpenEnv's action object (``{"message": "[50]"}``)."""
    low, high, guess = 1, 100, 0
    for message in messages:
        text = str(message["content"])
        if message["role"] == "assistant":
            guess = int(re.findall(r"\d+", text)[0])
        elif "lower" in text.split("action_schema")[0]:
            high = guess - 1
        elif "higher" in text.split("action_schema")[0]:
            low = guess + 1
    return json.dumps({"message": f"[{(low + high) // 2}]"})
