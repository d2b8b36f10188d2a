"""The gateway listens on agentsgym-serve's background server: a taken port is a
clear error naming it, and a stopped gateway frees its port."""

from __future__ import annotations

import socket

import httpx
import pytest

from agentsgym_gateway import ModelGateway
from gateway_fixtures import gateway_over

UNREACHABLE_BACKEND = "http://127.0.0.1:9/v1"
"""Never called: these tests only start and stop the gateway."""


def test_a_gateway_on_a_taken_port_says_which_port() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        gateway = ModelGateway(UNREACHABLE_BACKEND, port=port)
        with pytest.raises(OSError, match=f"agentsgym-gateway cannot listen on 127.0.0.1:{port}"):
            gateway.start()


def test_a_stopped_gateway_frees_its_port_for_the_next_one() -> None:
    with gateway_over() as (gateway, _):
        session = gateway.open_session()
        models = httpx.get(
            f"{session.base_url}/models", headers={"Authorization": f"Bearer {session.api_key}"}
        )
        assert models.status_code == 200
        port = int(gateway.url.rsplit(":", 1)[1])
    with ModelGateway(UNREACHABLE_BACKEND, port=port) as again:
        assert again.url == f"http://127.0.0.1:{port}"
