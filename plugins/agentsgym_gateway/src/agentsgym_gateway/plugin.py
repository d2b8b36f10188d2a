"""agentsgym-gateway's plugin entry point (its harness envs register here)."""

from __future__ import annotations
