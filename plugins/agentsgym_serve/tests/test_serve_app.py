"""The env server over real HTTP (uvicorn on 127.0.0.1, a free port): AgentGym's
protocol, the /agentsgym/v1 endpoints, validation, limits, locks, reaping, logs."""

from __future__ import annotations

import concurrent.futures
import json
import logging
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import agentsgym
from agentsgym_serve.logs import JsonFormatter
from serve_helpers import GUESS, served

pytestmark = pytest.mark.timeout(120)
V1 = "/agentsgym/v1"


@pytest.fixture(scope="module")
def guess_server() -> Iterator[Any]:
    with served(GUESS, max_sessions=64) as server:
        yield server


@pytest.fixture
def http(guess_server: Any) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=guess_server.url, timeout=30) as client:
        yield client


def local_turns(seed: int, actions: list[str]) -> list[tuple[str, float, bool]]:
    """(observation, reward, done) of each action, played on the local env."""
    env = agentsgym.make(GUESS)
    state = env.initialize_episode("s", {"seed": seed})
    out = [(env.format_prompt(state, 0), 0.0, False)]
    for step, action in enumerate(actions):
        state, reward, done, _ = env.step_episode(state, action)
        text = "" if done else env.format_prompt(state, step + 1)
        out.append((text, reward, done))
    return out


def test_agentgym_protocol_round_trip(http: httpx.Client) -> None:
    created = http.post("/create")
    # the instance starts on task 0 ({"seed": 0}), whose observation comes with the id
    first = local_turns(0, [])[0][0]
    assert created.status_code == 200 and created.json() == {
        "id": created.json()["id"],
        "observation": first,
        "reward": 0.0,
        "score": 0.0,
        "done": False,
        # the extras some of AgentGym's clients read (WebShop's, SciWorld's, ALFWorld's)
        "state": first,
        "task_description": first,
        "available_actions": [],
    }
    env_id = created.json()["id"]
    # data_idx 3 of the served train split is the task {"seed": 6}
    expected = local_turns(6, ["[50]", "hello", "[25]"])
    reset = http.post("/reset", json={"id": env_id, "data_idx": 3}).json()
    prompt = expected[0][0]
    extras = {"task_description": prompt, "available_actions": []}
    assert reset == {
        "observation": prompt,
        "reward": 0.0,
        "score": 0.0,
        "done": False,
        "state": prompt,
        **extras,
    }
    score = 0.0
    for action, (observation, reward, done) in zip(["[50]", "hello", "[25]"], expected[1:]):
        step = http.post("/step", json={"id": env_id, "action": action}).json()
        score += reward
        assert step == {
            "observation": observation,
            "reward": reward,
            "score": score,
            "done": done,
            "truncated": False,  # beyond AgentGym's fields: the step limit did not end it
            "state": observation,
            **extras,
        }
    assert http.get("/observation", params={"id": env_id}).json() == {
        "observation": expected[-1][0]
    }
    assert http.post("/close", json={"id": env_id}).json() == {"closed": True}
    again = http.post("/close", json={"id": env_id}).json()
    assert again["closed"] is False and "closed" in again["error"]
    late = http.post("/step", json={"id": env_id, "action": "[1]"})
    assert late.status_code == 410 and late.json()["error"] == "session_closed"


def test_an_agentgym_episode_ends_with_done_at_the_step_limit(guess_server: Any) -> None:
    with httpx.Client(base_url=guess_server.url, timeout=30) as http:
        env_id = http.post("/create").json()["id"]
        http.post("/reset", json={"id": env_id, "data_idx": 0})
        replies = [
            http.post("/step", json={"id": env_id, "action": "no guess"}).json() for _ in range(10)
        ]
        assert [r["done"] for r in replies] == [False] * 9 + [True]
        over = http.post("/step", json={"id": env_id, "action": "[1]"})
        assert over.status_code == 409 and "is over" in over.json()["detail"]
        http.post("/close", json={"id": env_id})


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/reset", {"id": "x", "data_idx": 0}, ["body", "id"]),
        ("/reset", {"id": 0, "data_idx": -1}, ["body", "data_idx"]),
        ("/step", {"id": 0}, ["body", "action"]),
        ("/reset", {"id": 0, "data_index": 3}, ["body", "data_index"]),
        ("/close", {"id": True}, ["body", "id"]),  # not session 1 (found by schemathesis)
        ("/reset", {"id": "0", "data_idx": 0}, ["body", "id"]),
        ("/reset", {"id": 0, "data_idx": 1.5}, ["body", "data_idx"]),
        (
            f"{V1}/sessions/0/step",
            {"token": "t", "episode": 1, "step": -1, "action": "a"},
            ["body", "step"],
        ),
        (f"{V1}/sessions", {"task_data": "seed=1"}, ["body", "task_data"]),
    ],
)
def test_bad_bodies_are_422_naming_the_field(
    http: httpx.Client, path: str, body: dict[str, Any], field: list[str]
) -> None:
    response = http.post(path, json=body)
    assert response.status_code == 422
    assert field in [error["loc"] for error in response.json()["detail"]]


def test_integers_written_as_integral_floats_are_integers(http: httpx.Client) -> None:
    # JSON Schema's "integer" admits 2.0, so schema-driven clients send it (schemathesis did).
    env_id = http.post("/create").json()["id"]
    reset = http.post("/reset", json={"id": float(env_id), "data_idx": 2.0})
    assert reset.status_code == 200 and reset.json()["done"] is False
    page = http.post(f"{V1}/datasets/train", json={"offset": 1.0, "limit": 2.0})
    assert page.status_code == 200 and page.json()["offset"] == 1
    assert len(page.json()["tasks"]) == 2
    http.post("/close", json={"id": env_id})


def test_past_max_sessions_the_server_answers_503_with_a_clear_body() -> None:
    with served(GUESS, max_sessions=2) as server, httpx.Client(base_url=server.url) as http:
        ids = [http.post("/create").json()["id"] for _ in range(2)]
        full = http.post("/create")
        assert full.status_code == 503 and full.headers["retry-after"] == "1"
        body = full.json()
        assert body["error"] == "server_full" and body["max_sessions"] == 2
        assert "maximum of 2 sessions" in body["detail"] and "--max-sessions" in body["detail"]
        v1_full = http.post(f"{V1}/sessions", json={"task_data": {"seed": 1}})
        assert v1_full.status_code == 503
        assert http.get(f"{V1}/health").json()["sessions"] == 2  # still serving
        http.post("/close", json={"id": ids[0]})
        new = http.post("/create").json()["id"]
        assert new not in ids and new > max(ids)  # a new id, never a reused one


def test_an_id_from_before_a_restart_is_unknown_to_the_new_server() -> None:
    # AgentGym's protocol has no tokens: an id is all a client holds. Two app instances
    # on one port are a server and its restart.
    port = 0
    ids: dict[str, list[int]] = {}
    for run in ("before", "after"):
        with (
            served(GUESS, port=port) as server,
            httpx.Client(base_url=server.url) as http,
        ):
            port = server.port
            ids[run] = [http.post("/create").json()["id"] for _ in range(20)]
            if run == "after":
                stale = ids["before"][-1]
                step = http.post("/step", json={"id": stale, "action": "[50]"})
                observed = http.get("/observation", params={"id": stale})
                closed = http.post("/close", json={"id": stale}).json()
    assert not set(ids["before"]) & set(ids["after"])
    assert step.status_code == 404 and step.json()["error"] == "unknown_session"
    assert "never created it" in step.json()["detail"]
    assert "before a server restart" in step.json()["detail"]
    assert observed.status_code == 404 and observed.json()["error"] == "unknown_session"
    assert closed["closed"] is False and "never created it" in closed["error"]


def test_unknown_ids_and_other_protocols_sessions_are_refused(http: httpx.Client) -> None:
    unknown = http.post("/step", json={"id": 10**9, "action": "[1]"})
    assert unknown.status_code == 404 and unknown.json()["error"] == "unknown_session"
    mine = http.post(f"{V1}/sessions", json={"task_data": {"seed": 1}}).json()
    other = http.post("/step", json={"id": mine["id"], "action": "[1]"})
    assert other.status_code == 403 and other.json()["error"] == "wrong_protocol"
    wrong_token = http.post(
        f"{V1}/sessions/{mine['id']}/step",
        json={"token": "0" * 32, "episode": 1, "step": 0, "action": "[1]"},
    )
    assert wrong_token.status_code == 404
    http.post(f"{V1}/sessions/{mine['id']}/close", json={"token": mine["token"]})


def test_a_repeated_v1_step_is_answered_again_and_applied_once(
    http: httpx.Client, guess_server: Any
) -> None:
    service = guess_server.service
    created = http.post(f"{V1}/sessions", json={"task_data": {"seed": 4}, "request_id": "abc"})
    session = created.json()
    assert session["episode"] == 1 and session["messages"][0]["role"] == "user"
    # the same create again (its reply was lost): the same session, not a second one
    assert (
        http.post(f"{V1}/sessions", json={"task_data": {"seed": 4}, "request_id": "abc"}).json()
        == session
    )
    url = f"{V1}/sessions/{session['id']}/step"
    body = {"token": session["token"], "episode": 1, "step": 0, "action": "[50]"}
    applied, replayed = service.steps_applied, service.steps_replayed
    first = http.post(url, json=body)
    second = http.post(url, json=body)
    assert first.status_code == second.status_code == 200 and first.content == second.content
    assert (service.steps_applied - applied, service.steps_replayed - replayed) == (1, 1)
    reply = first.json()
    assert (reply["id"], reply["episode"], reply["step"]) == (session["id"], 1, 0)
    different = http.post(url, json={**body, "action": "[51]"})
    assert different.status_code == 409 and "different action" in different.json()["detail"]
    skipped = http.post(url, json={**body, "step": 2})
    assert skipped.status_code == 409 and "next step of episode 1" in skipped.json()["detail"]
    state = http.get(f"{V1}/sessions/{session['id']}", params={"token": session["token"]}).json()
    assert [m["role"] for m in state["messages"]] == ["user", "assistant", "user"]
    assert state["messages"][1]["content"] == "[50]" and state["step"] == 1
    finish = {"token": session["token"], "episode": 1, "truncated": False, "error": None}
    finished = http.post(f"{V1}/sessions/{session['id']}/finish", json=finish)
    assert finished.json() == {
        "id": session["id"],
        "episode": 1,
        "reward_terms": {},
        "closed": True,
    }
    # its reply lost, the finish is sent again: the same answer from the closed session
    assert http.post(f"{V1}/sessions/{session['id']}/finish", json=finish).json() == finished.json()
    assert http.post(url, json={**body, "step": 1}).status_code == 410


def test_v1_reset_starts_the_next_episode_only(http: httpx.Client) -> None:
    session = http.post(f"{V1}/sessions", json={}).json()
    assert session["episode"] == 0 and session["messages"] == []
    url = f"{V1}/sessions/{session['id']}/reset"
    early = http.post(url, json={"token": session["token"], "episode": 2, "task_data": {"seed": 1}})
    assert early.status_code == 409 and "next reset starts episode 1" in early.json()["detail"]
    one = http.post(url, json={"token": session["token"], "episode": 1, "task_data": {"seed": 1}})
    again = http.post(url, json={"token": session["token"], "episode": 1, "task_data": {"seed": 1}})
    assert one.status_code == 200 and one.content == again.content
    http.post(f"{V1}/sessions/{session['id']}/close", json={"token": session["token"]})


def test_env_errors_are_answered_as_400_never_500(http: httpx.Client) -> None:
    bad = http.post(f"{V1}/sessions", json={"task_data": {"target": 1000}, "request_id": "bad"})
    assert bad.status_code == 400 and bad.json()["error"] == "env_error"
    assert "outside [1, 100]" in bad.json()["detail"]
    retried = http.post(f"{V1}/sessions", json={"task_data": {"target": 1000}, "request_id": "bad"})
    assert retried.status_code == 410 and "first episode failed" in retried.json()["detail"]


def test_env_config_is_validated_by_the_server(http: httpx.Client) -> None:
    good = http.post(f"{V1}/env/config", json={"env_config": {"high": 10}})
    assert good.json()["env_config"]["high"] == 10 and good.json()["env_config"]["low"] == 1
    bad = http.post(f"{V1}/env/config", json={"env_config": {"low": "x", "colour": 1}})
    assert bad.status_code == 422 and bad.json()["error"] == "bad_env_config"
    assert "low" in bad.json()["detail"] and "unknown key 'colour'" in bad.json()["detail"]


def test_a_locked_config_refuses_other_configs() -> None:
    with (
        served(GUESS, {"high": 20}, lock_config=True) as server,
        httpx.Client(base_url=server.url) as http,
    ):
        locked = http.post(f"{V1}/sessions", json={"env_config": {"high": 30}, "task_data": {}})
        assert locked.status_code == 403 and "--lock-config" in locked.json()["detail"]
        same = http.post(f"{V1}/env/config", json={"env_config": {"high": 20}})
        assert same.status_code == 200 and same.json()["env_config"]["high"] == 20


def test_env_info_datasets_openapi_and_health(http: httpx.Client) -> None:
    info = http.get(f"{V1}/env").json()
    assert info["protocol"] == "agentsgym/v1" and info["env_id"] == GUESS
    assert info["datasets"] == ["train", "eval"] and info["env_config"]["high"] == 100
    assert {"low", "high", "max_steps_per_episode"} <= set(info["config_schema"]["properties"])
    page = http.post(f"{V1}/datasets/train", json={"offset": 1, "limit": 3}).json()
    assert page["total"] == 200 and page["tasks"] == [{"seed": 2}, {"seed": 4}, {"seed": 6}]
    assert http.post(f"{V1}/datasets/test", json={}).status_code == 422
    past = http.post("/reset", json={"id": http.post("/create").json()["id"], "data_idx": 200})
    assert past.status_code == 404 and "past the end of the train dataset" in past.json()["detail"]
    paths = http.get("/openapi.json").json()["paths"]
    for path in ("/create", "/reset", "/step", "/observation", "/close", "/health"):
        assert path in paths
    assert f"{V1}/sessions/{{session_id}}/step" in paths
    assert http.get("/health").json() == {"status": "healthy"}  # openenv's HealthResponse
    load = http.get(f"{V1}/health").json()
    assert load["env_id"] == GUESS and 1 <= load["sessions"] <= load["max_sessions"]
    assert load["server_instance"] == info["server_instance"]


def test_concurrent_steps_on_one_instance_are_serialised() -> None:
    from serve_envs import TrackingEnv

    TrackingEnv.max_in_flight = 0
    with (
        served(
            "serve_envs:TrackingEnv", {"max_steps_per_episode": 50}, allow_class_paths=True
        ) as server,
        httpx.Client(base_url=server.url, timeout=60) as http,
    ):
        env_id = http.post("/create").json()["id"]
        http.post("/reset", json={"id": env_id, "data_idx": 0})

        def step(n: int) -> dict[str, Any]:
            return http.post("/step", json={"id": env_id, "action": f"[{200 + n}]"}).json()

        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            replies = list(pool.map(step, range(16)))
    assert TrackingEnv.max_in_flight == 1
    lefts = sorted(int(r["observation"].rsplit("left: ", 1)[1].rstrip(".")) for r in replies)
    assert lefts == list(range(34, 50))  # each of the 16 steps applied exactly once, in turn


def test_idle_sessions_are_reaped_and_their_episodes_finished() -> None:
    from serve_envs import TermsEnv

    TermsEnv.finished.clear()
    with (
        served("serve_envs:TermsEnv", allow_class_paths=True, idle_timeout=0.2) as server,
        httpx.Client(base_url=server.url) as http,
    ):
        env_id = http.post("/create").json()["id"]
        http.post("/reset", json={"id": env_id, "data_idx": 0})
        deadline = time.monotonic() + 60
        while http.get(f"{V1}/health").json()["sessions"] and time.monotonic() < deadline:
            time.sleep(0.05)
        late = http.post("/step", json={"id": env_id, "action": "[1]"})
    assert late.status_code == 410 and "reaped" in late.json()["detail"]
    # the episode /create started (task 0) ended by the reset, then the reset's by the reaper
    assert [(s, e is not None and "idle" in e) for s, _, e in TermsEnv.finished] == [
        (f"agentgym-{env_id}", False),
        (f"agentgym-{env_id}", True),
    ]


def test_request_logs_are_json_lines_with_their_fields(
    http: httpx.Client, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="agentsgym_serve"):
        http.get("/health")
        env_id = http.post("/create").json()["id"]
        http.post("/close", json={"id": env_id})
    lines = [json.loads(JsonFormatter().format(r)) for r in caplog.records]
    requests = [line for line in lines if line.get("event") == "request"]
    assert {"method": "GET", "path": "/health", "status": 200} == {
        k: requests[0][k] for k in ("method", "path", "status")
    }
    assert isinstance(requests[0]["ms"], float)
    closed = [line for line in lines if line.get("event") == "session_closed"]
    assert closed and closed[0]["id"] == env_id and closed[0]["reason"] == "closed by the client"


def test_the_serving_guide_lists_every_endpoint_and_option(http: httpx.Client) -> None:
    from typer.main import get_command

    from agentsgym.cli import build_app

    guide = (Path(__file__).resolve().parents[3] / "docs" / "serving.md").read_text()
    documented = {
        (method, path.replace("{id}", "{session_id}").replace("{train\\|eval}", "{split}"))
        for method, path in re.findall(r"^\| `(GET|POST) ([^ ?`]+)", guide, re.MULTILINE)
    }
    published = {
        (method.upper(), path.removeprefix(V1))
        for path, item in http.get("/openapi.json").json()["paths"].items()
        for method in item
        if path != "/health"
    }
    assert documented == published
    command = get_command(build_app()).commands["serve"]  # type: ignore[attr-defined]
    for param in command.params:
        names = [*param.opts, *getattr(param, "secondary_opts", [])]
        if names[0].startswith("--"):
            assert any(f"`{name}" in guide or f" {name} " in guide for name in names), names


def test_a_retried_create_or_reset_gets_its_first_reply_even_after_steps(
    http: httpx.Client,
) -> None:
    first = http.post(f"{V1}/sessions", json={"task_data": {"seed": 8}, "request_id": "late"})
    session = first.json()
    step = {"token": session["token"], "episode": 1, "step": 0, "action": "[50]"}
    assert http.post(f"{V1}/sessions/{session['id']}/step", json=step).status_code == 200
    again = http.post(f"{V1}/sessions", json={"task_data": {"seed": 8}, "request_id": "late"})
    assert again.content == first.content  # not the conversation as it is now
    url = f"{V1}/sessions/{session['id']}/reset"
    reset = {"token": session["token"], "episode": 2, "task_data": {"seed": 9}}
    reply = http.post(url, json=reset)
    http.post(f"{V1}/sessions/{session['id']}/step", json={**step, "episode": 2})
    assert http.post(url, json=reset).content == reply.content
    http.post(f"{V1}/sessions/{session['id']}/close", json={"token": session["token"]})
