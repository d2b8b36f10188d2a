"""What dataset rows may name: class paths and env server URLs, only when allowed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentsgym.errors import UntrustedClassPathError
from agentsgym.registry import get_registry
from agentsgym.testing import run_cli
from agentsgym.trust import CLASS_PATHS_ENVIRON, module_allowed, url_allowed


def test_url_allow_lists_match_origin_and_whole_path_segments() -> None:
    allow = ["http://10.0.0.5:8000", "https://gw.example/envs"]
    assert url_allowed("http://10.0.0.5:8000", allow)
    assert url_allowed("agentgym+http://10.0.0.5:8000", allow)
    assert url_allowed("openenv+ws://10.0.0.5:8000", allow)  # the same server, upgraded
    assert not url_allowed("openenv+wss://10.0.0.5:8000", allow)  # https: another origin
    assert url_allowed("https://gw.example:443/envs/guess", allow)
    assert not url_allowed("http://10.0.0.5:80001", allow)
    assert not url_allowed("http://10.0.0.5:8001", allow)
    assert not url_allowed("http://10.0.0.50:8000", allow)
    assert not url_allowed("https://gw.example/envsX", allow)
    assert not url_allowed("https://gw.example.evil.com/envs", allow)
    assert not url_allowed("http://gw.example/envs", allow)  # another scheme, another port
    assert url_allowed("http://anything:1", True) and not url_allowed("http://anything:1", False)


def test_class_path_allow_lists_match_whole_dotted_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert module_allowed("evilmod", ["evilmod"]) and module_allowed("evilmod.envs", ["evilmod"])
    assert module_allowed("evilmod.envs", ["evilmod."]) and module_allowed("x", True)
    assert not module_allowed("evilmodx", ["evilmod"]) and not module_allowed("evil", ["evilmod"])
    assert not module_allowed("evilmod", False)
    # The neighbour's import code must not run: resolving it is refused before the import.
    marker = tmp_path / "imported"
    (tmp_path / "evilmodx.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv(CLASS_PATHS_ENVIRON, "evilmod")
    with pytest.raises(UntrustedClassPathError):
        get_registry().resolve("evilmodx:Env")
    assert not marker.exists()


def test_an_env_the_user_typed_needs_no_allowance(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Allow-lists are for what dataset rows name; a class path typed on the command line
    is the user's own choice."""
    monkeypatch.delenv(CLASS_PATHS_ENVIRON, raising=False)
    out = tmp_path / "run.jsonl"
    result = run_cli(
        "rollout", "envs_for_tests:ConfiguredCountdownEnv", "--agent", "agentsgym/bisect",
        "--num-tasks", "2", "--out", str(out),
    )
    assert result.code == 0, result.output
    assert len(out.read_text().splitlines()) == 4  # 2 tasks x 2 rollouts
    rows = tmp_path / "rows.jsonl"
    row = {"env_class_path": "envs_for_tests:ConfiguredCountdownEnv", "task_data": {"start": 2}}
    rows.write_text(json.dumps(row) + "\n")
    refused = run_cli("rollout", "--dataset", str(rows), "--agent", "agentsgym/bisect",
                      "--out", str(tmp_path / "rows_out.jsonl"))
    assert refused.code == 2 and "--allow-class-paths" in refused.stderr
