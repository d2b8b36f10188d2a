"""Where a tokenizer comes from: the bundled one, or a folder or hub name checked first.

The bundled tokenizer is a small byte-level BPE with a ChatML chat template, built by
``scripts/build_default_tokenizer.py`` and shipped in the package, so that the main
job and the tests run offline with no model download.

Any other name goes to transformers' ``AutoTokenizer``, which answers a folder that
does not exist with a hub repo-id error and retries an unreachable hub for a minute.
:func:`tokenizer_source` fails first, at once and with what to do, where that load
could only fail: a path that does not exist, a hub name while the hub is switched off
(``HF_HUB_OFFLINE=1``) or cannot be reached and the name is not in the local cache.
"""

from __future__ import annotations

import logging
import os
import re
import socket
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from agentsgym.errors import AgentsGymError

logger = logging.getLogger(__name__)

DEFAULT_TOKENIZER = "agentsgym/tiny-chatml"
HUB_PROBE_SECONDS = 3.0
"""How long to wait for the hub's address before calling it unreachable."""
# A hub repo id: "name" or "namespace/name" of letters, digits, "-", "_" and ".".
_REPO_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?")
_TRUE = {"1", "on", "yes", "true"}
_TOKENIZER_FILES = ("tokenizer_config.json", "tokenizer.json")


@lru_cache(maxsize=1)
def load_default_tokenizer() -> Any:
    """Load (once per process) the bundled tokenizer with transformers."""
    from transformers import AutoTokenizer

    path = resources.files("agentsgym") / "assets" / "tiny-chatml"
    return AutoTokenizer.from_pretrained(str(path))


def _what_else() -> str:
    return (
        "a registered model name (`agentsgym list-models`), a hub name such as "
        f"Qwen/Qwen2.5-0.5B-Instruct, or {DEFAULT_TOKENIZER!r} for the bundled tokenizer"
    )


def tokenizer_source(name: str) -> tuple[str, dict[str, Any]]:
    """What to give ``AutoTokenizer.from_pretrained`` for ``name`` (a folder or a hub
    name): the name (a folder with ``~`` expanded) and its keyword options.

    :raises AgentsGymError: at once, where loading could only fail (module docstring).
    """
    folder = Path(name).expanduser()
    if folder.is_dir():
        return str(folder), {}
    if folder.exists():
        raise AgentsGymError(
            f"tokenizer {name!r} is a file; give the folder that holds tokenizer.json and "
            f"tokenizer_config.json (here: {str(folder.parent)!r}), or {_what_else()}"
        )
    if not _REPO_ID.fullmatch(name):
        raise AgentsGymError(
            f"tokenizer {name!r}: no such folder. Give a folder that holds tokenizer.json "
            f"and tokenizer_config.json, or {_what_else()}"
        )
    if _in_hub_cache(name):
        return name, ({} if _hub_reachable() else {"local_files_only": True})
    if _hub_switched_off():
        raise AgentsGymError(
            f"tokenizer {name!r} is neither a folder nor in the local hub cache, and the hub "
            "is switched off (HF_HUB_OFFLINE=1). Download it once with the hub on, or give a "
            f"folder that holds tokenizer.json and tokenizer_config.json, or {_what_else()}"
        )
    if not _hub_reachable():
        raise AgentsGymError(
            f"tokenizer {name!r} is neither a folder nor in the local hub cache, and "
            f"{_hub_host()} cannot be reached (no network?). Download it where the hub is "
            "reachable, or give a folder that holds tokenizer.json and "
            f"tokenizer_config.json, or {_what_else()}"
        )
    return name, {}


def _hub_switched_off() -> bool:
    names = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    return any(os.environ.get(n, "").strip().lower() in _TRUE for n in names)


def _in_hub_cache(name: str) -> bool:
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - transformers brings huggingface_hub
        return False
    for filename in _TOKENIZER_FILES:
        try:
            if isinstance(try_to_load_from_cache(name, filename), str):
                return True
        except ValueError:  # not a name the hub's cache accepts
            return False
    return False


def _hub_host() -> str:
    endpoint = os.environ.get("HF_ENDPOINT") or "https://huggingface.co"
    return urlsplit(endpoint).hostname or "huggingface.co"


def _hub_reachable() -> bool:
    """Whether the hub answers a TCP connection; ``True`` when the hub is switched off
    (nothing is asked) or a proxy is set (the direct path says nothing about it)."""
    if _hub_switched_off():
        return True
    proxies = ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")
    if any(os.environ.get(n) for n in proxies):
        return True
    endpoint = urlsplit(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    port = endpoint.port or (80 if endpoint.scheme == "http" else 443)
    try:
        with socket.create_connection((_hub_host(), port), timeout=HUB_PROBE_SECONDS):
            return True
    except OSError as exc:
        logger.info("the hub %s is unreachable: %s", _hub_host(), exc)
        return False
