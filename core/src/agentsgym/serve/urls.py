"""Env server URLs: how one is written, which protocol it names, and whether it is allowed.

An env may live behind a URL instead of a class: ``http://host:port`` (an
``agentsgym serve`` server, or any server of AgentGym's protocol, told apart by
asking), or ``agentgym+http://host:port`` to say "AgentGym's protocol" without
asking. A path prefix is kept (``http://gateway/envs/guess``, behind a reverse
proxy); a query or fragment is refused.

A URL in a dataset row is untrusted input, like a ``module:Class`` path: the server
at the other end writes the observations and rewards a model is trained on, and the
trainer's machine would open connections wherever a row points. So a URL from a row
resolves only when the user allowed it (``allow_remote=``, ``--allow-remote-envs``,
``AGENTSGYM_ALLOW_REMOTE_ENVS``): ``True`` for any, or a list of URL prefixes
compared by scheme, host, port and path segments (``http://10.0.0.5:8000`` allows
that server and no other). This module imports nothing heavy: the registry uses it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Literal
from urllib.parse import urlsplit

REMOTE_URL_PATTERN = re.compile(r"^(agentgym\+)?https?://", re.IGNORECASE)
AGENTGYM_PREFIX = "agentgym+"
ENVIRON_ALLOW = "AGENTSGYM_ALLOW_REMOTE_ENVS"

Protocol = Literal["auto", "agentsgym", "agentgym"]
_DEFAULT_PORTS = {"http": 80, "https": 443}


def is_remote_url(text: str) -> bool:
    """Whether ``text`` names an env server rather than an env id or class path."""
    return bool(REMOTE_URL_PATTERN.match(text))


def split_protocol(url: str) -> tuple[Protocol, str]:
    """``("agentgym", base)`` for an ``agentgym+`` URL, else ``("auto", base)``; the base
    URL normalised (see :func:`normalise_url`)."""
    if url[: len(AGENTGYM_PREFIX)].lower() == AGENTGYM_PREFIX:
        return "agentgym", normalise_url(url[len(AGENTGYM_PREFIX) :])
    return "auto", normalise_url(url)


def normalise_url(url: str) -> str:
    """``http(s)://host[:port][/path]`` with a lower-case scheme and host and no trailing
    slash; a ValueError (saying what is wrong) for anything else."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        raise ValueError(
            f"{url!r} is not an env server URL; expected http://host:port (or https://, "
            "or agentgym+http:// for a server of AgentGym's protocol)"
        )
    if parts.query or parts.fragment:
        raise ValueError(
            f"env server URL {url!r} has a query or fragment; give only "
            "scheme://host:port and an optional path prefix"
        )
    try:
        port = parts.port
    except ValueError:
        raise ValueError(f"env server URL {url!r} has an invalid port") from None
    host = parts.hostname.lower()
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    netloc = host if port is None else f"{host}:{port}"
    if parts.username is not None:
        auth = parts.username + (f":{parts.password}" if parts.password is not None else "")
        netloc = f"{auth}@{netloc}"
    return f"{scheme}://{netloc}{parts.path.rstrip('/')}"


def redact_url(url: str) -> str:
    """The URL without a password, for logs and error messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    return url.replace(f":{parts.password}@", ":***@", 1)


def remote_envs_allowed_from_environ() -> bool | tuple[str, ...]:
    """``AGENTSGYM_ALLOW_REMOTE_ENVS``: ``1`` allows any URL, ``URL,URL`` these prefixes."""
    raw = os.environ.get(ENVIRON_ALLOW, "").strip()
    if raw.lower() in {"", "0", "false", "no", "off"}:
        return False
    if raw.lower() in {"1", "true", "yes", "on", "*"}:
        return True
    return tuple(p.strip() for p in raw.split(",") if p.strip())


def url_allowed(url: str, allow: bool | Sequence[str]) -> bool:
    """Whether ``url`` is allowed by ``allow`` (``True``, or URL prefixes)."""
    if allow is True:
        return True
    if allow is False or isinstance(allow, str):
        allow = [allow] if isinstance(allow, str) and allow else []
    target = _origin_and_path(url)
    if target is None:
        return False
    for prefix in allow:
        wanted = _origin_and_path(prefix)
        if wanted is None:
            continue
        origin, path = wanted
        if target[0] == origin and (
            not path or target[1] == path or target[1].startswith(path + "/")
        ):
            return True
    return False


def _origin_and_path(url: str) -> tuple[tuple[str, str, int], str] | None:
    try:
        _, base = split_protocol(url)
        parts = urlsplit(base)
        port = parts.port or _DEFAULT_PORTS[parts.scheme]
    except (ValueError, KeyError):
        return None
    return (parts.scheme, parts.hostname or "", port), parts.path.rstrip("/")
