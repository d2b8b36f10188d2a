"""The loopback OpenAI-compatible model server on the tiny random model, as the
tests of the openai agent and of the server's token fidelity start it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from agentsgym_serve.model_server import OpenAICompatServer
from agentsgym_trl import ModelPolicy

TINY = "agentsgym/tiny-chatml"


@contextlib.contextmanager
def tiny_model_server(models: tuple[str, ...] = ("tiny",), **options: Any) -> Iterator[Any]:
    """``OpenAICompatServer`` serving ``ModelPolicy("tiny", TINY, seed=0)`` under the
    names ``models`` (``options``: the server's other keywords, such as ``vllm``); the
    policy is closed after the server stops."""
    policy = ModelPolicy("tiny", TINY, seed=0)
    try:
        with OpenAICompatServer(policy, models=list(models), **options) as server:
            yield server
    finally:
        policy.close()
