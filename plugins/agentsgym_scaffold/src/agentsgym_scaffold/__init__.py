"""agentsgym-scaffold: ``agentsgym new-env NAMESPACE/Name`` writes a complete env package
(pyproject, an env with every hook, a scripted agent, datasets, tests) to start from;
``--tools`` (``tools=True``) a tool env (agentsgym-tools' ``ToolEnv``) instead;
``--harness`` (``harness=True``) a harness env (agentsgym-gateway's ``HarnessEnv``: an
unmodified agent program, a plain ``openai`` client loop, and a verifier).

In Python: ``write_package("acme/Maze", "path")``, or ``render_package(package_names(...))``
for the files without writing them. For tests of plugin discovery, ``install_plugin``
installs a plugin module as a distribution in a folder on ``sys.path``.
"""

from __future__ import annotations

from agentsgym_scaffold.errors import ScaffoldError
from agentsgym_scaffold.installed import install_plugin
from agentsgym_scaffold.writer import (
    FILES,
    HARNESS_FILES,
    KINDS,
    RESERVED_NAMESPACES,
    TOOL_FILES,
    Kind,
    PackageNames,
    kind_name,
    package_names,
    render_package,
    write_package,
)

__all__ = [
    "FILES",
    "HARNESS_FILES",
    "KINDS",
    "RESERVED_NAMESPACES",
    "TOOL_FILES",
    "Kind",
    "PackageNames",
    "ScaffoldError",
    "install_plugin",
    "kind_name",
    "package_names",
    "render_package",
    "write_package",
]
