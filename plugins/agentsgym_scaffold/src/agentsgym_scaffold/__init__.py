"""agentsgym-scaffold: ``agentsgym new-env NAMESPACE/Name`` writes a complete env package
(pyproject, an env with every hook, a scripted agent, datasets, tests) to start from;
``--tools`` (``tools=True``) a tool env (agentsgym-tools' ``ToolEnv``) instead.

In Python: ``write_package("acme/Maze", "path")``, or ``render_package(package_names(...))``
for the files without writing them.
"""

from __future__ import annotations

from agentsgym_scaffold.writer import (
    FILES,
    KINDS,
    RESERVED_NAMESPACES,
    TOOL_FILES,
    Kind,
    PackageNames,
    package_names,
    render_package,
    write_package,
)

__all__ = ["FILES", "KINDS", "RESERVED_NAMESPACES", "TOOL_FILES", "Kind", "PackageNames",
           "package_names", "render_package", "write_package"]
