"""vLLM's RL API on the loopback model server, for tests of a trainer that drives vLLM.

vLLM (0.32, ``VLLM_SERVER_DEV_MODE=1``, ``--enable-scale-out``) lets a trainer pause
generation with the requests in flight kept, label the weights it serves, reload them
in place, and generate token-in with each token's weight version. The loopback server
(``OpenAICompatServer`` with ``vllm=True``) answers the same routes, as vLLM shapes
them:

* ``GET /health``; ``GET /get_world_size`` (1);
* ``POST /pause?mode=keep|abort``, ``POST /resume``, ``GET /is_paused``: ``keep``
  freezes every reply between two tokens until ``/resume``, ``abort`` ends the replies
  in flight (``finish_reason`` ``"abort"``); requests arriving while paused wait;
* ``POST /update_weight_version`` ``{"new_version": "3"}``, ``GET /weight_info``: the
  label of the weights served (``"default"`` until one is set);
* ``POST /collective_rpc`` ``{"method": "reload_weights", "kwargs": {"weights_path":
  FOLDER}}``: the policy's ``load_weights(FOLDER)`` (agentsgym-trl's ``ModelPolicy``);
* ``POST /inference/v1/generate``: token-in (``token_ids``, ``sampling_params``),
  non-streamed; the choice carries the sampled ``token_ids``, their logprobs
  (``sampling_params.logprobs`` set; the alternatives hold the sampled token only) and
  ``weight_versions``, the spans of output tokens and the label each was emitted under.

The policy generates a whole reply at once; the server then emits its tokens one at a
time, each waiting while generation is paused and labelled with the version served
when it is emitted, which is how vLLM labels the tokens it samples. For deterministic
tests, :meth:`VLLMEngine.hold_after` stops every reply after a number of tokens until
:meth:`VLLMEngine.release`, and :meth:`VLLMEngine.fail_route` makes a route answer an
HTTP error or hang.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

GENERATE_PATH = "/inference/v1/generate"
POLL_SECONDS = 0.005


class VLLMEngine:
    """The engine state behind the routes: pause, weight label, holds and failures."""

    def __init__(self) -> None:
        self.weight_version = "default"
        self.paused = False
        self.generation = 0  # bumped by an abort: replies begun before it end
        self.reloads: list[str] = []
        self._hold_after: int | None = None
        self.held = threading.Event()
        self._released = threading.Event()
        self._failures: dict[str, tuple[int, float]] = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ test controls
    def hold_after(self, tokens: int) -> threading.Event:
        """Stop every reply after ``tokens`` emitted tokens until :meth:`release`; the
        event is set once a reply is held there."""
        self.held.clear()
        self._released.clear()
        self._hold_after = tokens
        return self.held

    def release(self) -> None:
        self._hold_after = None
        self._released.set()

    def fail_route(self, path: str, status: int = 500, *, hang: float = 0.0) -> None:
        """Answer the next call of ``path`` (``/pause``, ``/collective_rpc``...) with HTTP
        ``status``, after holding it ``hang`` seconds (``status`` 0: answer normally
        after the hang)."""
        with self._lock:
            self._failures[path] = (status, hang)

    def take_failure(self, path: str) -> tuple[int, float] | None:
        with self._lock:
            return self._failures.pop(path, None)

    # ------------------------------------------------------------------ emission
    async def emit(self, count: int) -> tuple[list[str], bool]:
        """Emit ``count`` tokens, one at a time: each one's label, and whether the reply
        was aborted (then fewer labels)."""
        labels: list[str] = []
        started = self.generation
        for position in range(count):
            while self.paused or self._holding(position):
                if self.generation != started:
                    return labels, True
                await asyncio.sleep(POLL_SECONDS)
            if self.generation != started:
                return labels, True
            labels.append(self.weight_version)
            await asyncio.sleep(0)
        return labels, False

    def _holding(self, position: int) -> bool:
        hold = self._hold_after
        if hold is None or position < hold or self._released.is_set():
            return False
        self.held.set()
        return True


def spans(labels: list[str]) -> list[dict[str, Any]]:
    """vLLM's ``weight_versions``: contiguous spans of output tokens with one label."""
    result: list[dict[str, Any]] = []
    for index, label in enumerate(labels):
        if result and result[-1]["version"] == label:
            result[-1]["end"] = index + 1
        else:
            result.append({"version": label, "start": index, "end": index + 1})
    return result


def vllm_routes(server: Any) -> list[Route]:
    """vLLM's RL routes and its generate API (module docstring) for ``server``, the
    loopback model server: its ``engine`` (a :class:`VLLMEngine`), its ``policy``,
    ``update_weights`` and ``token_text``."""
    engine = server.engine

    async def failure(path: str) -> JSONResponse | None:
        injected = engine.take_failure(path)
        if injected is None:
            return None
        status, hang = injected
        if hang:
            await asyncio.sleep(hang)
        if not status:
            return None
        return JSONResponse({"error": f"injected failure {status}"}, status_code=status)

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({})

    async def world_size(request: Request) -> JSONResponse:
        return JSONResponse({"world_size": 1})

    async def pause(request: Request) -> JSONResponse:
        if (failed := await failure("/pause")) is not None:
            return failed
        mode = request.query_params.get("mode", "abort")
        if mode not in ("keep", "abort"):
            return JSONResponse({"error": f"mode {mode!r}: keep or abort"}, status_code=400)
        engine.paused = True
        if mode == "abort":
            engine.generation += 1
        return JSONResponse({"status": "paused"})

    async def resume(request: Request) -> JSONResponse:
        if (failed := await failure("/resume")) is not None:
            return failed
        engine.paused = False
        return JSONResponse({"status": "resumed"})

    async def is_paused(request: Request) -> JSONResponse:
        return JSONResponse({"is_paused": engine.paused})

    async def update_weight_version(request: Request) -> JSONResponse:
        if (failed := await failure("/update_weight_version")) is not None:
            return failed
        body = await request.json()
        engine.weight_version = str(body["new_version"])
        return JSONResponse({"success": True, "new_version": engine.weight_version})

    async def weight_info(request: Request) -> JSONResponse:
        if (failed := await failure("/weight_info")) is not None:
            return failed
        return JSONResponse({"weight_version": engine.weight_version})

    async def collective_rpc(request: Request) -> JSONResponse:
        if (failed := await failure("/collective_rpc")) is not None:
            return failed
        body = await request.json()
        if body.get("method") != "reload_weights":
            return JSONResponse({"error": f"unknown method {body.get('method')!r}"}, 400)
        folder = str((body.get("kwargs") or {}).get("weights_path"))
        try:
            await run_in_threadpool(server.update_weights, folder, version=server.policy_version)
        except (ValueError, OSError) as exc:
            return JSONResponse({"error": f"reload_weights failed: {exc}"}, status_code=500)
        engine.reloads.append(folder)
        return JSONResponse({"results": [None]})

    async def generate(request: Request) -> JSONResponse:
        if (failed := await failure(GENERATE_PATH)) is not None:
            return failed
        body = await request.json()
        server.requests.append(body)  # kept like the OpenAI routes' requests
        sampling = dict(body.get("sampling_params") or {})
        reply = await run_in_threadpool(server.policy.complete, list(body["token_ids"]), sampling)
        ids = list(reply.token_ids or [])
        labels, aborted = await engine.emit(len(ids))
        ids = ids[: len(labels)]
        choice: dict[str, Any] = {
            "index": 0,
            "text": reply.text if not aborted else "",
            "token_ids": ids,
            "finish_reason": "abort" if aborted else reply.finish_reason,
            "stop_reason": None,
            "weight_versions": spans(labels),
            "logprobs": None,
        }
        if sampling.get("logprobs") is not None and reply.logprobs is not None:
            tokens = [server.token_text(i) for i in ids]
            # The sampled token only among the alternatives: the policy knows no others.
            choice["logprobs"] = {
                "content": [
                    {
                        "token": t,
                        "token_id": i,
                        "logprob": lp,
                        "bytes": list(t.encode()),
                        "top_logprobs": [{"token": t, "token_id": i, "logprob": lp}],
                    }
                    for t, i, lp in zip(tokens, ids, reply.logprobs)
                ]
            }
        answer = {
            "request_id": str(uuid.uuid4()),
            "model": body.get("model"),
            "created": int(time.time()),
            "output_mode": body.get("output_mode", "tokens"),
            "prompt_token_ids": None,
            "usage": {
                "prompt_tokens": len(body["token_ids"]),
                "completion_tokens": len(ids),
                "total_tokens": len(body["token_ids"]) + len(ids),
            },
            "choices": [choice],
        }
        return JSONResponse(answer)

    return [
        Route("/health", health, methods=["GET"]),
        Route("/get_world_size", world_size, methods=["GET"]),
        Route("/pause", pause, methods=["POST"]),
        Route("/resume", resume, methods=["POST"]),
        Route("/is_paused", is_paused, methods=["GET"]),
        Route("/update_weight_version", update_weight_version, methods=["POST"]),
        Route("/weight_info", weight_info, methods=["GET"]),
        Route("/collective_rpc", collective_rpc, methods=["POST"]),
        Route(GENERATE_PATH, generate, methods=["POST"]),
    ]
