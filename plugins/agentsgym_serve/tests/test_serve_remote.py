"""A remote env behaves like the local one: byte-identical trajectories through a real
server (GuessTheNumber, TwentyQuestions, an env with every kind of hook result),
make(URL), registered ids that point at a server, and the trust rules for rows."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import agentsgym
from agentsgym.errors import EnvConfigError, UntrustedRemoteEnvError
from agentsgym_classical import BisectAgent
from agentsgym_serve import RemoteEnv
from agentsgym_serve.errors import RemoteEnvError
from serve_helpers import GUESS, TINY, fingerprint, served

pytestmark = pytest.mark.timeout(180)
TWENTYQ = "twentyq/TwentyQuestions-v0"


@pytest.fixture(scope="module")
def guess_server() -> Iterator[Any]:
    with served(GUESS) as server:
        yield server


def both(
    env_id: str, url: str, tasks: list[dict[str, Any]], agent: Any, **kwargs: Any
) -> tuple[Any, Any]:
    """The same tasks played on the local env and through the server."""
    config = kwargs.pop("env_config", None)
    plugins = kwargs.pop("plugins", ())
    local = agentsgym.make(
        env_id, tokenizer=TINY, env_config=config, plugins=plugins, allow_class_paths=True
    )
    remote = agentsgym.make(url, tokenizer=TINY, env_config=config)
    return local.run_trial(tasks, agent, **kwargs), remote.run_trial(tasks, agent, **kwargs)


def test_guess_the_number_through_the_server_is_byte_identical(guess_server: Any) -> None:
    tasks = [{"seed": seed} for seed in range(12)] + [{"target": 1}, {"target": 100}]
    local, remote = both(GUESS, guess_server.url, tasks, BisectAgent(), num_rollouts=2)
    assert remote.failed == [] if hasattr(remote, "failed") else True
    assert all(e.ok for g in remote.groups for e in g.episodes)
    assert fingerprint(remote) == fingerprint(local)
    assert {e.env_id for g in remote.groups for e in g.episodes} == {GUESS}


def test_a_remote_config_is_the_servers_and_matches_a_local_one(guess_server: Any) -> None:
    config = {"high": 10, "max_steps_per_episode": 3, "episodes_per_trial": 2, "free_shots": 1}
    remote_env = agentsgym.make(guess_server.url, tokenizer=TINY, env_config=config)
    assert isinstance(remote_env, RemoteEnv)
    assert (remote_env.config.high, remote_env.config.max_steps_per_episode) == (10, 3)
    tasks = [{"seed": seed} for seed in range(6)]
    local, remote = both(
        GUESS, guess_server.url, tasks, BisectAgent(low=1, high=10), env_config=config
    )
    assert fingerprint(remote) == fingerprint(local)
    assert any(e.truncated for g in local.groups for e in g.episodes)  # the limit was reached
    with pytest.raises(EnvConfigError) as remote_error:
        agentsgym.make(guess_server.url, env_config={"low": 5, "high": 1})
    with pytest.raises(EnvConfigError) as local_error:
        agentsgym.make(GUESS, env_config={"low": 5, "high": 1})
    assert str(remote_error.value) == str(local_error.value)


def test_every_kind_of_hook_result_survives_the_round_trip() -> None:
    from serve_envs import StepShaping, TermsEnv

    with served("serve_envs:TermsEnv", allow_class_paths=True, plugins=[StepShaping()]) as server:
        tasks = [{"seed": seed} for seed in range(5)] + [{"target": 400}]
        local, remote = both(
            "serve_envs:TermsEnv", server.url, tasks, BisectAgent(), plugins=[StepShaping()]
        )
    assert fingerprint(remote) == fingerprint(local)
    episode = remote.groups[0].episodes[0]
    assert episode.messages[0] == {"role": "system", "content": "Tu es un joueur prudent. 🎯"}
    assert {"brevity", "step"} <= set(episode.steps[0].reward_terms)
    assert "guesses" in episode.steps[-1].reward_terms  # the finish term, on the last action
    [failed] = remote.groups[-1].failed
    assert failed.error is not None and "outside [1, 100]" in failed.error
    assert len(local.groups[-1].failed) == 1
    # the server ran finish_episode once per episode, with the runner's session ids
    ids = {e.session_id for g in remote.groups for e in g.episodes}
    assert ids <= {session for session, _, _ in TermsEnv.finished}


def test_twenty_questions_through_the_server_is_byte_identical() -> None:
    # an env with its own dependencies (TextArena), as served envs usually have
    questioner = pytest.importorskip(
        "agentsgym_twentyq.questioner", reason="needs agentsgym-twentyq"
    )
    ReferenceQuestioner = questioner.ReferenceQuestioner

    with served(TWENTYQ) as server:
        remote_env = agentsgym.make(server.url, tokenizer=TINY)
        rows = remote_env.get_train_dataset()
        assert rows[0]["env_class_path"] == server.url
        tasks = [row["task_data"] for row in rows.select(range(6))]
        local, remote = both(TWENTYQ, server.url, tasks, ReferenceQuestioner())
    assert all(e.ok and e.final_reward == 1.0 for g in remote.groups for e in g.episodes)
    assert fingerprint(remote) == fingerprint(local)


def test_a_remote_env_plays_on_the_callers_own_event_loop(guess_server: Any) -> None:
    env = agentsgym.make(guess_server.url, tokenizer=TINY)
    local = agentsgym.make(GUESS, tokenizer=TINY)
    tasks = [{"seed": 3}, {"seed": 4}]

    async def play() -> Any:
        try:
            return await env.arun_trial(tasks, BisectAgent())
        finally:
            await env.aclose()

    remote = asyncio.run(play())
    again = asyncio.run(play())  # another loop, another connection pool
    assert (
        fingerprint(remote)
        == fingerprint(again)
        == fingerprint(local.run_trial(tasks, BisectAgent()))
    )


def test_rows_that_name_a_server_play_only_when_allowed(
    guess_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENTSGYM_ALLOW_REMOTE_ENVS", raising=False)
    env = agentsgym.make(guess_server.url, tokenizer=TINY)
    rows = list(env.get_eval_dataset().select(range(3)))
    assert {row["env_class_path"] for row in rows} == {guess_server.url}
    with pytest.raises(UntrustedRemoteEnvError, match="AGENTSGYM_ALLOW_REMOTE_ENVS"):
        agentsgym.runtime.run_dataset(rows, BisectAgent())
    other = "http://127.0.0.1:1"
    with pytest.raises(UntrustedRemoteEnvError):
        agentsgym.runtime.run_dataset(rows, BisectAgent(), allow_remote=[other])
    allowed = agentsgym.runtime.run_dataset(
        rows, BisectAgent(), tokenizer=TINY, allow_remote=[guess_server.url]
    )
    local = agentsgym.make(GUESS, tokenizer=TINY)
    expected = local.run_trial([row["task_data"] for row in rows], BisectAgent())
    assert fingerprint(allowed) == fingerprint(expected)
    monkeypatch.setenv("AGENTSGYM_ALLOW_REMOTE_ENVS", guess_server.url + "/")
    assert agentsgym.runtime.run_dataset(rows, BisectAgent()).final_rewards == [1.0, 1.0, 1.0]


def test_a_registered_id_can_point_at_a_server(
    guess_server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentsgym_scaffold import install_plugin

    monkeypatch.delenv("AGENTSGYM_ALLOW_REMOTE_ENVS", raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    source = (
        "from agentsgym import hookimpl\n"
        "@hookimpl\n"
        "def register_envs(register):\n"
        f"    register('far/Guess-v0', '{guess_server.url}', description='over there', high=50)\n"
    )
    install_plugin(tmp_path, "agentsgym-far", "agentsgym_far", source)
    env = agentsgym.make("far/Guess-v0", tokenizer=TINY)
    assert isinstance(env, RemoteEnv) and env.env_id == "far/Guess-v0" and env.config.high == 50
    rows = [{"env_class_path": "far/Guess-v0", "env_config": {}, "task_data": {"seed": 1}}]
    batch = agentsgym.runtime.run_dataset(
        rows, BisectAgent(high=50), tokenizer=TINY
    )  # a trusted plugin
    assert batch.final_rewards == [1.0]
    assert env.get_train_dataset()[0]["env_class_path"] == "far/Guess-v0"


def test_a_server_that_is_not_there_is_a_clear_error_quickly() -> None:
    import socket

    from agentsgym_serve import RetryPolicy, connect

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(RemoteEnvError, match=r"failed after 3 attempts: ConnectError"):
        connect(f"http://127.0.0.1:{port}", retry=RetryPolicy(max_attempts=3, backoff=0.01))


def test_a_real_chat_template_sees_the_same_tokens_through_the_server(qwen25: Any) -> None:
    from serve_envs import StepShaping

    with served("serve_envs:TermsEnv", allow_class_paths=True, plugins=[StepShaping()]) as server:
        tasks = [{"seed": seed} for seed in range(4)]
        local = agentsgym.make(
            "serve_envs:TermsEnv", tokenizer=qwen25, plugins=[StepShaping()], allow_class_paths=True
        ).run_trial(tasks, BisectAgent())
        remote = agentsgym.make(server.url, tokenizer=qwen25).run_trial(tasks, BisectAgent())
    assert fingerprint(remote) == fingerprint(local)
    assert all(e.ok and e.num_tokens > 0 for g in remote.groups for e in g.episodes)


def test_a_served_env_passes_the_contract_test(guess_server: Any) -> None:
    from agentsgym.testing import check_env

    report = check_env(guess_server.url, agent="agentsgym/bisect", raise_on_failure=False)
    assert report.passed, [(c.name, c.detail) for c in report.checks if not c.passed]
    assert len(report.checks) >= 10
