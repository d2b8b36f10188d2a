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
) -> Path:
    """Write ``module.py`` and an installed-looking ``dist-info`` into ``site``.

    With ``site`` on ``sys.path`` (``monkeypatch.syspath_prepend``), importlib.metadata
    finds the distribution exactly as it finds a pip-installed one, so the entry-point
    discovery under test is the real one; reset the registry
    (``agentsgym_fresh_registry``) before using it. ``{module}`` in ``source`` is
    replaced by the module's name, for registrations that name it.

    :param entry_point: the name of the ``agentsgym`` entry point (default: ``module``).
    :return: the module file.
    """
    site.mkdir(parents=True, exist_ok=True)
    path = site / f"{module}.py"
    path.write_text(textwrap.dedent(source).replace("{module}", module))
    info = site / f"{distribution.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {distribution}\nVersion: {version}\n"
    )
    (info / "entry_points.txt").write_text(f"[agentsgym]\n{entry_point or module} = {module}\n")
    return path
