"""Servers shared by the MCPTools of one command, so that building an env again does
not start its server again.

Every :class:`~agentsgym_tools.MCPTools` of the same command, arguments, environment
and working directory uses one :class:`~agentsgym_tools.mcp_host.MCPHost`. When the
last one is closed (or collected), the server lingers for ``linger_seconds``: an env
built again right after (``check_env`` builds an env several times; a script may build
one per split) reuses the running server instead of paying for another start. Lingering
servers stop at the end of the process.
"""

from __future__ import annotations

import atexit
import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass

from agentsgym_tools.mcp_host import MCPHost

__all__ = ["acquire", "release"]


@dataclass
class _Shared:
    host: MCPHost
    users: int = 0
    timer: threading.Timer | None = None


_lock = threading.Lock()
_shared: dict[Hashable, _Shared] = {}


def acquire(key: Hashable, make: Callable[[], MCPHost]) -> MCPHost:
    """The running (or lingering) host of ``key``, else a new one from ``make()``."""
    with _lock:
        entry = _shared.get(key)
        if entry is None or entry.host.closed:
            entry = _shared[key] = _Shared(make())
        if entry.timer is not None:
            entry.timer.cancel()
            entry.timer = None
        entry.users += 1
        return entry.host


def release(key: Hashable, host: MCPHost, linger_seconds: float) -> None:
    """One user of ``host`` is done; the last one leaves it ``linger_seconds``."""
    with _lock:
        entry = _shared.get(key)
        if entry is None or entry.host is not host:
            entry = None  # not (or no longer) shared: stop it now
        else:
            entry.users -= 1
            if entry.users > 0:
                return
            if linger_seconds > 0:
                entry.timer = threading.Timer(linger_seconds, _expire, (key, host))
                entry.timer.daemon = True
                entry.timer.start()
                return
            del _shared[key]
    host.close()


def _expire(key: Hashable, host: MCPHost) -> None:
    with _lock:
        entry = _shared.get(key)
        if entry is None or entry.host is not host or entry.users > 0:
            return
        del _shared[key]
    host.close()


@atexit.register
def _close_all() -> None:
    with _lock:
        hosts = [entry.host for entry in _shared.values()]
        for entry in _shared.values():
            if entry.timer is not None:
                entry.timer.cancel()
        _shared.clear()
    for host in hosts:
        host.close()
