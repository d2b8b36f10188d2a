"""``agentsgym atropos`` on an env with roles chooses each role's agent as ``rollout``
does (``--agent ROLE=NAME``, else the role's default agent), and refuses a role left
without one before it plays or pushes anything, naming the role and the flag."""

from __future__ import annotations

from agentsgym.testing import run_cli
from haggle_package import haggle_without_buyer_agent_fixture  # noqa: F401 (a fixture)


def test_a_role_without_an_agent_is_refused_up_front_and_its_flag_works(
    haggle_without_buyer_agent: str, unreachable_url: str
) -> None:
    args = ["atropos", haggle_without_buyer_agent, "--api-url", unreachable_url]
    args += ["--group-size", "2", "--max-groups", "1", "--outage-window", "0"]
    refused = run_cli(*args)
    said = " ".join(refused.output.split())
    assert refused.code == 2, refused.output
    assert "its role 'buyer' declares none: give --agent buyer=AGENT" in said
    assert "groups pushed" not in said  # refused before producing
    # given the buyer's agent (the seller plays with its own default), it produces: here
    # it gets as far as the API server, which is not there
    given = run_cli(*args, "--agent", "buyer=haggle/buyer")
    assert given.code == 1, given.output
    assert "cannot reach the Atropos API server" in " ".join(given.output.split())
