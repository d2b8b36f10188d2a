"""Fresh virtualenvs that see the test environment's packages, for install tests
(a copy of the core tests' ``tests/venvs.py``: this distribution's tests run alone).

``python -m venv --system-site-packages`` run from inside a venv inherits the *base*
interpreter's site-packages, not the venv's: agentsgym (an editable install here)
would be missing. A ``.pth`` file in the new venv adds the test environment's
site-packages with ``site.addsitedir``, which also runs their ``.pth`` files (the
editable installs). Packages installed into the new venv go to its own
site-packages, which comes first on ``sys.path``; the test environment is untouched.
"""

from __future__ import annotations

import importlib.util
import json
import os
import site
import subprocess
import sys
from pathlib import Path
from typing import Any

OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


class ChildVenv:
    """A venv at ``root`` whose python sees the test environment's packages."""

    def __init__(self, root: Path) -> None:
        self.root = root
        subprocess.run(
            [sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(root)],
            check=True,
            capture_output=True,
            text=True,
        )
        self.python = root / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
        own = subprocess.run(
            [str(self.python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        self.site_packages = Path(own)
        parents = [p for p in site.getsitepackages() if Path(p) != self.site_packages]
        lines = [f"import site; site.addsitedir({p!r})" for p in parents]
        (self.site_packages / "_agentsgym_test_parent.pth").write_text("\n".join(lines) + "\n")

    def run(
        self, *args: str, cwd: Path | None = None, timeout: float = 300
    ) -> subprocess.CompletedProcess[str]:
        """``python ARGS`` in the venv (no check: callers assert on the result)."""
        env = {**os.environ, **OFFLINE}
        env.pop("PYTHONPATH", None)
        env.pop("VIRTUAL_ENV", None)
        return subprocess.run(
            [str(self.python), *args],
            check=False,
            capture_output=True,
            text=True,
            cwd=cwd,
            env=env,
            timeout=timeout,
        )

    def pip_install(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``pip install ARGS`` into the venv, with the test environment's pip.

        The build backend (hatchling) comes from the test environment too
        (``--no-build-isolation``), so installing needs no download.
        """
        env = {**os.environ, **OFFLINE}
        env.pop("PYTHONPATH", None)
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "--python",
                str(self.python),
                "install",
                "--no-build-isolation",
                "--no-input",
                "--quiet",
                *args,
            ],
            check=False,
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )

    def metadata(self, distribution: str, module: str, *, cwd: Path) -> dict[str, Any]:
        """What the venv's python says of an installed ``distribution``: ``version``,
        ``requires``, ``eps`` (``[group, name, value]``) and the ``file`` of ``module``."""
        code = (
            f"import json, importlib.metadata as m, {module}\n"
            f"d = m.distribution({distribution!r})\n"
            "print(json.dumps({'version': d.version, 'requires': d.requires,\n"
            "  'eps': [(e.group, e.name, e.value) for e in d.entry_points],\n"
            f"  'file': {module}.__file__}}))"
        )
        result = self.run("-c", code, cwd=cwd)
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    def passing_tests(self, package: Path) -> str:
        """Run the tests of ``package`` with the venv's pytest; assert they pass, return
        pytest's output."""
        result = self.run("-m", "pytest", "-q", "-p", "no:cacheprovider", cwd=package)
        assert result.returncode == 0, result.stdout + result.stderr
        return result.stdout

    def distributions(self) -> set[str]:
        """Names of the distributions installed in the venv's own site-packages."""
        return {
            p.name.split("-")[0].replace("_", "-").lower()
            for p in self.site_packages.glob("*.dist-info")
        }


TOOLS_CHECKOUT = Path(__file__).resolve().parents[2] / "agentsgym_tools"
"""agentsgym-tools in this checkout: what a ``new-env --tools`` package depends on."""


def new_env_installed(root: Path, env_name: str, *options: str) -> tuple[ChildVenv, Path]:
    """``agentsgym new-env ENV_NAME OPTIONS`` into ``root/agentsgym-pkg``, pip-installed (not
    editable) into the fresh venv ``root/venv``; return the venv and the package folder.

    A ``--tools`` package's agentsgym-tools is this checkout's: the test environment's
    (an editable install of it), else installed into the venv from the checkout.
    """
    package = root / "agentsgym-pkg"
    written = subprocess.run(
        [sys.executable, "-m", "agentsgym", "new-env", env_name, "--dir", str(package), *options],
        check=False,
        capture_output=True,
        text=True,
    )
    assert written.returncode == 0, written.stderr
    venv = ChildVenv(root / "venv")
    from_checkout = "--tools" in options and not _importable("agentsgym_tools")
    result = venv.pip_install(*([str(TOOLS_CHECKOUT)] if from_checkout else []), str(package))
    assert result.returncode == 0, result.stdout + result.stderr
    return venv, package


def _importable(module: str) -> bool:
    return importlib.util.find_spec(module) is not None
