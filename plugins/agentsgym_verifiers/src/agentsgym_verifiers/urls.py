"""``verifiers://TASKSET``: a verifiers taskset as an env id.

The part after ``verifiers://`` is verifiers' own taskset id: a built-in taskset
(``openenv``, ``textarena``), a module of an installed (or ``python_path``) taskset
package (``addition_v1``), or a hub id (``owner/name[@version]``, installed as its
package). The taskset's settings, the harness and the runtime are env_config keys
(:class:`~agentsgym_verifiers.config.VerifiersConfig`).
"""

from __future__ import annotations

import re

SCHEME = "verifiers"
PREFIX = f"{SCHEME}://"
_TASKSET_ID = re.compile(
    r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*(/[A-Za-z0-9_][A-Za-z0-9_.\-]*)?(@[A-Za-z0-9_.\-+]+)?$"
)


def taskset_id(url: str) -> str:
    """The taskset id of a ``verifiers://`` URL; a ValueError saying what is wrong."""
    text = url.strip()
    if text[: len(PREFIX)].lower() != PREFIX:
        raise ValueError(f"{url!r} is not a verifiers env; expected verifiers://TASKSET_ID")
    ident = text[len(PREFIX) :].rstrip("/")
    if not _TASKSET_ID.match(ident):
        raise ValueError(
            f"{url!r} does not name a verifiers taskset: expected verifiers://TASKSET_ID, "
            "such as verifiers://openenv, verifiers://addition_v1 or "
            "verifiers://owner/name@1.0 (the settings go in env_config, not in the URL)"
        )
    return ident


def canonical_url(url: str) -> str:
    """The URL as an env id: ``verifiers://`` and the taskset id."""
    return PREFIX + taskset_id(url)
