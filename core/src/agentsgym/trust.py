"""What a dataset row may name: class paths and env server URLs are untrusted input.

A row's ``env_class_path`` is a registered id (always fine), a ``package.module:Class``
path (importing it runs the module's code) or an env server URL (the server writes the
observations and rewards a model trains on). The last two resolve only when the user
allowed them (docs/plugin-authors.md): all of them, or packages by whole dotted names
(``pkg`` allows ``pkg`` and ``pkg.sub``, not ``pkgx``), or URL prefixes
compared by scheme, host, port and whole path segments (``http://10.0.0.5:8000`` allows
that server and no other).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from urllib.parse import urlsplit

__all__ = [
    "CLASS_PATHS_ENVIRON",
    "REMOTE_ENVS_ENVIRON",
    "Allowance",
    "class_paths_allowed_from_environ",
    "module_allowed",
    "remote_envs_allowed_from_environ",
    "url_allowed",
]

CLASS_PATHS_ENVIRON = "AGENTSGYM_ALLOW_CLASS_PATHS"
REMOTE_ENVS_ENVIRON = "AGENTSGYM_ALLOW_REMOTE_ENVS"
DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}
_WEBSOCKET_SERVERS = {"ws": "http", "wss": "https"}

Allowance = bool | Sequence[str]


def _from_environ(name: str) -> bool | tuple[str, ...]:
    raw = os.environ.get(name, "").strip()
    if raw.lower() in {"", "0", "false", "no", "off"}:
        return False
    if raw.lower() in {"1", "true", "yes", "on", "*"}:
        return True
    return tuple(p.strip() for p in raw.split(",") if p.strip())


def class_paths_allowed_from_environ() -> bool | tuple[str, ...]:
    """``AGENTSGYM_ALLOW_CLASS_PATHS``: ``1`` allows any, ``pkg,other.mod`` these modules."""
    return _from_environ(CLASS_PATHS_ENVIRON)


def remote_envs_allowed_from_environ() -> bool | tuple[str, ...]:
    """``AGENTSGYM_ALLOW_REMOTE_ENVS``: ``1`` allows any URL, ``URL,URL`` these prefixes."""
    return _from_environ(REMOTE_ENVS_ENVIRON)


def _prefixes(allow: Allowance) -> Sequence[str]:
    """The prefixes ``allow`` lists (a lone string is one); none for a bool."""
    if isinstance(allow, str):
        return [allow] if allow else []
    return [] if isinstance(allow, bool) else allow


def module_allowed(module: str, allow: Allowance) -> bool:
    """Whether importing ``module`` is allowed by ``allow``: ``True``, or packages whose
    dotted names it equals or lies within (``pkg`` allows ``pkg.sub``, not ``pkgx``)."""
    packages = [prefix.rstrip(".") for prefix in _prefixes(allow)]
    return allow is True or any(module == p or module.startswith(p + ".") for p in packages)


def url_allowed(url: str, allow: Allowance) -> bool:
    """Whether ``url`` is allowed by ``allow`` (``True``, or URL prefixes)."""
    if allow is True:
        return True
    target = _origin_and_path(url)
    if target is None:
        return False
    for prefix in _prefixes(allow):
        wanted = _origin_and_path(prefix)
        if wanted is None:
            continue
        origin, path = wanted
        if target[0] == origin and (
            not path or target[1] == path or target[1].startswith(path + "/")
        ):
            return True
    return False


def _origin_and_path(url: str) -> tuple[tuple[str, str, int | None], str] | None:
    """(transport scheme, host, port) and the path; ``agentgym+http`` is ``http``, and a
    WebSocket (``openenv+ws``) is the HTTP server it upgrades from (``http``)."""
    try:
        parts = urlsplit(url.strip())
        scheme = parts.scheme.lower().rsplit("+", 1)[-1]
        scheme = _WEBSOCKET_SERVERS.get(scheme, scheme)
        port = parts.port or DEFAULT_PORTS.get(scheme)
    except ValueError:
        return None
    if not parts.hostname:
        return None
    return (scheme, parts.hostname.lower(), port), parts.path.rstrip("/")
