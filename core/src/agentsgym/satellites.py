"""The plugin distributions of this project: who provides what, for hints and old names.

The core never imports a satellite; it knows, as data, which of our distributions
provides a command, executor, URL scheme, agent or trainer (so asking for a missing one
names the package to install), and which names moved out of the core (old imports keep
working once that package is installed, with a ``DeprecationWarning``).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
import warnings
from typing import Any

from agentsgym.errors import MissingPluginError

TRL = "agentsgym-trl"
SERVE = "agentsgym-serve"
RAY = "agentsgym-ray"
ATROPOS = "agentsgym-atropos"
VIEWER = "agentsgym-viewer"
EVAL = "agentsgym-eval"
SCAFFOLD = "agentsgym-scaffold"
CLASSICAL = "agentsgym-classical"

PROVIDERS: dict[str, dict[str, str]] = {
    "command": {
        "eval": EVAL, "train": TRL, "serve": SERVE, "atropos": ATROPOS, "view": VIEWER,
        "new-env": SCAFFOLD,
    },
    "executor": {"ray": RAY},
    "env source": {s: SERVE for s in ("http", "https", "agentgym+http", "agentgym+https")},
    "agent": {"transformers": TRL, "agentsgym/bisect": CLASSICAL},
    "trainer": {"trl-grpo": TRL, "per-token-grpo": TRL, "dataset-sink": TRL},
}
"""Per kind of registration, the names our own distributions register."""

MOVED_MODULES: dict[str, tuple[str, str]] = {
    "agentsgym.serve": ("agentsgym_serve", SERVE),
    "agentsgym.testing_server": ("agentsgym_serve.model_server", SERVE),
    "agentsgym.agents.transformers_agent": ("agentsgym_trl.transformers_agent", TRL),
    "agentsgym.tiny_model": ("agentsgym_trl.tiny_model", TRL),
    "agentsgym.trainers.trl_grpo": ("agentsgym_trl.trl_grpo", TRL),
    "agentsgym.trainers.per_token": ("agentsgym_trl.per_token", TRL),
    "agentsgym.trainers.dataset_sink": ("agentsgym_trl.dataset_sink", TRL),
    "agentsgym.trainers.base": ("agentsgym_trl.batch_trainer", TRL),
    "agentsgym.trainers.checkpoints": ("agentsgym_trl.checkpoints", TRL),
    "agentsgym.executors.ray": ("agentsgym_ray.executor", RAY),
    "agentsgym.integrations.atropos": ("agentsgym_atropos.producer", ATROPOS),
    "agentsgym.viewer": ("agentsgym_viewer", VIEWER),
    "agentsgym.evaluation": ("agentsgym_eval.samples", EVAL),
    "agentsgym.metrics": ("agentsgym_eval.metrics", EVAL),
    "agentsgym.scaffold": ("agentsgym_scaffold", SCAFFOLD),
    "agentsgym.builtin.guess_number": ("agentsgym_classical.guess_number", CLASSICAL),
}
"""Old module path -> (module it moved to, distribution that provides it)."""

MOVED_NAMES: dict[str, dict[str, tuple[str, str]]] = {
    "agentsgym": {name: ("agentsgym_serve", SERVE) for name in ("RemoteEnv", "AgentGymEnv")},
    "agentsgym.agents": {"TransformersAgent": ("agentsgym_trl", TRL)},
    "agentsgym.testing": {"install_plugin": ("agentsgym_scaffold", SCAFFOLD)},
    "agentsgym.builtin": {
        name: ("agentsgym_classical.guess_number", CLASSICAL)
        for name in ("BisectAgent", "GuessState", "GuessTheNumberConfig", "GuessTheNumberEnv")
    },
    "agentsgym.trainers": {
        name: ("agentsgym_trl", TRL)
        for name in ("BatchTrainer", "DatasetSink", "PerTokenGRPOTrainer", "TRLGRPOAdapter")
    },
}
"""Per core module, the names that moved: name -> (module, distribution)."""


def provider_hint(kind: str, name: str) -> str:
    """`` It comes with X: pip install X.`` when one of ours provides it, else ``""``."""
    distribution = PROVIDERS.get(kind, {}).get(name)
    if distribution is None:
        return ""
    return f" It comes with the {distribution} distribution: pip install {distribution}."


def _require_installed(new_module: str, distribution: str, old: str, then: str) -> None:
    if importlib.util.find_spec(new_module.partition(".")[0]) is None:
        raise MissingPluginError(
            f"{old} moved to the {distribution} distribution, which is not installed: "
            f"pip install {distribution} (then: {then})"
        )


def moved_name(module: str, name: str) -> Any:
    """The object a core module's old ``name`` refers to, from the satellite it moved
    to; AttributeError when the name never existed there."""
    target = MOVED_NAMES.get(module, {}).get(name)
    if target is None:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    new_module, distribution = target
    old, then = f"{module}.{name}", f"from {new_module} import {name}"
    _require_installed(new_module, distribution, old, then)
    message = f"{old} moved to {new_module}.{name}; import it from there"
    warnings.warn(message, DeprecationWarning, stacklevel=3)
    return getattr(importlib.import_module(new_module), name)


class _MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports of old module paths (``agentsgym.serve.remote_env``) get a module that
    forwards every attribute to the new one, or one line naming the package."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        for old, (new, distribution) in MOVED_MODULES.items():
            if fullname == old or fullname.startswith(old + "."):
                new_name = new + fullname[len(old) :]
                _require_installed(new_name, distribution, fullname, f"import {new_name}")
                spec = importlib.machinery.ModuleSpec(fullname, self, is_package=True)
                spec.loader_state = new_name
                return spec
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        new_name = spec.loader_state
        message = f"{spec.name} moved to {new_name}; import it from there"
        warnings.warn(message, DeprecationWarning, stacklevel=2)
        target = importlib.import_module(new_name)
        alias = types.ModuleType(spec.name, target.__doc__)
        # Its own empty __path__: one forwarded from the target would let the path
        # finder load the target's submodules again, as new modules under the old name.
        alias.__path__ = []
        alias.__getattr__ = lambda name: getattr(target, name)  # type: ignore[method-assign]
        alias.__dir__ = lambda: dir(target)  # type: ignore[method-assign]
        return alias

    def exec_module(self, module: types.ModuleType) -> None:
        pass


def install_moved_module_finder() -> None:
    """Let old module paths import (idempotent; called by ``import agentsgym``)."""
    if not any(isinstance(f, _MovedModuleFinder) for f in sys.meta_path):
        sys.meta_path.append(_MovedModuleFinder())
