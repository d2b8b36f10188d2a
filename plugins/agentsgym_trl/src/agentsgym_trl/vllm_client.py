"""The control plane of a vLLM server, as a trainer drives it (vLLM >= 0.32).

vLLM's RL routes (``vllm/entrypoints/rl/online/api_router.py``) and its
``/collective_rpc`` are served only when the server runs with
``VLLM_SERVER_DEV_MODE=1``: pausing with the requests in flight kept
(``/pause?mode=keep``, ``/resume``), the label of the weights it serves
(``/update_weight_version``, ``/weight_info``), its weight-transfer engine
(``/init_weight_transfer_engine``, ``/start_weight_update``, ``/update_weights``,
``/finish_weight_update``) and a method run on every worker (``/collective_rpc``;
the CPU worker's ``reload_weights(weights_path=...)`` reloads a safetensors folder in
place).

:class:`VLLMClient` calls them synchronously (the standard library's HTTP client: no
dependency), each call bounded by a timeout, and has the four methods of vLLM's
``VLLMWeightSyncClient`` protocol (``vllm.distributed.weight_transfer.base``), so it
can drive vLLM's own trainer-side transfer engines as its ``HTTPVLLMWeightSyncClient``
does. Every failure is an :class:`InferenceServerError` that names the call, what
the server said, and what to check.
"""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from typing import Any

from agentsgym.errors import AgentsGymError
from agentsgym_trl.server_process import answers
from agentsgym_trl.vllm_ipc import json_safe_update

GENERATE_PATH = "/inference/v1/generate"
DEV_MODE_HINT = (
    "vLLM serves its RL routes only with VLLM_SERVER_DEV_MODE=1 in the server's "
    "environment (agentsgym sets it for a server it starts)"
)


class InferenceServerError(AgentsGymError):
    """A call to the inference server failed, timed out, or found it gone."""


class WeightSyncError(InferenceServerError):
    """Pushing the trainer's weights into the inference server failed: the step that
    made them fails, so that no rollout is played by weights other than those labelled."""


class VLLMClient:
    """Calls to a vLLM server's control plane (see the module docstring).

    :param base_url: the server's root, ``http://host:port`` (a trailing ``/v1`` is
        dropped: these routes are not under it).
    :param timeout: seconds each call may take.
    :param api_key: sent as the bearer token (a server started with ``--api-key``).
    """

    def __init__(self, base_url: str, *, timeout: float = 300.0, api_key: str | None = None):
        self.base_url = base_url.rstrip("/").removesuffix("/v1")
        self.timeout = float(timeout)
        self.api_key = api_key

    # ------------------------------------------------------------------ requests
    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        timeout: float | None = None,
    ) -> Any:
        """The decoded JSON answer of one call (``None`` for an empty one)."""
        seconds = self.timeout if timeout is None else float(timeout)
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        url = self.base_url + path
        request = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=seconds) as response:
                text = response.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", "replace")
            hint = f"; {DEV_MODE_HINT}" if exc.code == 404 else ""
            raise InferenceServerError(
                f"{method} {url} answered HTTP {exc.code}: {_message(detail)}{hint}"
            ) from None
        except (TimeoutError, socket.timeout):
            raise InferenceServerError(
                f"{method} {url} did not answer within {seconds:g}s: the server is stuck or "
                "overloaded (its log says which)"
            ) from None
        except (urllib.error.URLError, ConnectionError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise InferenceServerError(
                f"cannot reach the vLLM server at {self.base_url} ({method} {path}: {reason}); "
                "is it still running? (its log says why it stopped)"
            ) from None
        if not text.strip():
            return None
        try:
            return json.loads(text)
        except ValueError:
            raise InferenceServerError(
                f"{method} {url} answered something that is not JSON: {text[:200]!r}"
            ) from None

    # ------------------------------------------------------------------ serving
    def healthy(self, *, timeout: float = 5.0) -> bool:
        """Whether ``/health`` answers 200 now (no error when it does not)."""
        return answers(self.base_url + "/health", timeout=timeout)

    def models(self) -> list[str]:
        """The names of the models the server serves."""
        page = self.request("GET", "/v1/models")
        data = page.get("data") if isinstance(page, dict) else None
        if not isinstance(data, list):
            raise InferenceServerError(f"{self.base_url}/v1/models answered {page!r:.200}")
        return [str(m.get("id")) for m in data if isinstance(m, dict)]

    def check_generate(self) -> None:
        """Fail unless vLLM's token-in generate API answers (one token)."""
        body = {"token_ids": [1], "sampling_params": {"max_tokens": 1}}
        try:
            self.request("POST", GENERATE_PATH, body)
        except InferenceServerError as exc:
            raise InferenceServerError(
                f"{exc}; agentsgym generates through vLLM's token-in generate API, which "
                "vLLM 0.32 or later serves when started with --enable-scale-out"
            ) from None

    # ------------------------------------------------------------------ pausing
    def pause(self, mode: str = "keep") -> None:
        """Stop scheduling: ``keep`` freezes the requests in flight, to go on at
        :meth:`resume` (nothing aborted, nothing replayed)."""
        self.request("POST", f"/pause?mode={mode}")

    def resume(self) -> None:
        self.request("POST", "/resume")

    def is_paused(self) -> bool:
        answer = self.request("GET", "/is_paused")
        return bool(isinstance(answer, dict) and answer.get("is_paused"))

    # ------------------------------------------------------------------ versions
    def weight_version(self) -> str:
        """The label of the weights the server serves (``"default"`` until one is set)."""
        answer = self.request("GET", "/weight_info")
        if not isinstance(answer, dict) or "weight_version" not in answer:
            raise InferenceServerError(f"{self.base_url}/weight_info answered {answer!r:.200}")
        return str(answer["weight_version"])

    def set_weight_version(self, version: str | int) -> None:
        """Label the weights served from now on; every token sampled afterwards carries it."""
        self.request("POST", "/update_weight_version", {"new_version": str(version)})

    # ------------------------------------------------------------------ weights
    def collective_rpc(
        self, method: str, kwargs: dict[str, Any] | None = None, *, timeout: float | None = None
    ) -> Any:
        """Run ``method`` on every worker (the server's ``/collective_rpc``)."""
        body = {"method": method, "kwargs": dict(kwargs or {})}
        if timeout is not None:
            body["timeout"] = float(timeout)
        return self.request("POST", "/collective_rpc", body, timeout=timeout)

    def reload_weights(self, folder: str, *, timeout: float | None = None) -> None:
        """Reload the weights in place from a ``save_pretrained`` safetensors folder."""
        self.collective_rpc("reload_weights", {"weights_path": str(folder)}, timeout=timeout)

    # vLLM's VLLMWeightSyncClient protocol: what its trainer-side engines call.
    def init_weight_transfer_engine(self, init_info: dict[str, Any]) -> None:
        self.request("POST", "/init_weight_transfer_engine", {"init_info": init_info})

    def start_weight_update(self) -> None:
        self.request("POST", "/start_weight_update")

    def update_weights(self, update_info: dict[str, Any] | list[dict[str, Any]]) -> None:
        self.request("POST", "/update_weights", {"update_info": json_safe_update(update_info)})

    def finish_weight_update(self, weight_version: str | None = None) -> None:
        body = {"weight_version": weight_version} if weight_version is not None else None
        self.request("POST", "/finish_weight_update", body)


def _message(text: str) -> str:
    """The human part of an error body (vLLM's ``{"error": ...}``, FastAPI's ``detail``)."""
    try:
        body = json.loads(text)
    except ValueError:
        body = None
    if isinstance(body, dict):
        inner = body.get("error")
        if isinstance(inner, dict):
            inner = inner.get("message")
        text = str(inner or body.get("detail") or body.get("message") or text)
    line = " ".join(text.split())
    return (line[:300] + " [...]") if len(line) > 300 else (line or "(empty body)")
