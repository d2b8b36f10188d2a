"""An env with roles from a third party (tests/haggle_package.py, written from
docs/plugin-authors.md alone): each role has its own default agent, the env none, and
one role is not trainable. What the docs promise of it holds on the command line and
in check_env."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import agentsgym
from agentsgym import hookimpl
from agentsgym.testing import check_env, run_cli
from haggle_package import BUYER_AGENT, HAGGLE, SELLER_AGENT, install_haggle


@pytest.fixture
def haggle(site: Path) -> str:
    install_haggle(site)
    return HAGGLE


def rows_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_rollout_plays_each_role_with_its_default_agent(haggle: str, tmp_path: Path) -> None:
    out = tmp_path / "deals.jsonl"
    result = run_cli(
        "rollout", haggle, "--num-tasks", "2", "--num-rollouts", "2", "--out", str(out)
    )
    assert result.code == 0, result.output
    rows = rows_of(out)
    assert [row["role"] for row in rows] == ["seller", "buyer"] * 4
    record = json.loads(out.with_name(out.name + ".run.json").read_text())["arguments"]
    assert record["role_agents"] == {"seller": SELLER_AGENT, "buyer": BUYER_AGENT}
    assert record["agent"] is None and record["env_agents"] == {}


def test_rollout_and_eval_take_an_agent_per_role(haggle: str, tmp_path: Path) -> None:
    agents = ["--agent", f"seller={SELLER_AGENT}", "--agent", f"buyer={BUYER_AGENT}"]
    out = tmp_path / "deals.jsonl"
    played = run_cli("rollout", haggle, "--num-tasks", "1", *agents, "--out", str(out))
    assert played.code == 0, played.output
    assert {row["role"] for row in rows_of(out)} == {"seller", "buyer"}
    scored = tmp_path / "eval.jsonl"
    evaluated = run_cli("eval", haggle, "--num-rollouts", "2", *agents, "--out", str(scored))
    assert evaluated.code == 0, evaluated.output
    assert {row["role"] for row in rows_of(scored)} == {"seller", "buyer"}


def test_an_option_without_an_env_agent_says_where_it_goes(haggle: str, tmp_path: Path) -> None:
    out = str(tmp_path / "deals.jsonl")
    result = run_cli("rollout", haggle, "--agent-option", "seed=3", "--out", out)
    assert result.code == 2
    assert "no agent of this run takes the option 'seed'" in result.output
    assert "ROLE.key=value" in result.output


def test_describe_says_each_role_plays_with_its_own_default(haggle: str) -> None:
    text = run_cli("describe", haggle).output
    assert "default agent: none needed, each role plays with its own (below)" in text
    assert "give --agent" not in text
    assert f"  buyer: buys the item; knows its worth; not trained; default agent {BUYER_AGENT}" in (
        text
    )


def test_list_envs_verbose_json_has_the_roles(haggle: str) -> None:
    listing = json.loads(run_cli("list-envs", "--json", "--verbose").stdout)
    [item] = [item for item in listing if item.get("id") == haggle]
    assert [(r["name"], r["trainable"], r["default_agent"]) for r in item["roles"]] == [
        ("seller", True, SELLER_AGENT),
        ("buyer", False, BUYER_AGENT),
    ]
    guess = [item for item in listing if item.get("id") == "agentsgym/GuessTheNumber-v0"]
    assert guess[0]["roles"] == []


def test_check_env_plays_each_role_with_its_default_agent(haggle: str) -> None:
    report = check_env(haggle)  # the buyer is not trainable: its episodes are checked too
    details = {check.name: check.detail for check in report.checks}
    # a placeholder agent's "I am not sure." is no offer: no deal, reward 0, and the
    # buyer never acts; each role's own trader makes deals
    assert details["episodes play without a tokenizer"] != "mean reward 0"
    roles = details["each role plays with its own view and token stream"]
    assert roles == "roles seller, buyer (trainable: seller) in 8 games"
    assert not report.skipped


def test_check_env_takes_an_agent_per_role(haggle: str) -> None:
    from agentsgym import make_agent

    agents = {"seller": make_agent(SELLER_AGENT), "buyer": make_agent(BUYER_AGENT)}
    report = check_env(haggle, agent=agents, tokenizer=None)
    assert report.passed


def test_role_rewards_that_leave_out_a_role_fail_the_game_naming_it(haggle: str) -> None:
    from agentsgym_haggle import Haggle  # type: ignore[import-not-found]

    from agentsgym import make_agent

    class SellerOnly(Haggle):  # type: ignore[misc]
        @hookimpl
        def role_rewards(self, state: dict[str, Any]) -> dict[str, float]:
            return {"seller": 1.0}

    agents = {"seller": make_agent(SELLER_AGENT), "buyer": make_agent(BUYER_AGENT)}
    batch = SellerOnly().run_trial([{"seller_cost": 1, "buyer_worth": 90}], agents)
    assert not batch.episodes and len(batch.failed) == 1
    error = str(batch.failed[0].error)
    assert "SellerOnly.role_rewards gave no reward to buyer (it gave seller)" in error
    assert "return None for a game without outcome" in error


def test_the_step_log_has_each_roles_win_draw_and_loss_rates(haggle: str) -> None:
    from agentsgym import make_agent
    from agentsgym.runtime import StepMetrics

    env = agentsgym.make(haggle, env_config={"trainable_roles": ["seller", "buyer"]})
    tasks = list(env.get_train_dataset()["task_data"]) + [{"seller_cost": 80, "buyer_worth": 20}]
    agents = {"seller": make_agent(SELLER_AGENT), "buyer": make_agent(BUYER_AGENT)}
    batch = env.run_trial(tasks, agents, 2)
    figures = StepMetrics.of_batch(batch, step=1).to_dict()
    for role in ("seller", "buyer"):
        outcomes = [e.metrics["outcome"] for e in batch.episodes if e.role == role]
        assert len(outcomes) == 14
        wins, draws = sum(o > 0 for o in outcomes), sum(o == 0 for o in outcomes)
        assert figures[f"win_rate/{role}"] == wins / 14
        assert figures[f"draw_rate/{role}"] == draws / 14
        assert figures[f"loss_rate/{role}"] == (14 - wins - draws) / 14
    assert 0 < figures["draw_rate/seller"] < 1  # the last task has no deal: a draw
    # a single-agent env's step has no rates
    guess = agentsgym.make("agentsgym/GuessTheNumber-v0")
    single = guess.run_trial([{"target": 3}], make_agent("agentsgym/bisect"))
    assert not any("rate/" in key for key in StepMetrics.of_batch(single, step=1).to_dict())


class RoleReader:
    """One agent in every role (self-play) that tells its role from its context, not
    from its prompt: the seller's trader or the buyer's."""

    def __init__(self) -> None:
        from agentsgym import make_agent

        self.traders = {"seller": make_agent(SELLER_AGENT), "buyer": make_agent(BUYER_AGENT)}
        self.seen: list[tuple[str | None, str]] = []

    def get_action(self, messages: Any, agent_state: Any, *, context: Any) -> tuple[str, Any]:
        self.seen.append((context.role, messages[0]["content"].split(".")[0]))
        return self.traders[context.role].get_action(messages, agent_state, context=context)


def test_an_agent_is_told_the_role_it_plays(haggle: str) -> None:
    reader = RoleReader()
    batch = agentsgym.make(haggle).run_trial([{"seller_cost": 40, "buyer_worth": 70}], reader)
    assert batch.episodes[0].ok and batch.episodes[0].final_reward > 0
    assert {role for role, _ in reader.seen} == {"seller", "buyer"}
    prompts = {"seller": "You sell a lamp", "buyer": "You buy a lamp"}
    assert all(opening == prompts[role] for role, opening in reader.seen)


def test_a_role_without_any_agent_is_named_with_the_flag_to_give(
    site: Path, tmp_path: Path
) -> None:
    """The buyer declares no default agent and the env registers none: rollout refuses
    before writing anything, naming the role and the flag; given that flag, it plays."""
    install_haggle(site, buyer_default=False)
    out = tmp_path / "deals.jsonl"
    refused = run_cli("rollout", HAGGLE, "--num-tasks", "1", "--out", str(out))
    assert refused.code == 2 and not out.exists()
    said = " ".join(refused.output.split())
    assert "its role 'buyer' declares none: give --agent buyer=AGENT" in said
    played = run_cli(
        "rollout", HAGGLE, "--num-tasks", "1", "--agent", f"buyer={BUYER_AGENT}", "--out", str(out)
    )
    assert played.code == 0, played.output
    assert {row["role"] for row in rows_of(out)} == {"seller", "buyer"}
