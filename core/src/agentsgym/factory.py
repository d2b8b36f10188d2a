"""make(): build an env from an id or class path; tokenizer loading."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from functools import partial
from typing import Any

from agentsgym.default_tokenizer import DEFAULT_TOKENIZER, tokenizer_source
from agentsgym.env import MultistepEnv
from agentsgym.errors import AgentsGymError, EnvConfigError
from agentsgym.registry import get_registry, import_env_class, model_folder


def make(
    id_or_class_path: str,
    tokenizer: Any = None,
    env_config: dict[str, Any] | None = None,
    *,
    plugins: Iterable[object] = (),
    allow_class_paths: bool | Sequence[str] | None = None,
    allow_remote: bool | Sequence[str] | None = True,
) -> MultistepEnv:
    """Build an env, like Gymnasium's ``make``.

    :param id_or_class_path: a registered id (``"twentyq/TwentyQuestions-v0"``), a URL an
        installed env source plays (``"http://host:port"`` when a plugin plays it) or, when
        allowed, a ``"package.module:Class"`` path.
    :param tokenizer: a tokenizer object, a name or path for ``AutoTokenizer``,
        ``"agentsgym/tiny-chatml"`` (bundled), or ``None`` to play without token fields.
    :param env_config: layered over the id's registered defaults.
    :param plugins: extra plugins for the env's hook relay.
    :param allow_class_paths: allow ``module:Class`` paths (``True`` or module prefixes;
        ``None``: from ``AGENTSGYM_ALLOW_CLASS_PATHS``).
    :param allow_remote: allow env server URLs (``True`` or URL prefixes; ``None``: from
        ``AGENTSGYM_ALLOW_REMOTE_ENVS``). ``True`` by default: a URL given to ``make`` is
        the caller's own; dataset rows are checked with the run's setting.
    """
    if env_config is not None and not isinstance(env_config, Mapping):
        raise EnvConfigError(
            f"env_config for {id_or_class_path!r} must be a dict of settings (key -> value), "
            f"got {type(env_config).__name__}: {env_config!r:.80}"
        )
    registry = get_registry()
    spec = registry.resolve(
        id_or_class_path, allow_class_paths=allow_class_paths, allow_remote=allow_remote
    )
    config = {**spec.default_env_config, **(env_config or {})}
    if spec.is_remote:
        build = partial(registry.env_source(spec.entry_point).load(), spec.entry_point)
    else:
        build = import_env_class(spec.entry_point)
    try:
        env = build(tokenizer=load_tokenizer(tokenizer), env_config=config, plugins=plugins)
    except EnvConfigError as exc:  # name the env as the user did, not by its class
        name = getattr(build, "__name__", spec.id)
        raise EnvConfigError(str(exc).replace(f" of {name}:", f" of {spec.id}:", 1)) from None
    env.spec = spec
    return env


def load_tokenizer(tokenizer: Any) -> Any:
    """A tokenizer object from a tokenizer, a registered model name, a name/path or the default."""
    if not isinstance(tokenizer, str):  # an object, or None
        return tokenizer
    if tokenizer == DEFAULT_TOKENIZER:
        from agentsgym.default_tokenizer import load_default_tokenizer

        return load_default_tokenizer()
    tokenizer = model_folder(tokenizer) or tokenizer  # a registered model name
    try:
        from transformers import AutoTokenizer
    except ImportError as exc:
        raise AgentsGymError(
            "loading a tokenizer by name needs transformers: pip install transformers"
        ) from exc
    source, options = tokenizer_source(tokenizer)  # fails at once where loading would fail
    try:
        return AutoTokenizer.from_pretrained(source, **options)
    except Exception as exc:
        raise AgentsGymError(
            f"could not load tokenizer {tokenizer!r}: {exc}. Give a local folder with "
            "tokenizer.json/tokenizer_config.json, a model name your machine can download, "
            f"or {DEFAULT_TOKENIZER!r} for the bundled tokenizer."
        ) from exc
