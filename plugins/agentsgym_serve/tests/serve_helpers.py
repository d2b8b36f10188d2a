"""Helpers of the env server tests: a served env, episode fingerprints, a fault proxy."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

from agentsgym_serve import BackgroundServer, create_app

GUESS = "agentsgym/GuessTheNumber-v0"
TINY = "agentsgym/tiny-chatml"


@contextlib.contextmanager
def served(
    env_id: str = GUESS, env_config: dict[str, Any] | None = None, port: int = 0, **options: Any
) -> Iterator[Any]:
    """A real uvicorn server of ``env_id`` on 127.0.0.1 (``port``, 0: a free one), stopped
    afterwards; yields the BackgroundServer, with ``.service`` (the session table and host)."""
    app = create_app(env_id, env_config, **options)
    with BackgroundServer(app, port=port) as server:
        server.service = app.state.service
        yield server


def fingerprint(batch: Any) -> list[str]:
    """Every successful episode of a batch as canonical JSON: token ids, masks,
    per-token rewards, messages, step rewards, terms and infos. Only the random session
    id is left out. Equal fingerprints are byte-identical trajectories. (Failed episodes
    are compared by the tests themselves: a remote failure names the server.)"""
    rows = []
    for group in batch.groups:
        for episode in group.episodes:
            record = episode.to_record()
            record.pop("session_id")
            record["segments"] = [
                {
                    "ids": s.token_ids.tolist(),
                    "mask": s.agent_mask.tolist(),
                }
                for s in episode.segments
            ]
            record["segment_rewards"] = [r.tobytes().hex() for r in episode.segment_rewards]
            rows.append(json.dumps(record, sort_keys=True))
    if batch.tokenized:
        rows.append(json.dumps(batch.padded_full_token_ids))
        rows.append(json.dumps(batch.padded_agent_token_mask))
        rows.append(json.dumps(batch.padded_per_token_rewards))
    return rows


class FaultProxy:
    """A TCP proxy between a client and a server that breaks chosen requests.

    Every HTTP request through it gets a number (from 0) and a fault, chosen by
    ``rule(number, request_line)`` (default: the next of ``inject(...)``, else none):

    * ``"pass"``: forwarded both ways;
    * ``"drop"``: the request reaches the server, which applies it; its reply is thrown
      away and both connections are closed (a dropped socket);
    * ``"<fault>-once"``: that fault, unless the very same request (byte for byte: a
      client's retry) was hit before, so that no request is lost for good;
    * ``"delay:S"``: the reply is held back S seconds (a slow network);
    * ``"502"``: the request reaches the server; the client gets a 502 instead of the
      reply (a gateway failing after the fact);
    * ``"reset"``: the connection is closed before the request reaches the server.

    ``pause()`` closes the listening socket (connections are refused) and ``resume()``
    opens it again on the same port.
    """

    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self.port = 0
        self.rule: Callable[[int, str], str] | None = None
        self.faults: collections.deque[str] = collections.deque()
        self.seen: list[tuple[int, str, str]] = []
        self._count = 0
        self._dropped: set[bytes] = set()
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.AbstractServer | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> FaultProxy:
        self._thread.start()
        self._call(self._listen())
        return self

    def __exit__(self, *exc: object) -> None:
        self._call(self._stop_listening())
        self._call(self._cancel_handlers())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    async def _cancel_handlers(self) -> None:
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _call(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout=30)

    def inject(self, *faults: str) -> None:
        self.faults.extend(faults)

    def pause(self) -> None:
        self._call(self._stop_listening())

    def resume(self) -> None:
        self._call(self._listen())

    def applied(self, fault: str) -> int:
        with self._lock:
            return sum(1 for _, _, f in self.seen if f == fault)

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(
            self._handle, "127.0.0.1", self.port, reuse_address=True
        )
        self.port = self._server.sockets[0].getsockname()[1]

    async def _stop_listening(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    def _first_time(self, request: bytes) -> bool:
        with self._lock:
            seen = request in self._dropped
            self._dropped.add(request)
        return not seen

    def _decide(self, line: str) -> str:
        with self._lock:
            number = self._count
            self._count += 1
        if self.rule is not None:
            fault = self.rule(number, line)
        else:
            try:
                fault = self.faults.popleft()
            except IndexError:
                fault = "pass"
        with self._lock:
            self.seen.append((number, line, fault))
        return fault

    async def _handle(self, client_r: Any, client_w: Any) -> None:
        try:
            server_r, server_w = await asyncio.open_connection(*self.target)
        except OSError:
            client_w.close()
            return
        pending: collections.deque[list[Any]] = collections.deque()  # [fault, request bytes]

        def close_all() -> None:
            for writer in (client_w, server_w):
                with contextlib.suppress(Exception):
                    writer.close()

        async def upstream() -> None:
            while True:
                data = await client_r.read(65536)
                if not data:
                    break
                if data[:4] in (b"POST", b"GET ", b"PUT ", b"DELE"):
                    line = data.split(b"\r\n", 1)[0].decode("latin-1")
                    fault = self._decide(line)
                    if fault == "reset-once":
                        fault = "reset" if self._first_time(bytes(data)) else "pass"
                    if fault == "reset":
                        close_all()
                        return
                    pending.append([fault, bytearray()])
                if pending:
                    pending[-1][1].extend(data)
                server_w.write(data)
                await server_w.drain()
            with contextlib.suppress(Exception):
                server_w.write_eof()

        async def downstream() -> None:
            while True:
                data = await server_r.read(65536)
                if not data:
                    break
                if data.startswith(b"HTTP/") and pending:
                    fault, request = pending.popleft()
                    if fault.endswith("-once"):
                        once = fault.removesuffix("-once")
                        fault = once if self._first_time(bytes(request)) else "pass"
                    if fault == "drop":
                        close_all()
                        return
                    if fault == "502":
                        client_w.write(
                            b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n"
                            b"connection: close\r\n\r\n"
                        )
                        with contextlib.suppress(Exception):
                            await client_w.drain()
                        close_all()
                        return
                    if fault.startswith("delay:"):
                        await asyncio.sleep(float(fault.split(":", 1)[1]))
                client_w.write(data)
                await client_w.drain()
            close_all()

        try:
            await asyncio.gather(upstream(), downstream(), return_exceptions=True)
        finally:
            close_all()
