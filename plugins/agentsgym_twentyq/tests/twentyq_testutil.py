"""Constants shared by the tests (a uniquely named module, unlike conftest)."""

from __future__ import annotations

BASIC = "twentyq/TwentyQuestions-v0"
HARDCORE = "twentyq/TwentyQuestions-v0-hardcore"
