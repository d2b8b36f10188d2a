"""The session table: ids never reused, max sessions, tokens, tombstones, idle sessions,
create retries; URL trust rules. No server: the table and the URL helpers directly."""

from __future__ import annotations

import pytest

from agentsgym_serve.errors import ServerFull, SessionClosed, UnknownSession, WrongProtocol
from agentsgym_serve.sessions import ID_CEILING, ID_FLOOR, IDS_PER_TABLE, SessionTable
from agentsgym_serve.urls import is_remote_url, normalise_url, split_protocol


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_ids_are_never_reused_across_twenty_thousand_sessions() -> None:
    # AgentGym's servers recycled ids after ~8,000 instances; ours count up for good.
    table = SessionTable(max_sessions=8, max_tombstones=100)
    seen: set[int] = set()
    live = []
    for _ in range(20_000):
        session, new = table.create("agentgym", "k")
        assert new and session.id not in seen
        seen.add(session.id)
        live.append(session)
        if len(live) == 8:
            for old in live:
                assert table.close(old, "done")
            live.clear()
    first = table.id_base
    assert seen == set(range(first, first + 20_000))
    # an id closed long ago (its tombstone evicted) is still "closed", never unknown or live
    with pytest.raises(SessionClosed, match="closed long ago"):
        table.get(first + 5)
    with pytest.raises(UnknownSession, match="never created"):
        table.get(first + 20_000)
    with pytest.raises(UnknownSession, match="never created"):
        table.get(first - 1)


def test_tables_never_share_an_id_and_know_nothing_of_each_others() -> None:
    # A server and its restart: AgentGym's servers both counted from 0, so a client still
    # holding an id of the first reached whoever got that id from the second.
    before, after = SessionTable(max_sessions=1000), SessionTable(max_sessions=1000)
    old_ids = {before.create("agentgym", "k")[0].id for _ in range(1000)}
    new_ids = {after.create("agentgym", "k")[0].id for _ in range(1000)}
    assert len(old_ids) == len(new_ids) == 1000 and not old_ids & new_ids
    for stale in sorted(old_ids)[:10]:
        with pytest.raises(UnknownSession, match="before a server restart"):
            after.get(stale)
    # large (far from a count from 0), and integers every JSON client reads exactly
    assert all(ID_FLOOR <= i < ID_CEILING for i in old_ids | new_ids)
    assert before.id_base != after.id_base


def test_the_id_base_is_drawn_at_random_for_each_table() -> None:
    bases = {SessionTable().id_base for _ in range(50)}
    assert len(bases) == 50  # distinct by construction within a process
    assert all(ID_FLOOR <= b and b + IDS_PER_TABLE <= ID_CEILING for b in bases)
    assert all(abs(a - b) >= IDS_PER_TABLE for a in bases for b in bases if a != b)


def test_past_max_sessions_create_raises_server_full_and_frees_up_after_a_close() -> None:
    table = SessionTable(max_sessions=2)
    first, _ = table.create("agentgym", "k")
    table.create("agentgym", "k")
    with pytest.raises(ServerFull) as info:
        table.create("agentgym", "k")
    assert info.value.status == 503 and info.value.headers == {"Retry-After": "1"}
    assert "maximum of 2 sessions" in info.value.detail and "--max-sessions" in info.value.detail
    table.close(first, "done")
    third, _ = table.create("agentgym", "k")
    assert third.id == table.id_base + 2


def test_tokens_guard_v1_sessions_and_agentgym_calls_cannot_reach_them() -> None:
    table = SessionTable()
    mine, _ = table.create("agentsgym", "k")
    theirs, _ = table.create("agentgym", "k")
    assert table.get(mine.id, mine.token) is mine
    with pytest.raises(UnknownSession):
        table.get(mine.id, "0" * 32)
    with pytest.raises(WrongProtocol, match="/agentsgym/v1"):
        table.get(mine.id)
    assert table.get(theirs.id) is theirs


def test_a_closed_session_leaves_a_tombstone_with_its_reason_for_its_token_holder() -> None:
    table = SessionTable()
    session, _ = table.create("agentsgym", "k")
    session.last_finish = (1, {"closed": True})
    assert table.close(session, "finished") and not table.close(session, "again")
    with pytest.raises(SessionClosed, match=r"closed \(finished\)"):
        table.get(session.id, session.token)
    stone = table.tombstone(session.id, session.token)
    assert stone is not None and stone.last_finish == (1, {"closed": True})
    assert table.tombstone(session.id, "wrong") is None


def test_a_create_retried_with_its_request_id_gets_the_same_session() -> None:
    table = SessionTable(max_sessions=1)
    session, new = table.create("agentsgym", "k", request_id="r1")
    again, again_new = table.create("agentsgym", "k", request_id="r1")
    assert new and not again_new and again is session  # no second session, no 503 either
    table.close(session, "finished")
    with pytest.raises(SessionClosed, match="request_id 'r1'"):
        table.create("agentsgym", "k", request_id="r1")


def test_idle_sessions_are_those_unused_for_the_timeout_and_not_in_use() -> None:
    clock = Clock()
    table = SessionTable(idle_timeout=60, clock=clock)
    old, _ = table.create("agentgym", "k")
    busy, _ = table.create("agentgym", "k")
    clock.now += 30
    table.create("agentgym", "k")  # a fresh one
    clock.now += 31
    busy.active = 1  # a call is running or waiting on it
    assert table.idle() == [old]
    table.touch(old)
    assert table.idle() == []


@pytest.mark.parametrize(
    ("url", "protocol", "base"),
    [
        ("http://127.0.0.1:8000", "auto", "http://127.0.0.1:8000"),
        ("HTTP://Example.COM:80/envs/guess/", "auto", "http://example.com:80/envs/guess"),
        ("agentgym+http://h:1", "agentgym", "http://h:1"),
        ("https://[::1]:9/", "auto", "https://[::1]:9"),
    ],
)
def test_server_urls_are_normalised(url: str, protocol: str, base: str) -> None:
    assert is_remote_url(url)
    assert split_protocol(url) == (protocol, base)


@pytest.mark.parametrize("bad", ["http://h:1/?q=1", "http://h:1#x", "http://:80", "http://h:99999"])
def test_malformed_server_urls_are_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        normalise_url(bad)
