"""A large request body (1 MiB and more) costs the gateway about twice its size, not
the 13 times orjson's parser takes, its values are the same, and once its call is
answered the memory it freed goes back to the system. (The process-wide figures, RSS
included, are bench/README.md's: tracemalloc's count of one call's allocations is
deterministic, a process's RSS is not.)"""

from __future__ import annotations

import asyncio
import json
import threading
import tracemalloc
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from agentsgym_gateway import app as gateway_app
from agentsgym_gateway.jsonio import LARGE_BODY_BYTES, dumps, loads, loads_request
from agentsgym_gateway.limits import BodyTooLarge, read_bounded
from gateway_fixtures import MODEL, gateway_over

CONTENT = "a long file, line after line: é ✓ \n" * (2 * LARGE_BODY_BYTES // 36)
BODY = {"model": MODEL, "messages": [{"role": "user", "content": CONTENT}], "seed": 2**70}


def _peak(work: Callable[[], Any]) -> int:
    """The most memory ``work`` held at once beyond what it returned (tracemalloc)."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        result = work()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    del result
    return peak - before


def test_a_large_body_is_read_and_written_with_the_values_of_a_small_one() -> None:
    raw = json.dumps(BODY).encode()
    assert len(raw) >= LARGE_BODY_BYTES
    body = loads_request(raw)
    assert body == json.loads(raw) and body["seed"] == 2**70  # exact past 64 bits
    assert json.loads(dumps(body, large=True)) == body == loads(raw)
    with pytest.raises(ValueError, match="not JSON"):
        loads_request(raw[:-1] + b',"temperature":NaN}')


def test_a_large_body_takes_about_twice_its_size_to_read_and_write() -> None:
    raw = json.dumps(BODY).encode()
    body = loads_request(raw)
    assert _peak(lambda: loads_request(raw)) < 3 * len(raw)  # orjson's parser: 13 times
    assert _peak(lambda: dumps(body, large=True)) < 3 * len(raw)  # orjson: up to 16 times


def test_memory_is_given_back_after_a_large_call_only(monkeypatch: pytest.MonkeyPatch) -> None:
    released = threading.Event()
    monkeypatch.setattr(gateway_app, "release_freed_memory", released.set)
    with gateway_over(["ok"]) as (gateway, _):
        session = gateway.open_session()
        headers = {"Authorization": f"Bearer {session.api_key}"}
        url = f"{session.base_url}/chat/completions"
        small = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
        assert httpx.post(url, json=small, headers=headers, timeout=60).status_code == 200
        assert not released.is_set()  # a small call has nothing to give back
        large = httpx.post(url, json=BODY, headers=headers, timeout=120)
        assert large.status_code == 200
        assert released.wait(60)  # once the answer is sent
        calls = gateway.close_session(session)
    assert calls[-1].messages == BODY["messages"]


class _Pieces:
    """A request whose body arrives in ``pieces``, declaring ``declared`` bytes."""

    def __init__(self, pieces: list[bytes], declared: int | None) -> None:
        self.pieces = pieces
        self.headers = {} if declared is None else {"content-length": str(declared)}

    async def stream(self) -> Any:
        for piece in self.pieces:
            yield piece


@pytest.mark.parametrize(
    ("pieces", "declared"),
    [
        ([b'{"a": 1}'], 8),  # one piece: the body as it came
        ([b'{"a"', b": 1}"], 8),  # several: one buffer of the declared size
        ([b'{"a"', b": 1}"], None),  # no declared size
        ([b'{"a"', b": 12}"], 8),  # more than declared: the buffer grows
        ([b"", b'{"a": 1}'], 8),
        ([], 0),
    ],
)
def test_a_body_in_pieces_is_read_whole(pieces: list[bytes], declared: int | None) -> None:
    body = asyncio.run(read_bounded(_Pieces(pieces, declared), 1024))
    assert bytes(body) == b"".join(pieces)
    if len(pieces) == 1:
        assert body is pieces[0]  # not copied


def test_a_body_past_the_limit_is_refused_while_it_arrives() -> None:
    with pytest.raises(BodyTooLarge):
        asyncio.run(read_bounded(_Pieces([b"x" * 600, b"y" * 600], None), 1000))
    with pytest.raises(BodyTooLarge):  # a declared size past the limit: nothing is read
        asyncio.run(read_bounded(_Pieces([], 5000), 1000))
