"""Which keywords an adapter's ``train`` takes: ``agentsgym train`` passes an option's
keywords (checkpoints, evaluations) only to an adapter that takes them."""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any


def train_takes(adapter: Any, keyword: str) -> bool:
    """Whether ``adapter.train`` names ``keyword`` or takes any keyword (``**kw``)."""
    parameters: Mapping[str, inspect.Parameter]
    try:
        parameters = inspect.signature(adapter.train).parameters
    except (TypeError, ValueError):
        parameters = {}
    return keyword in parameters or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()
    )
