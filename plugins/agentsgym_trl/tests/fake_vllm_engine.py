"""A vLLM stand-in that generates: agentsgym-serve's loopback model server (its vLLM RL
API emulation, agentsgym_serve.vllm_rl) on the model folder it is given, started with
vLLM's command line. ``vllm_package(folder)`` makes a ``vllm`` package in ``folder``
whose ``python -m vllm.entrypoints.openai.api_server`` runs it, so that ``agentsgym
train --vllm-python`` starts it as it would start vLLM (with ``folder`` on PYTHONPATH).

``--die-on-reload N`` exits the server at once on its Nth ``reload_weights``: a server
that dies in the middle of a run.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

ENTRY = "vllm/entrypoints/openai/api_server.py"


def vllm_package(folder: Path) -> Path:
    """A fake ``vllm`` package in ``folder`` that runs this module's ``main``."""
    for package in ("vllm", "vllm/entrypoints", "vllm/entrypoints/openai"):
        (folder / package).mkdir(parents=True, exist_ok=True)
        (folder / package / "__init__.py").write_text("")
    tests = str(Path(__file__).parent)
    (folder / ENTRY).write_text(
        f"import sys\nsys.path.insert(0, {tests!r})\n"
        "from fake_vllm_engine import main\nmain()\n"
    )
    return folder


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--served-model-name", default="agentsgym-policy")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--die-on-reload", type=int)
    args, _ = parser.parse_known_args()

    import torch

    torch.set_num_threads(1)
    from agentsgym_serve.model_server import OpenAICompatServer
    from agentsgym_trl import ModelPolicy

    policy = ModelPolicy(args.model, seed=0)
    server = OpenAICompatServer(
        policy, models=[args.served_model_name], host=args.host, port=args.port
    )
    if args.die_on_reload:
        reload = server.update_weights
        reloads = [0]

        def dying_reload(*a: object, **kw: object) -> int:
            reloads[0] += 1
            if reloads[0] >= args.die_on_reload:
                print("fake vLLM: dying on reload", flush=True)
                os._exit(1)
            return reload(*a, **kw)  # type: ignore[arg-type]

        server.update_weights = dying_reload  # type: ignore[method-assign]
    server.start()
    print(f"fake vLLM: serving {args.model} on port {args.port}", flush=True)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
