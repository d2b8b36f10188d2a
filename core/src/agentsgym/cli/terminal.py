"""The terminal of the ``agentsgym`` command line: library code logs, the CLI prints."""

from __future__ import annotations

from rich.console import Console

console = Console()
err_console = Console(stderr=True)
