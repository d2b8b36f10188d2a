"""What plugins register: env specs and component specs (agents, trainers, executors,
env sources). Plain data, so that every layer can hold one: the registry builds them,
an env keeps the one it was made from, the CLI lists them."""

from __future__ import annotations

import importlib
import inspect
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "FLAG_PATTERN",
    "URL_PATTERN",
    "ComponentSpec",
    "EnvSourceSpec",
    "EnvSpec",
    "ExecutorFlag",
    "accepted_options",
    "import_object",
    "url_scheme",
]

URL_PATTERN = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://")
"""An env source URL: ``scheme://...``; the scheme picks the source that plays it."""


def url_scheme(text: str) -> str | None:
    """The lower-case scheme of ``text`` when it is a URL (``agentgym+http``), else None."""
    match = URL_PATTERN.match(text)
    return match.group("scheme").lower() if match else None


def import_object(path: str) -> Any:
    """Import ``package.module:attribute``."""
    module_name, _, attr = path.partition(":")
    if not module_name or not attr:
        raise ValueError(f"{path!r} is not of the form 'package.module:attribute'")
    module = importlib.import_module(module_name)
    try:
        return getattr(module, attr)
    except AttributeError:
        raise ImportError(f"module {module_name!r} has no attribute {attr!r}") from None


def _import_if_path(obj: Any) -> Any:
    return import_object(obj) if isinstance(obj, str) else obj


def accepted_options(factory: Any) -> list[str] | None:
    """The keyword options ``factory`` accepts, or None when it takes ``**kwargs``
    (or its signature cannot be read)."""
    try:
        parameters = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return None
    kinds = inspect.Parameter
    names = []
    for parameter in parameters:
        if parameter.kind is kinds.VAR_KEYWORD:
            return None
        if parameter.kind in (kinds.POSITIONAL_OR_KEYWORD, kinds.KEYWORD_ONLY):
            names.append(parameter.name)
    return names


class EnvSpec(BaseModel):
    """A registered env: what ``agentsgym list-envs`` shows and ``make`` builds."""

    model_config = ConfigDict(frozen=True)

    id: str
    entry_point: str = Field(
        description="'package.module:Class' of the env, or the URL of a server that plays it"
    )
    description: str = ""
    default_env_config: dict[str, Any] = Field(default_factory=dict)
    default_agent: str | None = None
    distribution: str | None = None
    version: str | None = None
    plugin: str | None = None

    @property
    def namespace(self) -> str:
        return self.id.split("/", 1)[0] if "/" in self.id else ""

    @property
    def is_remote(self) -> bool:
        """The env is played through an env source (its entry point is a URL)."""
        return url_scheme(self.entry_point) is not None


FLAG_PATTERN = re.compile(r"^--[a-z][a-z0-9]*(-[a-z0-9]+)*$")
"""A long command-line flag: ``--cluster-address``."""


class ExecutorFlag(BaseModel):
    """A flag an executor adds to every command that takes ``--executor``: its value
    becomes the executor's option ``option`` when that executor is chosen.

    ``ExecutorFlag(flag="--cluster-address", option="address", help="a cluster to join")``
    """

    model_config = ConfigDict(frozen=True)

    flag: str = Field(pattern=FLAG_PATTERN.pattern, description="'--name', lower case")
    option: str = Field(pattern=r"^[A-Za-z_]\w*$", description="the factory's keyword")
    help: str = ""
    metavar: str = "VALUE"


class ComponentSpec(BaseModel):
    """A registered agent, trainer adapter, executor or env source."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    name: str
    factory: Any = Field(description="callable or 'package.module:callable'")
    description: str = ""
    distribution: str | None = None
    plugin: str | None = None
    flags: tuple[ExecutorFlag, ...] = Field(
        default=(), description="an executor's command-line flags (docs/plugin-authors.md)"
    )

    def load(self) -> Any:
        """The factory, imported if it is a path."""
        return _import_if_path(self.factory)

    def build(self, **options: Any) -> Any:
        return self.load()(**options)


class EnvSourceSpec(ComponentSpec):
    """A registered env source: the scheme (``name``) and what builds its envs."""

    normalize: Any = Field(
        default=None, description="callable or path: url -> canonical url, ValueError if bad"
    )

    def canonical(self, url: str) -> str:
        """The canonical form of ``url``; ValueError (saying what is wrong) if it is bad."""
        return url if self.normalize is None else str(_import_if_path(self.normalize)(url))
