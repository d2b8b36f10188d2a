"""The processes of bench_gateway.py's overhead and memory parts, one role per process.

    python bench/gateway_overhead.py backend DELAY PROMPT_TOKENS   an instant model backend
    python bench/gateway_overhead.py hop BACKEND_URL      a bare proxy (the floor of a hop)
    python bench/gateway_overhead.py gateway BACKEND_URL SESSIONS   the instrumented gateway
    python bench/gateway_overhead.py load URL KEYS CALLS STAGGER SEED   one arm's calls
    python bench/gateway_overhead.py memory BACKEND_URL TRACED   the gateway, memory watched

Each server prints its URL (the gateway: its URL and session keys, as JSON) on its
first line and serves until killed; ``/_bench/*`` answers the benchmark's questions.
The load generator prints its result as JSON and exits.

* backend: answers every chat call with canned bytes (``PROMPT_TOKENS`` prompt ids,
  four completion ids and their logprobs when the request asked for them, as vLLM
  does) after ``DELAY`` seconds of sleep (a model's generation time; 0: at once). Its
  CPU per call is a raw ASGI app's.
* hop: a raw ASGI app that forwards each body to the backend over aiohttp and answers
  its bytes: what any proxy in that place costs (a process more, two loopback hops).
  Backend and hop answer ``/_bench/cpu`` with their CPU seconds so far.
* gateway: ``ModelGateway``'s app, sessions and server, the app inside an ASGI
  middleware that times each call, and its backend inside a wrapper that times the
  backend's part of it; the gateway's own time is the difference. ``/_bench/stats`` returns both and the
  process's CPU seconds since ``/_bench/reset``; ``/_bench/profile-start`` and
  ``/_bench/profile-stop`` run cProfile (CPU time) in the server's thread.
* memory: ``ModelGateway`` with one session (under tracemalloc when ``TRACED`` is 1:
  it counts Python's allocations, and its own bookkeeping weighs on the RSS, so the
  bench takes the RSS from an untraced process); ``/_bench/mark`` takes the baseline
  (after a collection) and ``/_bench/measure`` answers, against it, the process's RSS,
  the Python memory held and the most held at once since the mark (``/_bench/close``
  closes the session first).
* load: every session (one per key) makes its calls one after another, starting
  after a random offset in ``[0, STAGGER)`` (seeded), so that sessions of a slow
  backend arrive spread out rather than all at once; prints the latencies of the calls
  that succeeded, the failures and the process's CPU seconds.
"""

from __future__ import annotations

import asyncio
import contextvars
import cProfile
import io
import json
import pstats
import random
import sys
import time
from typing import Any

from agentsgym_serve import BackgroundServer

COMPLETION_IDS = [7, 8, 9, 10]
REQUEST = {
    "model": "bench-model",
    "messages": [
        {"role": "system", "content": "You are a careful assistant."},
        {"role": "user", "content": "Say ok."},
    ],
}
JSON_HEADERS = [(b"content-type", b"application/json")]


def serve_forever(app: Any, first_line: str) -> None:
    server = BackgroundServer(app, backlog=4096, name="bench").start()
    print(first_line.replace("{url}", server.url), flush=True)
    while True:
        time.sleep(3600)


async def lifespan(receive: Any, send: Any) -> None:
    while (await receive())["type"] != "lifespan.shutdown":
        await send({"type": "lifespan.startup.complete"})
    await send({"type": "lifespan.shutdown.complete"})


async def read_body(receive: Any) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


async def answer(send: Any, body: bytes, status: int = 200) -> None:
    await send({"type": "http.response.start", "status": status, "headers": JSON_HEADERS})
    await send({"type": "http.response.body", "body": body})


# ---------------------------------------------------------------- backend
def canned_answer(with_ids: bool, prompt_tokens: int = 40) -> bytes:
    logprobs = [
        {"token": f"t{i}", "logprob": -0.25, "bytes": [116], "top_logprobs": []}
        for i in COMPLETION_IDS
    ]
    choice: dict[str, Any] = {
        "index": 0,
        "finish_reason": "stop",
        "message": {"role": "assistant", "content": "ok, done."},
        "logprobs": {"content": logprobs} if with_ids else None,
    }
    body: dict[str, Any] = {
        "id": "chatcmpl-1",
        "created": 0,
        "model": "bench-model",
        "choices": [choice],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": len(COMPLETION_IDS),
            "total_tokens": prompt_tokens + len(COMPLETION_IDS),
        },
        "object": "chat.completion",
    }
    if with_ids:
        choice["token_ids"] = COMPLETION_IDS
        body["prompt_token_ids"] = list(range(100, 100 + prompt_tokens))
    return json.dumps(body, separators=(",", ":")).encode()


def backend(delay: float, prompt_tokens: int) -> None:
    plain, with_ids = canned_answer(False, prompt_tokens), canned_answer(True, prompt_tokens)

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            return await lifespan(receive, send)
        if scope["path"] == "/_bench/cpu":
            return await answer(send, json.dumps({"cpu": time.process_time()}).encode())
        body = await read_body(receive)
        if delay:
            await asyncio.sleep(delay)
        await answer(send, with_ids if b'"return_token_ids"' in body else plain)

    serve_forever(app, "{url}/v1")


# ---------------------------------------------------------------- hop
def hop(backend_url: str) -> None:
    import aiohttp

    client: list[aiohttp.ClientSession] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            return await lifespan(receive, send)
        if scope["path"] == "/_bench/cpu":
            return await answer(send, json.dumps({"cpu": time.process_time()}).encode())
        if not client:
            client.append(aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)))
        body = await read_body(receive)
        path = scope["path"].removeprefix("/v1")
        headers = {"Content-Type": "application/json"}
        async with client[0].post(backend_url + path, data=body, headers=headers) as reply:
            await answer(send, await reply.read(), reply.status)

    serve_forever(app, "{url}/v1")


# ---------------------------------------------------------------- gateway
def gateway(backend_url: str, sessions: int) -> None:
    from agentsgym_gateway import ModelGateway
    from agentsgym_gateway.server import BackgroundServer as GatewayServer

    backend_part: contextvars.ContextVar[list[float]] = contextvars.ContextVar("backend_part")
    own_ms: list[float] = []
    backend_ms: list[float] = []
    since = [time.process_time()]
    profiler = cProfile.Profile(time.thread_time)  # CPU time: a preempted write costs none

    class TimedBackend:
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        async def post(self, path: str, body: bytes, context: Any = None) -> Any:
            start = time.perf_counter()
            try:
                return await self.inner.post(path, body)
            finally:
                backend_part.get().append(time.perf_counter() - start)

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

    class Timed:
        def __init__(self, app: Any) -> None:
            self.app = app

        async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
            if scope["type"] != "http":
                return await self.app(scope, receive, send)
            if scope["path"].startswith("/_bench/"):
                return await answer(send, json.dumps(control(scope["path"])).encode())
            parts: list[float] = []
            backend_part.set(parts)
            start = time.perf_counter()
            await self.app(scope, receive, send)
            own_ms.append(1000 * (time.perf_counter() - start - sum(parts)))
            backend_ms.append(1000 * sum(parts))

    def control(path: str) -> dict[str, Any]:
        command = path.rsplit("/", 1)[1]
        if command == "reset":
            own_ms.clear()
            backend_ms.clear()
            since[0] = time.process_time()
        elif command == "stats":
            cpu = time.process_time() - since[0]
            return {"own_ms": own_ms, "backend_ms": backend_ms, "cpu": cpu}
        elif command == "profile-start":
            profiler.enable()
        elif command == "profile-stop":
            profiler.disable()
            return {"profile": profile_text(profiler)}
        return {}

    # ModelGateway's app, sessions and server (agentsgym_gateway.server), the app inside
    # the timer: everything of a call but uvicorn's HTTP parsing and writing is timed
    served = ModelGateway(backend_url)
    served.gateway_app.backend = TimedBackend(served.gateway_app.backend)
    keys = [served.open_session().api_key for _ in range(sessions)]
    server = GatewayServer(Timed(served.app), "127.0.0.1", 0).start()
    print(json.dumps({"url": server.url, "keys": keys}), flush=True)
    while True:
        time.sleep(3600)


def profile_text(profiler: cProfile.Profile) -> str:
    """CPU per package (each function's own time), then the top functions."""
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    totals: dict[str, float] = {}
    for (path, _, function), (_, _, own, _, _) in stats.stats.items():  # type: ignore[attr-defined]
        if "site-packages/" in path:
            name = path.split("site-packages/")[1].split("/")[0]
        elif "agentsgym_gateway" in path:
            name = "agentsgym_gateway"
        elif path == "~":
            name = "built-in: " + function
        else:
            name = "stdlib: " + path.rsplit("/", 1)[-1]
        totals[name] = totals.get(name, 0.0) + own
    for name, seconds in sorted(totals.items(), key=lambda item: -item[1])[:25]:
        print(f"{1000 * seconds:10.1f} ms  {name}", file=out)
    stats.sort_stats("tottime").print_stats(30)
    return out.getvalue()


# ---------------------------------------------------------------- memory
def memory(backend_url: str, traced: bool) -> None:
    import gc
    import os
    import tracemalloc

    from agentsgym_gateway import ModelGateway

    def rss_mb() -> float:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

    if traced:
        tracemalloc.start()
    gateway = ModelGateway(backend_url).start()
    session = gateway.open_session()
    mark = {"rss": 0.0, "traced": 0}

    def control(command: str) -> dict[str, Any]:
        if command == "close":
            gateway.close_session(session)
        gc.collect()
        traced, peak = tracemalloc.get_traced_memory()
        if command == "mark":
            tracemalloc.reset_peak()
            mark.update(rss=rss_mb(), traced=traced)
            return {}
        return {
            "rss_mb": rss_mb() - mark["rss"],
            "held_mb": (traced - mark["traced"]) / 2**20,
            "peak_mb": (peak - mark["traced"]) / 2**20,
        }

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            return await lifespan(receive, send)
        command = scope["path"].rsplit("/", 1)[1]
        await answer(send, json.dumps(await asyncio.to_thread(control, command)).encode())

    first = json.dumps({"url": gateway.url, "key": session.api_key, "control": "{url}"})
    serve_forever(app, first)


# ---------------------------------------------------------------- load
def load(url: str, keys: list[str], calls_each: int, stagger: float, seed: int) -> None:
    import aiohttp
    import uvloop

    body = json.dumps(REQUEST).encode()
    offsets = random.Random(seed).choices(range(1_000_000), k=len(keys))
    latencies: list[float] = []
    failed = 0

    async def session(client: aiohttp.ClientSession, key: str, offset: float) -> None:
        nonlocal failed
        headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
        await asyncio.sleep(offset)
        for _ in range(calls_each):
            start = time.perf_counter()
            try:
                async with client.post(url + "/chat/completions", data=body, headers=headers) as r:
                    await r.read()
                    ok = r.status == 200
            except aiohttp.ClientError:
                ok = False
            if ok:
                latencies.append(time.perf_counter() - start)
            else:
                failed += 1

    async def main() -> None:
        connector = aiohttp.TCPConnector(limit=0)
        timeout = aiohttp.ClientTimeout(total=600)
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as client:
            starts = [stagger * o / 1_000_000 for o in offsets]
            await asyncio.gather(*(session(client, k, s) for k, s in zip(keys, starts)))

    cpu = time.process_time()
    uvloop.run(main())
    print(json.dumps({"latencies": latencies, "failed": failed, "cpu": time.process_time() - cpu}))


def main() -> None:
    role, args = sys.argv[1], sys.argv[2:]
    if role == "backend":
        backend(float(args[0]), int(args[1]))
    elif role == "hop":
        hop(args[0])
    elif role == "gateway":
        gateway(args[0], int(args[1]))
    elif role == "memory":
        memory(args[0], args[1] == "1")
    elif role == "load":
        load(args[0], json.loads(args[1]), int(args[2]), float(args[3]), int(args[4]))
    else:
        raise SystemExit(f"unknown role {role!r}: backend, hop, gateway, memory or load")


if __name__ == "__main__":
    main()
