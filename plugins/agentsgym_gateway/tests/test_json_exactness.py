"""orjson on the gateway's hot path changes no value and no byte the program gets: a
backend's answer, rewritten without the fields the gateway added, is the backend's own
bytes whether it writes JSON as Python's ``json`` or as orjson does, with small floats,
integers beyond 64 bits and NaN; ids are kept as parsed, not copied."""

from __future__ import annotations

import json
import math
import random
import struct
from typing import Any

import httpx
import orjson
import pytest

from agentsgym_gateway import ModelGateway
from agentsgym_gateway.backend import BackendAnswer
from agentsgym_gateway.jsonio import dumps, loads, loads_request, parse_answer
from agentsgym_gateway.wire import token_ids
from gateway_fixtures import FakeBackend

PROMPT_IDS = [101, 102, 103]
COMPLETION_IDS = [7, 8]


def _python_json(body: Any) -> bytes:
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


def test_loads_gives_json_loads_values_where_orjson_would_not() -> None:
    texts = [
        b"18446744073709551616",  # past 64 bits: orjson reads it as a float
        b"-9223372036854775809",
        b'{"seed":123456789012345678901234567890,"a":1,"a":2}',
        b"[NaN,Infinity,-Infinity,1e400]",
        b'\xef\xbb\xbf{"bom":true}',
        b'{"t":"\\u00e9\\ud83d\\ude00","x":-3.2e-06,"y":1E5}',
    ]
    for text in texts:
        assert repr(loads(text)) == repr(json.loads(text))
        assert repr(parse_answer(text)[0]) == repr(json.loads(text))
    ids = list(range(10**18, 10**18 + 50))  # 19 digits each, within 64 bits
    for text in (_python_json({"x": -3.2e-06, "ids": ids}), orjson.dumps({"ids": ids})):
        assert parse_answer(text)[0] == json.loads(text)
    assert parse_answer(orjson.dumps({"x": -3.2e-06}))[1]  # orjson's form, kept
    assert not parse_answer(_python_json({"x": -3.2e-06}))[1]
    rng = random.Random(0)
    for _ in range(2000):  # any finite double reads back as the same double
        value = struct.unpack("d", struct.pack("Q", rng.getrandbits(64)))[0]
        if math.isfinite(value):
            assert loads(_python_json([value]))[0] == value


def test_a_request_of_nan_or_a_number_past_floats_is_refused_and_big_ints_stay_exact() -> None:
    for text in (b'{"temperature":NaN}', b'{"top_p":Infinity}', b'{"x":1e400}'):
        with pytest.raises(ValueError):
            loads_request(text)
    big = {"seed": 2**70, "n": -(2**63) - 1}
    assert loads_request(_python_json(big)) == big
    assert loads(dumps(big)) == big  # past 64 bits written by json, not refused


def test_token_ids_are_kept_as_parsed_and_only_odd_lists_are_converted() -> None:
    ids = loads(b"[1,2,3]")
    assert token_ids(ids) is ids  # no copy
    assert token_ids([1, 2.0, "3"]) == [1, 2, 3]
    assert token_ids(None) is None
    with pytest.raises(ValueError):
        token_ids([1, "a"])


class _Writer(FakeBackend):
    """A backend answering one chat completion written by ``write``, with the ids and
    logprobs the gateway asks for, and fields an orjson re-write would change."""

    base_url = "writer://"

    def __init__(self, write: Any) -> None:
        self.write = write
        self.sent: list[bytes] = []

    def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        logprobs = [{"token": "a", "logprob": -3.2e-06}, {"token": "b", "logprob": -1e-05}]
        message = {"role": "assistant", "content": "é ok \u2028 \x7f"}
        choice = {"index": 0, "message": message, "logprobs": {"content": logprobs}}
        return {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 0,
            "model": request["model"],
            "choices": [{**choice, "finish_reason": "stop", "token_ids": COMPLETION_IDS}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
            "system_fingerprint": 2**70,  # an integer past 64 bits
            "score": 1e-07,
            "prompt_token_ids": PROMPT_IDS,
        }

    async def post(self, path: str, body: bytes, context: Any = None) -> BackendAnswer:
        self.sent.append(body)
        return BackendAnswer(200, self.write(self.answer(json.loads(body))), "application/json")


def _orjson_writer(body: dict[str, Any]) -> bytes:
    return orjson.dumps({k: v for k, v in body.items() if k != "system_fingerprint"})


def _with_nan(body: dict[str, Any]) -> bytes:
    return _python_json({**body, "score": float("nan")})


@pytest.mark.parametrize("write", [_python_json, _orjson_writer, _with_nan])
def test_the_program_gets_the_backends_bytes_less_the_added_fields(write: Any) -> None:
    backend = _Writer(write)
    request = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    with ModelGateway(backend=backend) as gateway:
        session = gateway.open_session()
        headers = {"Authorization": f"Bearer {session.api_key}"}
        url = session.base_url + "/chat/completions"
        plain = httpx.post(url, json=request, headers=headers)
        asked = httpx.post(url, json={**request, "logprobs": True}, headers=headers)
        everything = {**request, "logprobs": True, "return_token_ids": True}
        whole = httpx.post(url, json=everything, headers=headers)
        calls = gateway.close_session(session)
    full = backend.answer(request)
    expected = dict(full)
    expected.pop("prompt_token_ids")
    choice = {k: v for k, v in full["choices"][0].items() if k != "token_ids"}
    assert asked.content == write({**expected, "choices": [choice]})
    assert plain.content == write({**expected, "choices": [{**choice, "logprobs": None}]})
    assert whole.content == write(full)  # nothing added: the bytes as they came
    assert [c.prompt_token_ids for c in calls] == [PROMPT_IDS] * 3
    assert [c.completion_token_ids for c in calls] == [COMPLETION_IDS] * 3
    assert calls[0].logprobs == [-3.2e-06, -1e-05]


def test_a_request_with_nan_is_refused_before_the_backend() -> None:
    backend = _Writer(_python_json)
    with ModelGateway(backend=backend) as gateway:
        session = gateway.open_session()
        answer = httpx.post(
            session.base_url + "/chat/completions",
            content=b'{"model":"m","messages":[],"temperature":NaN}',
            headers={"Authorization": f"Bearer {session.api_key}"},
        )
        gateway.close_session(session)
    assert answer.status_code == 400
    assert "NaN is not JSON" in answer.json()["error"]["message"]
    assert backend.sent == []
