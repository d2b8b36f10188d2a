"""Secrets stay out of what the server and its clients write (issue 21, secrets): the
server's JSON log lines, the served config every client is shown, and the errors,
logs and env ids of remote envs whose URL carries credentials."""

from __future__ import annotations

import io
import json
import logging
import socket
from typing import Any

import httpx
import pytest

from agentsgym_classical import BisectAgent
from agentsgym_serve import AgentGymEnv, RemoteEnv, RetryPolicy
from agentsgym_serve.errors import RemoteEnvError
from agentsgym_serve.logs import JsonFormatter, configure_json_logging
from serve_helpers import served

pytestmark = pytest.mark.timeout(120)
QUICK = RetryPolicy(max_attempts=2, backoff=0.01)
SECRET = "sk-live-0123456789"


def record(message: str, *args: Any, **fields: Any) -> logging.LogRecord:
    made = logging.LogRecord("agentsgym_serve", logging.INFO, __file__, 1, message, args, None)
    made.fields = fields  # type: ignore[attr-defined]
    return made


def test_json_log_lines_redact_messages_fields_and_exceptions() -> None:
    line = record(
        "calling %s",
        f"http://judge:{SECRET}@judge.example/v1",
        event="env_built",
        env_config={"judge_api_key": SECRET, "nested": [{"password": SECRET}], "high": 10},
        note=f"api_key={SECRET}",
    )
    try:
        raise RuntimeError(f"could not reach http://user:{SECRET}@h/x")
    except RuntimeError:
        import sys

        line.exc_info = sys.exc_info()
    text = JsonFormatter().format(line)
    assert SECRET not in text
    data = json.loads(text)
    assert data["message"] == "calling http://<redacted>@judge.example/v1"
    assert data["env_config"]["high"] == 10 and data["event"] == "env_built"
    assert data["env_config"]["judge_api_key"] == "<redacted>"
    assert "<redacted>" in data["exception"]


def test_the_server_logs_no_secret_of_a_client_config() -> None:
    stream = io.StringIO()
    configure_json_logging(logging.INFO, stream=stream)
    try:
        with (
            served("serve_envs:SecretEnv", allow_class_paths=True) as server,
            httpx.Client(base_url=server.url) as http,
        ):
            bad = {"env_config": {"judge_api_key": SECRET, "high": "ten"}}
            assert http.post("/agentsgym/v1/env/config", json=bad).status_code == 422
            http.get("/health", params={"token": SECRET})
    finally:
        for name in ("agentsgym", "agentsgym_serve", "uvicorn", "uvicorn.error"):
            logging.getLogger(name).handlers = []
            logging.getLogger(name).propagate = True
    assert '"event": "request"' in stream.getvalue() and SECRET not in stream.getvalue()


def test_a_served_config_never_shows_its_secrets_to_clients() -> None:
    served_config = {"judge_api_key": SECRET, "judge_url": f"http://u:{SECRET}@judge/v1"}
    with (
        served("serve_envs:SecretEnv", served_config, allow_class_paths=True) as server,
        httpx.Client(base_url=server.url) as http,
    ):
        info = http.get("/agentsgym/v1/env")
        checked = http.post("/agentsgym/v1/env/config", json={"env_config": {"high": 50}})
        created = http.post("/agentsgym/v1/sessions", json={"task_data": {"seed": 1}})
        page = http.post("/agentsgym/v1/datasets/train", json={"limit": 1})
        for reply in (info, checked, created, page):
            assert reply.status_code == 200 and SECRET not in reply.text
        shown = info.json()["env_config"]
        assert shown["judge_api_key"] == "<redacted>"
        assert shown["judge_url"] == "http://<redacted>@judge/v1"
        hosted = server.service.host.default.env  # the env itself keeps what it was given
        assert hosted.config.judge_api_key == SECRET


def test_remote_env_errors_logs_and_ids_never_carry_url_credentials(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://agent:{SECRET}@127.0.0.1:{port}"
    with caplog.at_level(logging.INFO, logger="agentsgym_serve.client"):
        with pytest.raises(RemoteEnvError) as refused:
            RemoteEnv(url, retry=QUICK)
        env = AgentGymEnv(url, retry=QUICK)
        batch = env.run_trial([{"data_idx": 1}], BisectAgent())
    [failed] = batch.groups[0].failed
    assert "failed after 2 attempts" in failed.error and SECRET not in failed.error
    assert SECRET not in str(refused.value) and "http://<redacted>@127.0.0.1" in str(refused.value)
    assert SECRET not in env.env_id and env.env_id.startswith("agentgym+http://<redacted>@")
    assert any("retrying" in r.getMessage() for r in caplog.records)
    assert not any(SECRET in r.getMessage() for r in caplog.records)
    assert SECRET in env.location  # what rows name: the client must still reach the server


def test_rows_of_every_remote_env_name_its_url_with_credentials_and_play_again() -> None:
    """One rule for the three clients: a dataset row names the server as given, its
    credentials included (else the row could not play again); an env id, what episodes
    record and logs show, has them redacted. (OpenEnv's rows named the redacted id.)"""
    from agentsgym.runtime import run_dataset
    from agentsgym_serve import OpenEnvEnv

    openenv = OpenEnvEnv(f"openenv+ws://agent:{SECRET}@127.0.0.1:9", env_config={"dataset_size": 1})
    agentgym = AgentGymEnv(f"agentgym+http://agent:{SECRET}@127.0.0.1:9", retry=QUICK)
    for env, prefix in ((openenv, "openenv+ws"), (agentgym, "agentgym+http")):
        [row] = env.make_dataset([{"data_idx": 0}])
        assert row["env_class_path"] == f"{prefix}://agent:{SECRET}@127.0.0.1:9"
        assert env.env_id == f"{prefix}://<redacted>@127.0.0.1:9"
    assert openenv.get_train_dataset()[0]["env_class_path"] == openenv.location
    with served("agentsgym/GuessTheNumber-v0") as server:
        url = server.url.replace("http://", f"http://agent:{SECRET}@")
        remote = RemoteEnv(url)
        rows = remote.make_dataset([{"seed": 3}])
        assert rows[0]["env_class_path"] == url
        assert remote.env_id == "agentsgym/GuessTheNumber-v0"  # the served id, as locally
        [replayed] = run_dataset(rows, BisectAgent(), allow_remote=True).groups
    assert replayed.episodes[0].ok and SECRET not in replayed.episodes[0].env_id
