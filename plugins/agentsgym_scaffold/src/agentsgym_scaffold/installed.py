"""install_plugin: a plugin module installed as a distribution, for tests of discovery."""

from __future__ import annotations

import textwrap
from pathlib import Path

__all__ = ["install_plugin"]


def install_plugin(
    site: Path,
    distribution: str,
    module: str,
    source: str,
    *,
    entry_point: str | None = None,
    version: str = "1.0",
    target: str | None = None,
) -> Path:
    """Write ``module.py`` (``{module}`` in ``source`` becomes its name) and an
    installed-looking ``dist-info`` with the ``agentsgym`` entry point ``entry_point``
    (default: ``module``) into ``site``; return the module file. The entry point loads
    ``target`` (default: the module; ``"module:PLUGIN"`` for a plugin object).

    With ``site`` on ``sys.path`` (``monkeypatch.syspath_prepend``) importlib.metadata
    finds it like a pip-installed distribution, so the discovery under test is the real
    one; reset the registry (``agentsgym_fresh_registry``) before using it.
    """
    site.mkdir(parents=True, exist_ok=True)
    path = site / f"{module}.py"
    path.write_text(textwrap.dedent(source).replace("{module}", module))
    info = site / f"{distribution.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    metadata = f"Metadata-Version: 2.1\nName: {distribution}\nVersion: {version}\n"
    (info / "METADATA").write_text(metadata)
    entry = f"[agentsgym]\n{entry_point or module} = {target or module}\n"
    (info / "entry_points.txt").write_text(entry)
    return path
