"""``agentsgym train ... --vllm-python PATH`` or ``--vllm-server-base-url URL``: vLLM
generates the rollouts, the trainer pushes its weights into it after every update.

* ``--vllm-python PATH`` starts a server (:mod:`agentsgym_trl.vllm_server`) with the
  python (or venv) at PATH, serving the model's folder, on a free port (or
  ``--vllm-server-port``), its log in ``--output-dir/vllm-server.log``; the run waits
  for it (``--vllm-server-timeout`` seconds, progress shown) and stops it at the end,
  on Ctrl-C, and when the trainer dies. ``--vllm-serve-arg ARG`` (repeatable) adds
  arguments of ``vllm serve``.
* ``--vllm-server-base-url URL`` attaches to a server the user started (TRL's flag
  name): with ``VLLM_SERVER_DEV_MODE=1``, ``--enable-scale-out``, and for the
  ``reload`` sync the weights folder in ``--output-dir`` readable by it.

The rollouts are played by the ``openai`` agent on vLLM's token-in generate API
(``api="generate"``): the episode's exact ids in, the sampled ids, their logprobs
and each token's weight version out. Weights go in place after every optimizer update
(``--vllm-weight-sync``, :mod:`agentsgym_trl.vllm_sync`; ``auto``: ``reload`` on a CPU,
``nccl`` on a GPU when vLLM is importable by the trainer, else ``reload``), each push
within ``--vllm-sync-timeout`` seconds, each checked against the trainer's own
logprobs (``--vllm-verify-tolerance``; by default 0.01 on a CPU, where both sides
compute in float32, and off on a GPU). :class:`VLLMGeneration` is what the trainers get
(``engine=``): it pushes weights and says when the server is gone.
"""

from __future__ import annotations

import contextlib
import importlib.util
import inspect
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentsgym import make_agent
from agentsgym.errors import TrainerOptionError
from agentsgym.runtime import AgentSpec, model_folder
from agentsgym_trl.batch_trainer import BatchTrainer
from agentsgym_trl.server_process import ServerProcess
from agentsgym_trl.vllm_client import InferenceServerError, VLLMClient
from agentsgym_trl.vllm_server import LOG_FILE, SERVED_MODEL, server_root, vllm_server
from agentsgym_trl.vllm_sync import WeightSync, server_settings, weight_sync

logger = logging.getLogger(__name__)

INITIAL_MODEL_FOLDER = "vllm-initial-model"
"""Where a model that has no folder (``--model tiny``) is saved for the server to load."""
CPU_VERIFY_TOLERANCE = 0.01
"""The largest logprob gap a push may leave between server and trainer on a CPU (both
float32: measured gaps are about 2e-5)."""
REQUEST_SECONDS = 600.0
"""A generation request's own budget; it may also wait out a weight push (paused)."""
SYNC_PATHS = ("auto", "reload", "nccl", "ipc")
PROGRESS_SECONDS = 15.0
"""How often the start-up of a server is reported."""


@dataclass(frozen=True)
class VLLMOptions:
    """The ``--vllm-*`` options of ``agentsgym train`` (module docstring)."""

    base_url: str | None = None
    python: str | None = None
    port: int | None = None
    server_timeout: float = 900.0
    weight_sync: str = "auto"
    sync_timeout: float = 600.0
    serve_args: tuple[str, ...] = ()
    verify_tolerance: float | None = None
    """``None``: :data:`CPU_VERIFY_TOLERANCE` on a CPU, no check on a GPU; 0: no check."""

    @property
    def enabled(self) -> bool:
        return self.base_url is not None or self.python is not None

    def check(self) -> None:
        """Refuse options that do not go together, saying which."""
        if self.base_url is not None and self.python is not None:
            raise TrainerOptionError(
                "--vllm-server-base-url attaches to a running server and --vllm-python "
                "starts one: give one of them"
            )
        if self.python is None and (self.port is not None or self.serve_args):
            raise TrainerOptionError(
                "--vllm-server-port and --vllm-serve-arg configure a server the run starts: "
                "give --vllm-python too"
            )
        if self.weight_sync not in SYNC_PATHS:
            raise TrainerOptionError(
                f"--vllm-weight-sync must be one of {', '.join(SYNC_PATHS)}, "
                f"got {self.weight_sync!r}"
            )
        if self.server_timeout <= 0 or self.sync_timeout <= 0:
            raise TrainerOptionError("--vllm-server-timeout and --vllm-sync-timeout must be > 0")
        if self.verify_tolerance is not None and self.verify_tolerance < 0:
            raise TrainerOptionError("--vllm-verify-tolerance must be >= 0 (0: no check)")

    def tolerance(self, cpu: bool) -> float | None:
        """The logprob gap a push may leave (``None``: pushes are not checked)."""
        if self.verify_tolerance is None:
            return CPU_VERIFY_TOLERANCE if cpu else None
        return self.verify_tolerance or None

    def sync_path(self, cpu: bool) -> str:
        """The weight-sync path ``auto`` stands for on this machine."""
        if self.weight_sync != "auto":
            return self.weight_sync
        if cpu or importlib.util.find_spec("vllm") is None:
            return "reload"
        return "nccl"


class VLLMGeneration:
    """A vLLM server generating a run's rollouts (a trainer's ``engine``)."""

    def __init__(
        self,
        client: VLLMClient,
        sync: WeightSync,
        agent: Any,
        agent_options: dict[str, Any],
        server: ServerProcess | None = None,
    ) -> None:
        self.client = client
        self.sync = sync
        self.agent = agent
        self.agent_options = agent_options
        self.server = server

    def agent_spec(self) -> AgentSpec:
        """The agent as a recipe, for an executor whose workers play elsewhere."""
        return AgentSpec("openai", dict(self.agent_options))

    def push_weights(self, model: Any, version: int) -> float:
        self.check()
        return self.sync.push(model, version)

    def check(self) -> None:
        if self.server is not None and not self.server.running():
            code = self.server.process.returncode if self.server.process else None
            raise InferenceServerError(
                f"the vLLM server exited (code {code}); the end of its log, "
                f"{self.server.log_path}:\n{self.server.log_tail()}"
            )
        if self.server is None and not self.client.healthy():
            raise InferenceServerError(
                f"the vLLM server at {self.client.base_url} does not answer /health any more"
            )

    def close(self) -> None:
        self.sync.close()
        self.agent.close()


def served_folder(model: str | None, trained: Any, tokenizer: Any, output_dir: Path) -> Path:
    """The folder the started server loads: ``--model``'s (a folder, a registered model
    name), else the trainer's initial model saved into ``output_dir``."""
    if model is not None:
        if Path(model).expanduser().is_dir():
            return Path(model).expanduser()
        registered = model_folder(model)
        if registered is not None:
            return Path(registered)
    if trained is None or not hasattr(trained, "save_pretrained"):
        raise TrainerOptionError(
            f"vLLM serves a model folder; --model {model} is none (give a folder or a "
            "registered model name such as smollm2)"
        )
    folder = output_dir / INITIAL_MODEL_FOLDER
    trained.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@contextlib.contextmanager
def vllm_generation(
    options: VLLMOptions,
    *,
    served: Callable[[], Path],
    output_dir: Path,
    cpu: bool,
    sampling: dict[str, Any],
    on_progress: Callable[[float, str], None] | None = None,
) -> Iterator[VLLMGeneration]:
    """vLLM generating while the block runs (started, or attached), stopped after it.

    :param served: the folder a started server loads (:func:`served_folder`; called
        only to start a server).
    :param sampling: the agent's sampling options (``temperature``, ``max_tokens``...).
    """
    path = options.sync_path(cpu)
    with contextlib.ExitStack() as stack:
        server = None
        model_name: str | None = None
        if options.python is not None:
            serve_args, env = server_settings(path)
            folder = served()
            server = vllm_server(
                options.python,
                folder,
                log_path=output_dir / LOG_FILE,
                port=options.port,
                serve_args=[*serve_args, *options.serve_args],
                env=env,
                cpu=cpu,
            )
            stack.enter_context(server)
            seconds = server.wait_ready(options.server_timeout, on_progress)
            logger.info("the vLLM server was ready after %.0fs", seconds)
            root, model_name = server_root(server), SERVED_MODEL
        else:
            assert options.base_url is not None
            root = options.base_url.rstrip("/").removesuffix("/v1")
        client = VLLMClient(root, timeout=60.0)
        client.weight_version()  # the RL routes answer (dev mode), or an error says so
        client.check_generate()
        agent_options = {
            "base_url": root + "/v1",
            "model": model_name,
            "api": "generate",
            "timeout": REQUEST_SECONDS + options.sync_timeout,
            "max_retries": 1,
            **sampling,
        }
        agent = make_agent("openai", **agent_options)
        sync = weight_sync(
            path,
            client,
            output_dir=output_dir,
            timeout=options.sync_timeout,
            verify_tolerance=options.tolerance(cpu),
        )
        generation = VLLMGeneration(client, sync, agent, agent_options, server)
        stack.callback(generation.close)
        yield generation


def check_generates_with_an_engine(adapter: Any, trainer: str, agents: Any) -> None:
    """vLLM plays the trained model: refuse a trainer that cannot push its weights into
    it, and an ``--agent`` that would play instead."""
    if agents.agent is not None:
        raise TrainerOptionError(
            f"--agent {agents.agent} plays instead of the trained model, but with "
            "--vllm-python / --vllm-server-base-url vLLM plays it: drop one of them"
        )
    try:
        parameters = inspect.signature(adapter.train).parameters
    except (TypeError, ValueError):
        parameters = {}
    takes_engine = isinstance(adapter, BatchTrainer) or "engine" in parameters
    if not takes_engine or initial_model(adapter) is None:
        raise TrainerOptionError(
            f"trainer {trainer} cannot train with vLLM generating; use --trainer "
            "per-token-grpo or trl-grpo"
        )


def initial_model(adapter: Any) -> Any:
    """The model a trainer starts from: a loaded model, or the name TRL loads."""
    trained = getattr(adapter, "trained_model", None)
    if callable(trained):
        return trained()
    return getattr(adapter, "model", None)


def engine_sampling(
    temperature: float, max_new_tokens: int, trainer_options: dict[str, Any]
) -> dict[str, Any]:
    """The vLLM agent's sampling: the trainer's, which scores the tokens alike."""
    sampling: dict[str, Any] = {"temperature": temperature, "max_tokens": max_new_tokens}
    if trainer_options.get("top_p") is not None:
        sampling["top_p"] = float(trainer_options["top_p"])
    if trainer_options.get("top_k"):
        sampling["extra_body"] = {"top_k": int(trainer_options["top_k"])}
    return sampling


def trains_on_cpu() -> bool:
    import torch

    return not torch.cuda.is_available()


def start_progress(every: float = PROGRESS_SECONDS) -> Callable[[float, str], None]:
    """``on_progress`` of a server's start: a line every ``every`` seconds."""
    from agentsgym.cli import console

    shown = [0.0]

    def show(seconds: float, last_line: str) -> None:
        if seconds - shown[0] < every:
            return
        shown[0] = seconds
        console.print(
            f"starting the vLLM server: {seconds:.0f}s  {last_line[:110]}", soft_wrap=True
        )

    return show
