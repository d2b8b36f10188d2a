"""What dataset rows may name: class paths and env server URLs, only when allowed."""

from __future__ import annotations

from agentsgym.trust import url_allowed


def test_url_allow_lists_match_origin_and_whole_path_segments() -> None:
    allow = ["http://10.0.0.5:8000", "https://gw.example/envs"]
    assert url_allowed("http://10.0.0.5:8000", allow)
    assert url_allowed("agentgym+http://10.0.0.5:8000", allow)
    assert url_allowed("https://gw.example:443/envs/guess", allow)
    assert not url_allowed("http://10.0.0.5:80001", allow)
    assert not url_allowed("http://10.0.0.5:8001", allow)
    assert not url_allowed("http://10.0.0.50:8000", allow)
    assert not url_allowed("https://gw.example/envsX", allow)
    assert not url_allowed("https://gw.example.evil.com/envs", allow)
    assert not url_allowed("http://gw.example/envs", allow)  # another scheme, another port
    assert url_allowed("http://anything:1", True) and not url_allowed("http://anything:1", False)
