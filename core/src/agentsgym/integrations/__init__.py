"""agentsgym on other engines: :mod:`agentsgym.integrations.atropos` pushes scored
groups to an Atropos API server."""
