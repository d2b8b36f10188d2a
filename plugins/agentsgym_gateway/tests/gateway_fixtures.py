"""A loopback model server (agentsgym-serve) and a gateway in front of it."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from agentsgym_gateway import ModelGateway
from agentsgym_gateway.backend import BackendAnswer
from agentsgym_serve.model_server import OpenAICompatServer, ScriptedPolicy

TOKENIZER = "agentsgym/tiny-chatml"
MODEL = "agentsgym-test"


@contextmanager
def gateway_over(
    replies: Sequence[str] | Callable[[Any], str] = ("hello there",),
    *,
    vllm: bool = True,
    backend_api_key: str | None = None,
    **gateway_options: Any,
) -> Iterator[tuple[ModelGateway, OpenAICompatServer]]:
    """A gateway fronting a scripted loopback server that reports ids like vLLM."""
    policy = ScriptedPolicy(replies, tokenizer=TOKENIZER)
    server = OpenAICompatServer(policy, models=[MODEL], vllm=vllm, api_key=backend_api_key)
    with (
        server,
        ModelGateway(
            server.base_url, backend_api_key=backend_api_key, **gateway_options
        ) as gateway,
    ):
        yield gateway, server


class FakeBackend:
    """The part every in-process test backend shares: a model list, nothing to close.
    A subclass answers ``post`` (and ``open_stream``) as its test needs."""

    base_url = "fake://"

    async def get(self, path: str) -> BackendAnswer:
        return BackendAnswer(200, b'{"data": []}', "application/json")

    async def aclose(self) -> None:
        return None
