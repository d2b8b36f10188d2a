"""Registration through the entry point, and the core's check_env contract."""

from __future__ import annotations

import pytest

from agentsgym.registry import get_registry
from agentsgym.testing import check_env
from twentyq_testutil import BASIC, HARDCORE


def test_plugin_registers_both_ids_and_the_questioner() -> None:
    from agentsgym.cli.listing import env_listing

    listed = {item["id"]: item for item in env_listing() if "id" in item}
    for env_id in (BASIC, HARDCORE):
        assert listed[env_id]["distribution"] == "agentsgym-twentyq"
        assert listed[env_id]["default_agent"] == "twentyq/reference-questioner"
    registry = get_registry()
    assert registry.resolve(HARDCORE).default_env_config == {"hardcore": True}
    assert registry.agent("twentyq/reference-questioner").distribution == "agentsgym-twentyq"


@pytest.mark.parametrize("env_id", [BASIC, HARDCORE])
def test_check_env(env_id: str) -> None:
    report = check_env(env_id)  # raises EnvCheckError listing every failed check
    assert report.passed and report.checks
