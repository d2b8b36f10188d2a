"""A client of one role of a served game is never sent what the other roles keep private
(``Role.private``, ``MultistepEnv.task_for_role``), on any protocol: the buyer of the
haggle game (tests/haggle_package.py, a third party's package) never receives the
seller's cost, yet the server's seller plays with it."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import agentsgym
from agentsgym import make_agent
from agentsgym_serve import BackgroundServer, create_app
from haggle_package import BUYER_AGENT, HAGGLE, SELLER_AGENT, haggle_installed
from serve_helpers import TINY

pytestmark = pytest.mark.timeout(180)

V1 = "/agentsgym/v1"


@pytest.fixture
def haggle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    yield from haggle_installed(tmp_path, monkeypatch)


class Recorded:
    """An ASGI app that keeps every body and WebSocket message it sends to clients."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.state = app.state
        self.sent: list[str] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        async def keep(message: dict[str, Any]) -> None:
            payload = message.get("body") or message.get("bytes") or message.get("text")
            if payload:
                text = payload if isinstance(payload, str) else payload.decode("utf-8", "replace")
                self.sent.append(text)
            await send(message)

        await self.app(scope, receive, keep)

    def leaks(self, secrets: dict[str, list[int]]) -> list[str]:
        """What of ``secrets`` (a key and its values) any reply held."""
        found = []
        for key, values in secrets.items():
            found += [key for body in self.sent if key in body]
            for value in values:
                pattern = re.compile(rf"(?<!\d){value}(?!\d)")
                found += [str(value) for body in self.sent if pattern.search(body)]
        return found


@contextlib.contextmanager
def recorded_server(**options: Any) -> Iterator[tuple[str, Recorded]]:
    app = Recorded(create_app(HAGGLE, agents={"seller": SELLER_AGENT}, **options))
    with BackgroundServer(app) as server:
        yield server.url, app


def seller_secrets() -> dict[str, list[int]]:
    tasks = agentsgym.make(HAGGLE).get_train_dataset()["task_data"]
    return {"seller_cost": [task["seller_cost"] for task in tasks]}


def buyer_views(batch: Any) -> list[Any]:
    return [(e.messages, e.final_reward) for e in batch.episodes if e.role == "buyer"]


def test_each_role_is_shown_a_task_without_the_others_secrets(haggle: str) -> None:
    env = agentsgym.make(haggle)
    task = {"seller_cost": 5, "buyer_worth": 9, "seed": 1}
    assert env.task_for_role(task, "buyer") == {"buyer_worth": 9, "seed": 1}
    assert env.task_for_role(task, "seller") == {"seller_cost": 5, "seed": 1}
    assert task == {"seller_cost": 5, "buyer_worth": 9, "seed": 1}  # unchanged
    with pytest.raises(ValueError, match="private must be a tuple of task_data keys"):
        agentsgym.Role("a", private="secret")  # type: ignore[arg-type]


def test_a_v1_client_of_the_buyer_never_receives_the_sellers_cost(haggle: str) -> None:
    with recorded_server() as (url, app):
        env = agentsgym.make(url, tokenizer=TINY, env_config={"role": "buyer"})
        tasks = list(env.get_train_dataset()["task_data"])
        remote = env.run_trial(tasks, make_agent(BUYER_AGENT))
        bad = {"task_data": {"agentsgym_task": "train:99"}, "role": "buyer"}
        refused = httpx.post(f"{url}{V1}/sessions", json=bad)
        leaked = app.leaks(seller_secrets())  # everything the buyer's client was sent
        asked = httpx.post(f"{url}{V1}/datasets/train", json={"role": "seller"})
    assert leaked == []
    assert all("seller_cost" not in task and task["agentsgym_task"] for task in tasks)
    assert [task["buyer_worth"] for task in tasks] == [4877 + 10 * i for i in range(6)]
    assert refused.status_code == 404 and "names no task of this server" in refused.text
    # the server played the whole task: the buyer's episodes are those of a local game
    both = {"trainable_roles": ["seller", "buyer"]}  # the buyer's groups too
    local = agentsgym.make(haggle, tokenizer=TINY, env_config=both).run_trial(
        list(agentsgym.make(haggle).get_train_dataset()["task_data"]),
        {"seller": make_agent(SELLER_AGENT), "buyer": make_agent(BUYER_AGENT)},
    )
    assert buyer_views(remote) == buyer_views(local)
    assert all(e.ok and e.role == "buyer" for e in remote.episodes)
    # the seller's tasks go to no client here: the server's agent plays the seller
    assert asked.status_code == 400 and asked.json()["error"] == "bad_role"


def test_an_openenv_client_of_the_buyer_never_receives_the_sellers_cost(haggle: str) -> None:
    pytest.importorskip("openenv.core")
    with recorded_server() as (url, app):
        openenv = "openenv+" + url.replace("http://", "ws://")
        env = agentsgym.make(
            openenv, tokenizer=TINY, env_config={"reset_fields": {"role": "buyer"}}
        )
        batch = env.run_trial([{"data_idx": i} for i in range(6)], make_agent(BUYER_AGENT))
    assert len(batch.episodes) == 6 and all(e.ok for e in batch.episodes)
    assert all("You buy a lamp" in e.messages[0]["content"] for e in batch.episodes)
    assert app.leaks(seller_secrets()) == []


def test_an_agentgym_client_of_the_buyer_never_receives_the_sellers_cost(haggle: str) -> None:
    with recorded_server(client_role="buyer") as (url, app):
        env = agentsgym.make(f"agentgym+{url}", tokenizer=TINY)
        batch = env.run_trial([{"data_idx": i} for i in range(6)], make_agent(BUYER_AGENT))
    assert len(batch.episodes) == 6 and all(e.ok for e in batch.episodes)
    assert all("You buy a lamp" in e.messages[0]["content"] for e in batch.episodes)
    assert app.leaks(seller_secrets()) == []
