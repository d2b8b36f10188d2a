"""Check that the declared version floors are true: install them, run a smoke subset.

Every ``name>=X`` in the ``[project] dependencies`` of the distributions below (and in
the extras named with them, ``folder[extra]``) is a promise that the project works with
``name==X``. This script

1. reads those floors and fails when two distributions declare different floors for
   one package (only one of them could be the tested one);
2. creates a fresh venv (default ``.venv-floors``) and installs the distributions
   with every floored package pinned to its floor (transitive packages take what
   pip resolves);
3. runs the smoke tests there: both trainers on the tiny model, the ``train``
   command, the servers (serve's, the gateway's) with harness envs, and a judge
   model's requests.

Usage: ``python scripts/check_floors.py [--venv DIR] [--keep] [-- PYTEST ARGS]``.
It needs the package index (or the wheels) for the floor versions. It prints how
long each phase took.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import tomllib
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]

DISTRIBUTIONS = [
    "core",
    "plugins/agentsgym_classical",
    "plugins/agentsgym_tools",
    "plugins/agentsgym_scaffold",
    "plugins/agentsgym_trl",
    # the env server's FastAPI is serve's extra (the gateway needs none of it)
    "plugins/agentsgym_serve[server]",
    "plugins/agentsgym_gateway",
    "plugins/agentsgym_judge",
]
"""What the smoke tests import, in install order (each before those that need it)."""

TEST_TOOLS = [
    "pytest>=8",
    "pytest-timeout>=2.3",
    "hypothesis>=6.100",
    # the unmodified program of gateway/OpenAIToolLoop-v0, as the gateway's test extra pins it
    "openai==3.57.0",
]

TESTS = "plugins/agentsgym_trl/tests"

SMOKE_TESTS = [
    f"{TESTS}/test_trainers_grpo_config.py",
    f"{TESTS}/test_trainers_trl_grpo.py::test_training_steps_change_the_weights",
    f"{TESTS}/test_trainers_per_token.py::test_training_steps_change_the_weights_and_save_the_model",
    f"{TESTS}/test_cli_train.py::test_train_with_trl_grpo_runs_end_to_end",
    f"{TESTS}/test_cli_train.py::test_train_per_token_grpo_with_a_tiny_model_built_on_the_fly",
    # the servers at their floors (fastapi, starlette, uvicorn, aiohttp, orjson): serve's
    # background server and an env with roles over its v1 protocol; the gateway's calls,
    # its exact JSON, and harness envs whose programs run as processes
    "plugins/agentsgym_serve/tests/test_serve_background_server.py",
    "plugins/agentsgym_serve/tests/test_serve_roles.py",
    "plugins/agentsgym_gateway/tests/test_gateway_calls.py",
    "plugins/agentsgym_gateway/tests/test_json_exactness.py",
    "plugins/agentsgym_gateway/tests/test_harness_envs.py",
    # a judge model's requests through the core's openai agent (aiohttp), its settings
    # (pydantic), against serve's loopback server
    "plugins/agentsgym_judge/tests/test_judge_server.py",
]


def declared_floors(distributions: list[str]) -> dict[str, Version]:
    """Each floored package and its floor; exits when distributions disagree."""
    floors: dict[str, dict[Version, list[str]]] = {}
    for entry in distributions:
        folder, _, extras = entry.partition("[")
        project = tomllib.loads((ROOT / folder / "pyproject.toml").read_text())["project"]
        lines = list(project.get("dependencies", []))
        for extra in filter(None, extras.rstrip("]").split(",")):
            lines += project["optional-dependencies"][extra]
        for line in lines:
            requirement = Requirement(line)
            name = canonicalize_name(requirement.name)
            if name.startswith("agentsgym"):
                continue
            for spec in requirement.specifier:
                if spec.operator == ">=":
                    floors.setdefault(name, {}).setdefault(Version(spec.version), []).append(
                        project["name"]
                    )
    disagreements = {name: found for name, found in floors.items() if len(found) > 1}
    if disagreements:
        for name, found in disagreements.items():
            declared = ", ".join(f"{' and '.join(d)}: >={v}" for v, d in sorted(found.items()))
            print(f"error: {name} has different floors ({declared}); declare one", file=sys.stderr)
        sys.exit(2)
    return {name: next(iter(found)) for name, found in floors.items()}


def run(command: list[str], env: dict[str, str] | None = None) -> None:
    print("+", " ".join(command), flush=True)
    subprocess.run(command, check=True, cwd=ROOT, env=env)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", type=Path, default=ROOT / ".venv-floors")
    parser.add_argument("--keep", action="store_true", help="reuse an existing venv")
    parser.add_argument("pytest_args", nargs="*", help="instead of the smoke tests")
    options = parser.parse_args()

    floors = declared_floors(DISTRIBUTIONS)
    print("floors:", ", ".join(f"{name}=={version}" for name, version in sorted(floors.items())))
    timings: dict[str, float] = {}
    started = time.perf_counter()
    venv = options.venv.resolve()
    python = venv / "bin" / "python"
    if not (options.keep and python.exists()):
        shutil.rmtree(venv, ignore_errors=True)
        run([sys.executable, "-m", "venv", str(venv)])
        (venv / ".gitignore").write_text("*\n")  # keep it out of git status
        constraints = venv / "floors.txt"
        constraints.write_text("".join(f"{n}=={v}\n" for n, v in sorted(floors.items())))
        pip = [str(python), "-m", "pip", "install", "-q", "-c", str(constraints)]
        # torch first, so that the later installs keep its (CPU) build
        if "torch" in floors:
            run(pip + [f"torch=={floors['torch']}"])
        editables = [f"-e./{folder}" for folder in DISTRIBUTIONS]
        run(pip + editables + TEST_TOOLS)
        timings["install"] = time.perf_counter() - started
    run([str(python), "-m", "pip", "list", "--format=freeze"])
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    tests_started = time.perf_counter()
    tests = options.pytest_args or SMOKE_TESTS
    command = [str(python), "-m", "pytest", "-q", *tests]
    result = subprocess.run(command, check=False, cwd=ROOT, env=env)
    timings["tests"] = time.perf_counter() - tests_started
    print("timings:", ", ".join(f"{phase} {seconds:.0f}s" for phase, seconds in timings.items()))
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
