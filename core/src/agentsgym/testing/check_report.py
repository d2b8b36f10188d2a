"""What :func:`~agentsgym.testing.check_env` reports: a result per check (ok, failed or
skipped), and the exceptions a check raises to fail or to be skipped. Checks raise
instead of using ``assert``, which ``python -O`` removes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "CheckFailed",
    "CheckReport",
    "CheckResult",
    "CheckSkipped",
    "CheckStatus",
    "EnvCheckError",
    "require",
]

CheckStatus = Literal["ok", "failed", "skipped"]


class EnvCheckError(AssertionError):
    """check_env found the env breaking the contract; the message lists every failure."""


class CheckFailed(Exception):
    """Raised by a check: the env breaks the contract, and the message says how."""


class CheckSkipped(Exception):
    """Raised by a check that cannot run on this env or with these arguments; the
    message says why. A skipped check is reported as skipped, never as ok."""


def require(condition: object, message: str) -> None:
    """Fail the running check with ``message`` unless ``condition`` holds (an ``assert``
    that ``python -O`` keeps; build ``message`` only from values that exist either way)."""
    if not condition:
        raise CheckFailed(message)


@dataclass
class CheckResult:
    """One check: its name, its status, and what it found (or why it was skipped)."""

    name: str
    status: CheckStatus
    detail: str = ""

    @property
    def passed(self) -> bool:
        """The check did not fail (it passed, or was skipped: see :attr:`skipped`)."""
        return self.status != "failed"

    @property
    def skipped(self) -> bool:
        return self.status == "skipped"


@dataclass
class CheckReport:
    """Every check check_env ran on one env."""

    env_id: str
    checks: list[CheckResult] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """No check failed (skipped ones are listed in :attr:`skipped`)."""
        return not self.failures

    @property
    def failures(self) -> list[CheckResult]:
        return [c for c in self.checks if c.status == "failed"]

    @property
    def skipped(self) -> list[CheckResult]:
        return [c for c in self.checks if c.status == "skipped"]
