"""llama.cpp's own OpenAI-compatible server on a registered GGUF model (``smollm2``).

    pip install 'llama-cpp-python[server]'     # builds llama.cpp from source
    python -m agentsgym_trl.llamacpp --port 8080          # serves smollm2's GGUF
    agentsgym rollout agentsgym/GuessTheNumber-v0 --tokenizer smollm2 --agent openai \
        --agent-option base_url=http://127.0.0.1:8080/v1 --agent-option model=smollm2 \
        --agent-option api=chat

What that server returns, and so what the ``openai`` agent can record: the reply's
text, and per-token logprobs with the token *strings*, but no sampled token ids and no
prompt ids (``return_token_ids`` is ignored). Episodes therefore play in
``api="chat"`` mode, text in and text out: the runner re-tokenizes every reply
(``token_source: "retokenized"``), and the logprobs, which cannot be tied to ids, are
not recorded. A prompt of token ids (``api="completions"``, token-in) is refused with
HTTP 500 (its request validation error), so that mode fails every episode.

:func:`llama_cpp_server` starts and stops one for scripts and tests.
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence

from agentsgym.errors import AgentsGymError, MissingPluginError
from agentsgym_trl.models import SMOLLM2_GGUF, GGUFModel, find_gguf
from agentsgym_trl.server_process import free_port

__all__ = ["llama_cpp_server", "main"]


def server_command(
    model: GGUFModel = SMOLLM2_GGUF,
    *,
    port: int,
    alias: str = "smollm2",
    threads: int = 2,
    extra: Sequence[str] = (),
) -> list[str]:
    """The ``python -m llama_cpp.server`` command line for ``model``'s GGUF file."""
    import importlib.util

    if importlib.util.find_spec("llama_cpp") is None:
        raise MissingPluginError(
            "llama.cpp's server is not installed: pip install 'llama-cpp-python[server]' "
            "(it builds llama.cpp from source)"
        )
    return [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(find_gguf(model)),
        "--model_alias",
        alias,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        "4096",
        "--n_threads",
        str(threads),
        *extra,
    ]


@contextlib.contextmanager
def llama_cpp_server(
    model: GGUFModel = SMOLLM2_GGUF,
    *,
    alias: str = "smollm2",
    threads: int = 2,
    extra: Sequence[str] = (),
    startup_seconds: float = 120.0,
) -> Iterator[str]:
    """Run llama.cpp's server on a free loopback port; yields its ``/v1`` base URL."""
    port = free_port()
    command = server_command(model, port=port, alias=alias, threads=threads, extra=extra)
    base_url = f"http://127.0.0.1:{port}/v1"
    # Its log goes to a file: it writes a lot, and a pipe nobody reads would block it.
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log)
        try:
            deadline = time.monotonic() + startup_seconds
            while True:
                try:
                    with urllib.request.urlopen(f"{base_url}/models", timeout=2):
                        break
                except OSError:
                    if process.poll() is not None or time.monotonic() > deadline:
                        process.kill()
                        log.seek(0)
                        tail = log.read().decode(errors="replace")[-1500:]
                        raise AgentsGymError(f"llama_cpp.server did not start: {tail}") from None
                    time.sleep(0.5)
            yield base_url
        finally:
            process.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=20)
            if process.poll() is None:
                process.kill()


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m agentsgym_trl.llamacpp``: serve smollm2's GGUF in the foreground."""
    parser = argparse.ArgumentParser(description="llama.cpp's server on smollm2's GGUF file")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("extra", nargs="*", help="more llama_cpp.server options, after --")
    args = parser.parse_args(argv)
    command = server_command(port=args.port, threads=args.threads, extra=args.extra)
    print(f"serving on http://127.0.0.1:{args.port}/v1 (model name 'smollm2')", flush=True)
    raise SystemExit(subprocess.call(command))


if __name__ == "__main__":
    main()
