"""``python -m agentsgym`` runs the CLI."""

from agentsgym.cli import main

main()
