"""Env server URLs: how one is written and which protocol it names.

An env may live behind a URL instead of a class: ``http://host:port`` (an
``agentsgym serve`` server, or any server of AgentGym's protocol, told apart by
asking), or ``agentgym+http://host:port`` to say "AgentGym's protocol" without
asking. A path prefix is kept (``http://gateway/envs/guess``, behind a reverse
proxy); a query or fragment is refused.

Whether a URL from a dataset row may be played at all is the core's decision
(:mod:`agentsgym.trust`), the same for every env source.
"""

from __future__ import annotations

import re
from typing import Literal
from urllib.parse import urlsplit

REMOTE_URL_PATTERN = re.compile(r"^(agentgym\+)?https?://", re.IGNORECASE)
AGENTGYM_PREFIX = "agentgym+"

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


def canonical_url(url: str) -> str:
    """The URL as an env id: normalised, ``agentgym+`` kept; ValueError if malformed."""
    protocol, base = split_protocol(url)
    return f"{AGENTGYM_PREFIX}{base}" if protocol == "agentgym" else base
