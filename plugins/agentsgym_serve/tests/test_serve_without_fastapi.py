"""agentsgym-serve without its extra [server]: the background server and the loopback
model server run on uvicorn and Starlette alone (agentsgym-gateway needs no more), and
the env server says which extra to install."""

from __future__ import annotations

import sys

import httpx
import pytest

from agentsgym.errors import MissingPluginError
from agentsgym.testing import run_cli


@pytest.fixture
def without_fastapi(monkeypatch: pytest.MonkeyPatch) -> None:
    """FastAPI not installed, as far as imports from now on can tell."""
    for name in list(sys.modules):
        if name == "fastapi" or name.startswith("fastapi."):
            monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "fastapi", None)
    for name in ("agentsgym_serve.app", "agentsgym_serve.model_server"):
        monkeypatch.delitem(sys.modules, name, raising=False)


@pytest.mark.usefixtures("without_fastapi")
def test_the_model_server_answers_without_fastapi() -> None:
    from agentsgym_serve.model_server import OpenAICompatServer, ScriptedPolicy

    with OpenAICompatServer(ScriptedPolicy(["hi"]), models=["m"]) as server:
        request = {"model": "m", "messages": [{"role": "user", "content": "hello"}]}
        answer = httpx.post(f"{server.base_url}/chat/completions", json=request, timeout=30)
    assert answer.status_code == 200
    assert answer.json()["choices"][0]["message"]["content"] == "hi"


@pytest.mark.usefixtures("without_fastapi")
def test_the_env_server_without_fastapi_says_which_extra_to_install() -> None:
    with pytest.raises(MissingPluginError, match=r"pip install 'agentsgym-serve\[server\]'"):
        from agentsgym_serve import create_app  # noqa: F401
    result = run_cli("serve", "agentsgym/GuessTheNumber-v0", "--port", "0")
    assert result.code != 0
    assert "needs FastAPI" in result.output and "agentsgym-serve[server]" in result.output
