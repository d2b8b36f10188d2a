"""A two-role env package written the way a third party would, from
docs/plugin-authors.md alone: a seller and a buyer bargain over one item, each knowing
only its own number (the seller its cost, the buyer the item's worth to it). Each role
has its own default agent; the env registers none. The buyer is a scripted opponent
(``Role(trainable=False)``). Each role's number is private to it (``Role.private``): a
server never sends it to a client of the other role. Installed as a distribution with
:func:`install_haggle` (entry-point discovery finds it as it finds a pip-installed one).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HAGGLE = "haggle/Haggle-v0"
SELLER_AGENT, BUYER_AGENT = "haggle/seller", "haggle/buyer"

HAGGLE_PLUGIN = '''
"""Haggle: a seller and a buyer bargain over one item; each knows only its own number."""

from __future__ import annotations

import random
import re
from typing import Any

from pydantic import Field

from agentsgym import EnvConfig, EpisodeContext, MultistepEnv, Role, StepResult, hookimpl

OFFER = re.compile(r"\\[offer (\\d+)\\]")
OTHER = {"seller": "buyer", "buyer": "seller"}


class HaggleConfig(EnvConfig):
    max_steps_per_episode: int = Field(default=8, ge=1, le=40, description="offers, both roles")


class Haggle(MultistepEnv):
    """A seller and a buyer bargain over one item: an offer is [offer N], [accept] takes
    the other's last offer. The seller earns the price less its cost, the buyer the
    item's worth to it less the price; no deal pays nobody."""

    config_class = HaggleConfig
    config: HaggleConfig
    roles = (
        Role("seller", description="sells the item; knows its cost",
             default_agent="haggle/seller", private=("seller_cost",)),
        Role("buyer", trainable=False, description="buys the item; knows its worth",
             default_agent="haggle/buyer", private=("buyer_worth",)),
    )
    run_hooks_inline = True

    @hookimpl
    def initialize_episode(self, task_data: dict[str, Any]) -> dict[str, Any]:
        return {
            "cost": task_data["seller_cost"],
            "worth": task_data["buyer_worth"],
            "to_move": "seller",
            "last_offer": None,
            "price": None,
            "greeted": [],
        }

    @hookimpl
    def turn_role(self, state: dict[str, Any]) -> str:
        return state["to_move"]

    @hookimpl
    def format_prompt(self, state: dict[str, Any], role: str) -> Any:
        heard = "" if state["last_offer"] is None else f"The {OTHER[role]} offers {state['last_offer']}."
        if role in state["greeted"]:
            return heard
        state["greeted"].append(role)
        if role == "seller":
            secret = f"You sell a lamp. It cost you {state['cost']}."
        else:
            secret = f"You buy a lamp. It is worth {state['worth']} to you."
        rules = "Reply [offer N] to offer a price, or [accept] to take the last offer."
        return [
            {"role": "system", "content": f"{secret} {rules}"},
            {"role": "user", "content": heard or "Make your first offer."},
        ]

    @hookimpl
    def step_episode(self, state: dict[str, Any], action: str, role: str) -> StepResult:
        offer = OFFER.search(action)
        if "[accept]" in action and state["last_offer"] is not None:
            state["price"] = state["last_offer"]
            return StepResult(state, 0.0, True, {"deal": state["price"]})
        if offer is None:
            return StepResult(state, 0.0, True, {"deal": None, "invalid": True})
        state["last_offer"] = int(offer.group(1))
        state["to_move"] = OTHER[role]
        return StepResult(state, 0.0, False, {"offer": state["last_offer"]})

    @hookimpl
    def role_rewards(self, state: dict[str, Any]) -> dict[str, float]:
        price = state["price"]
        if price is None:
            return {"seller": 0.0, "buyer": 0.0}
        return {"seller": float(price - state["cost"]), "buyer": float(state["worth"] - price)}

    def get_train_dataset(self) -> Any:
        return self.make_dataset(
            [{"seller_cost": 4817 + 7 * i, "buyer_worth": 4877 + 10 * i, "seed": i}
             for i in range(6)]
        )

    def get_eval_dataset(self) -> Any:
        return self.make_dataset(
            [{"seller_cost": 30 + i, "buyer_worth": 90 - i, "seed": 100 + i} for i in range(2)]
        )


class Trader:
    """Opens far from its own number, concedes a seeded step each turn, and accepts an
    offer that leaves it a margin. It reads its number from its first prompt."""

    sells: bool = True

    def get_action(
        self, messages: list[dict[str, str]], agent_state: Any, *,
        context: EpisodeContext | None = None,
    ) -> tuple[str, Any]:
        if agent_state is None:
            rng = random.Random(context.seed if context is not None else 0)
            own = int(re.findall(r"\\d+", messages[0]["content"])[0])
            agent_state = {"own": own, "rng": rng, "ask": None}
        heard = OFFER.search(messages[-1]["content"]) or re.search(r"offers (\\d+)", messages[-1]["content"])
        own = agent_state["own"]
        if heard is not None:
            price = int(heard.group(1))
            if (price >= own + 5) if self.sells else (price <= own - 5):
                return "[accept]", agent_state
        step = agent_state["rng"].randint(2, 6)
        if agent_state["ask"] is None:
            agent_state["ask"] = own + 30 if self.sells else own - 30
        else:
            agent_state["ask"] += -step if self.sells else step
        return f"[offer {agent_state['ask']}]", agent_state


class Seller(Trader):
    sells = True


class Buyer(Trader):
    sells = False


@hookimpl
def register_envs(register):
    register("haggle/Haggle-v0", "{module}:Haggle", description="bargain over a lamp")


@hookimpl
def register_agents(register):
    register("haggle/seller", "{module}:Seller", description="a seller that concedes slowly")
    register("haggle/buyer", "{module}:Buyer", description="a buyer that concedes slowly")
'''


BUYER_DEFAULT = 'default_agent="haggle/buyer", '


def install_haggle(site: Path, *, buyer_default: bool = True) -> Path:
    """Install the haggle package as the distribution ``agentsgym-haggle`` in ``site``
    (a folder on ``sys.path``, e.g. the ``site`` fixture); return its module file.
    ``buyer_default=False``: the buyer (the role not trained) declares no default agent,
    so a run must be given one for it."""
    from agentsgym_scaffold import install_plugin

    source = HAGGLE_PLUGIN if buyer_default else HAGGLE_PLUGIN.replace(BUYER_DEFAULT, "")
    return install_plugin(site, "agentsgym-haggle", "agentsgym_haggle", source)


def haggle_installed(
    tmp_path: Path, monkeypatch: Any, *, buyer_default: bool = True
) -> Iterator[str]:
    """The body of a fixture for test folders without the core's ``site`` fixture: the
    package installed in a folder put on ``sys.path`` (and its module forgotten after);
    yields the env id."""
    site = tmp_path / "haggle-site"
    install_haggle(site, buyer_default=buyer_default)
    monkeypatch.syspath_prepend(str(site))
    yield HAGGLE
    sys.modules.pop("agentsgym_haggle", None)


@pytest.fixture(name="haggle_without_buyer_agent")
def haggle_without_buyer_agent_fixture(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    """The haggle package whose buyer declares no default agent (the env none either),
    installed for one test (:func:`haggle_installed`); the env id. A test module imports
    it to use the fixture ``haggle_without_buyer_agent``."""
    yield from haggle_installed(tmp_path, monkeypatch, buyer_default=False)
