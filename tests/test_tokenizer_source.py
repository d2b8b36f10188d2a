"""``--tokenizer`` / ``load_tokenizer``: a name that can only fail to load fails at once,
saying what to do, instead of a hub repo-id error or a minute of retries offline."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest

import agentsgym
from agentsgym import default_tokenizer
from agentsgym.default_tokenizer import tokenizer_source
from agentsgym.errors import AgentsGymError


@pytest.fixture
def hub_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """The hub switched on (the tests' HF_HUB_OFFLINE=1 removed), no proxy."""
    for name in (
        "HF_HUB_OFFLINE",
        "TRANSFORMERS_OFFLINE",
        "HF_ENDPOINT",
        "HTTPS_PROXY",
        "https_proxy",
        "ALL_PROXY",
        "all_proxy",
    ):
        monkeypatch.delenv(name, raising=False)


def no_network(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every connection fails, as without a network; the addresses tried are kept."""
    tried: list[Any] = []

    def refuse(address: Any, *args: Any, **kwargs: Any) -> socket.socket:
        tried.append(address)
        raise OSError("Temporary failure in name resolution")

    monkeypatch.setattr(socket, "create_connection", refuse)
    return tried


def test_a_folder_that_does_not_exist_is_no_such_folder(tmp_path: Path) -> None:
    with pytest.raises(AgentsGymError, match="no such folder") as raised:
        agentsgym.load_tokenizer(str(tmp_path / "no" / "such" / "folder"))
    assert "Repo id" not in str(raised.value) and "agentsgym list-models" in str(raised.value)
    with pytest.raises(AgentsGymError, match="no such folder"):
        tokenizer_source("./relative/folder/missing")


def test_a_file_is_answered_with_its_folder(tmp_path: Path) -> None:
    (tmp_path / "tokenizer.json").write_text("{}")
    with pytest.raises(AgentsGymError, match="is a file; give the folder") as raised:
        tokenizer_source(str(tmp_path / "tokenizer.json"))
    assert repr(str(tmp_path)) in str(raised.value)


def test_a_folder_loads_and_a_home_folder_is_expanded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from importlib import resources

    bundled = resources.files("agentsgym") / "assets" / "tiny-chatml"
    assert tokenizer_source(str(bundled)) == (str(bundled), {})
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "tok").mkdir()
    assert tokenizer_source("~/tok") == (str(tmp_path / "tok"), {})
    assert agentsgym.load_tokenizer(str(bundled)).chat_template


def test_an_unknown_hub_name_with_the_hub_switched_off_fails_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    tried = no_network(monkeypatch)
    with pytest.raises(AgentsGymError, match=r"switched off \(HF_HUB_OFFLINE=1\)"):
        agentsgym.load_tokenizer("nosuchorg/no-such-model")
    assert tried == []  # nothing was asked


def test_an_unknown_hub_name_without_a_network_fails_at_once(
    hub_on: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    tried = no_network(monkeypatch)
    with pytest.raises(AgentsGymError, match=r"huggingface.co cannot be reached \(no network\?\)"):
        agentsgym.load_tokenizer("nosuchorg/no-such-model")
    assert tried == [("huggingface.co", 443)]  # one probe, no minute of retries
    monkeypatch.setenv("HF_ENDPOINT", "http://hub.internal:8080")
    with pytest.raises(AgentsGymError, match="hub.internal cannot be reached"):
        tokenizer_source("nosuchorg/no-such-model")
    assert tried[-1] == ("hub.internal", 8080)


def test_a_cached_hub_name_without_a_network_loads_from_the_cache(
    hub_on: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    import huggingface_hub

    no_network(monkeypatch)
    cached = {("acme/cached", "tokenizer_config.json"): "/cache/tokenizer_config.json"}
    monkeypatch.setattr(
        huggingface_hub, "try_to_load_from_cache", lambda name, file: cached.get((name, file))
    )
    assert tokenizer_source("acme/cached") == ("acme/cached", {"local_files_only": True})
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy:3128")  # the direct path says nothing
    assert tokenizer_source("nosuchorg/no-such-model") == ("nosuchorg/no-such-model", {})
    assert default_tokenizer._hub_reachable()
