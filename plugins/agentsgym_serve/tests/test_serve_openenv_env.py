"""agentsgym plays OpenEnv servers: one built only with openenv-core's ``create_app``
(its template echo env), and ``agentsgym serve`` itself over OpenEnv's protocol
(token-exact against the local env). Faults end episodes with recorded errors."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("openenv.core")

import agentsgym
from agentsgym_classical import BisectAgent
from agentsgym_serve import BackgroundServer, OpenEnvEnv
from openenv_echo import MAX_STEPS, echo_app
from serve_helpers import GUESS, TINY, fingerprint, served

pytestmark = pytest.mark.timeout(180)


class Shout:
    """A scripted agent: its replies' lengths are known, so are the rewards."""

    def get_action(self, messages: list[dict[str, str]], state: Any) -> tuple[str, Any]:
        return "hello" * (1 + len(messages) // 2), state


def openenv_url(http_url: str) -> str:
    return "openenv+" + http_url.replace("http://", "ws://")


def test_an_openenv_create_app_server_plays_as_an_env() -> None:
    with BackgroundServer(echo_app()) as server:
        env = agentsgym.make(
            openenv_url(server.url),
            tokenizer=TINY,
            env_config={
                "system_prompt": "Echo.",
                "observation_field": "echoed_message",
                "max_steps_per_episode": 10,
            },
        )
        assert isinstance(env, OpenEnvEnv)
        assert env.env_id == openenv_url(server.url)  # the URL as given: ws, not http
        batch = env.run_trial([{"seed": 1}, {"seed": 2}], Shout(), num_rollouts=2)
    episodes = [e for g in batch.groups for e in g.episodes]
    assert all(e.ok for e in episodes) and len(episodes) == 4
    episode = batch.groups[1].episodes[0]
    assert episode.messages[:2] == [
        {"role": "system", "content": "Echo."},
        {"role": "user", "content": "Echo environment ready! (seed 2)"},
    ]
    replies = [m["content"] for m in episode.messages if m["role"] == "assistant"]
    assert len(replies) == MAX_STEPS  # done came from the server
    assert [s.reward for s in episode.steps] == [pytest.approx(len(r) * 0.1) for r in replies]
    assert episode.messages[3] == {"role": "user", "content": replies[0]}  # the echo
    assert episode.steps[0].info["message_length"] == len(replies[0])
    assert episode.tokenized and sum(episode.agent_token_mask) == episode.num_agent_tokens


def test_rows_played_over_a_websocket_url_record_that_url() -> None:
    """Issue 28: rows of openenv+ws:// recorded openenv+http://. A dataset row names
    the server as given, and an allowance of its http:// origin lets it play."""
    from agentsgym.runtime import run_dataset
    from agentsgym_serve.openenv_env import canonical_openenv_url

    assert canonical_openenv_url("OpenEnv+WS://Host:81/p/") == "openenv+ws://host:81/p"
    assert canonical_openenv_url("openenv+https://h") == "openenv+https://h"
    with BackgroundServer(echo_app()) as server:
        url = openenv_url(server.url)
        rows = [
            {
                "env_class_path": url,
                "env_config": {"max_steps_per_episode": 2},
                "task_data": {"seed": 1},
            }
        ]
        batch = run_dataset(rows, Shout(), tokenizer=TINY, allow_remote=[server.url])
    [episode] = [e for g in batch.groups for e in g.episodes]
    assert episode.ok and episode.env_id == url == batch.groups[0].env_id


def test_the_whole_observation_is_the_message_without_a_field() -> None:
    with BackgroundServer(echo_app()) as server:
        env = OpenEnvEnv(openenv_url(server.url), env_config={"max_steps_per_episode": 10})
        episode = env.run_trial([{"seed": 5}], Shout()).groups[0].episodes[0]
    assert episode.ok
    assert episode.messages[0]["content"] == (
        '{"echoed_message": "Echo environment ready! (seed 5)", "message_length": 0}'
    )


def test_agentsgym_serve_over_openenv_is_token_exact() -> None:
    tasks = [{"task_data": {"seed": 2 * i}} for i in range(8)]
    config = {"max_steps_per_episode": 4}  # some episodes end at the step limit
    with served(GUESS, config) as server:
        env = agentsgym.make(openenv_url(server.url), tokenizer=TINY, env_config=config)
        remote = env.run_trial(tasks, BisectAgent(), num_rollouts=2)
        assert len(server.service.table) == 0
    local = agentsgym.make(GUESS, tokenizer=TINY, env_config=config).run_trial(
        [t["task_data"] for t in tasks], BisectAgent(), num_rollouts=2
    )
    assert any(e.truncated for g in local.groups for e in g.episodes)

    strip = {"env_id", "task_data", "step_infos"}
    remote_rows = _without(fingerprint(remote), strip)
    local_rows = _without(fingerprint(local), strip)
    assert remote_rows == local_rows  # token ids, masks, per-token rewards, messages


def _without(rows: list[str], keys: set[str]) -> list[str]:
    import json

    out = []
    for row in rows:
        value = json.loads(row)
        if isinstance(value, dict):
            for key in keys:
                value.pop(key, None)
        out.append(json.dumps(value, sort_keys=True))
    return out


def test_a_full_server_is_waited_for_and_faults_are_recorded() -> None:
    with BackgroundServer(echo_app(max_concurrent_envs=1)) as server:
        env = OpenEnvEnv(
            openenv_url(server.url),
            env_config={"observation_field": "echoed_message", "max_steps_per_episode": 10},
        )
        # four episodes at once on a server of one session: the resets that find it
        # full (CAPACITY_REACHED) are retried until a session frees
        batch = env.run_trial([{"seed": i} for i in range(4)], Shout())
        assert all(g.episodes[0].ok for g in batch.groups)
        url = server.url
    # the server is gone: connecting is retried for the retry window, then recorded
    gone = OpenEnvEnv(openenv_url(url), env_config={"retry_window_seconds": 0.5})
    [failed] = gone.run_trial([{"seed": 1}], Shout()).groups[0].failed
    assert "reset on OpenEnv server" in failed.error and "attempts" in failed.error


def test_a_step_that_fails_on_the_server_fails_its_episode() -> None:
    with served(GUESS) as server:
        env = OpenEnvEnv(openenv_url(server.url), env_config={"action_field": "text"})
        batch = env.run_trial([{"data_idx": 0}], BisectAgent())
    [failed] = batch.groups[0].failed
    assert "step 0 on OpenEnv server" in failed.error and "VALIDATION_ERROR" in failed.error


class Caller:
    """Replies with the JSON of a tool call (or of its arguments), n = the turn."""

    def __init__(self, whole: bool) -> None:
        self.whole = whole

    def get_action(self, messages: list[dict[str, str]], state: Any) -> tuple[str, Any]:
        n = sum(m["role"] == "assistant" for m in messages) + 1
        if self.whole:
            call = {"tool_name": "add", "arguments": {"n": n}}
            return f"```json\n{json.dumps(call)}\n```", state
        return json.dumps({"n": n}), state


@pytest.mark.parametrize("whole", [True, False], ids=["whole-action", "arguments-field"])
def test_textarena_messages_and_dict_valued_actions(whole: bool) -> None:
    """Issue 27: TextArena-shaped messages failed with KeyError 'role'; an MCP env's
    dict-valued arguments could not be sent."""
    from openenv_shapes import board_app

    config: dict[str, Any] = {"action_json": True, "max_steps_per_episode": 5}
    if whole:
        config["action_field"] = None
    else:
        config |= {"action_field": "arguments", "action_fields": {"tool_name": "add"}}
    with BackgroundServer(board_app()) as server:
        env = agentsgym.make(openenv_url(server.url), tokenizer=TINY, env_config=config)
        episode = env.run_trial([{"seed": 4}], Caller(whole)).groups[0].episodes[0]
    assert episode.ok, episode.error
    users = [m["content"] for m in episode.messages if m["role"] == "user"]
    assert users == ["Welcome to board 4", "You called add"]  # the last one ends it
    assert [s.reward for s in episode.steps] == [1.0, 2.0]  # the arguments arrived as a dict


def test_a_nested_growing_field_gives_only_its_new_part() -> None:
    from openenv_shapes import board_app

    config = {
        "observation_field": "board.log",
        "observation_new_only": True,
        "action_json": True,
        "action_field": None,
        "max_steps_per_episode": 5,
    }
    with BackgroundServer(board_app()) as server:
        env = agentsgym.make(openenv_url(server.url), tokenizer=TINY, env_config=config)
        episode = env.run_trial([{"seed": 2}], Caller(True)).groups[0].episodes[0]
        whole = agentsgym.make(
            openenv_url(server.url),
            tokenizer=TINY,
            env_config={**config, "observation_new_only": False},
        ).run_trial([{"seed": 2}], Caller(True)).groups[0].episodes[0]
    users = [m["content"] for m in episode.messages if m["role"] == "user"]
    assert users == ["board 2 opened", "add(1)"]
    assert [m["content"] for m in whole.messages if m["role"] == "user"] == [
        "board 2 opened",
        "board 2 opened\nadd(1)",
    ]


def test_a_reply_that_is_not_the_json_asked_for_fails_its_episode_saying_so() -> None:
    from openenv_shapes import board_app

    config = {"action_json": True, "action_field": None, "max_steps_per_episode": 5}
    with BackgroundServer(board_app()) as server:
        env = agentsgym.make(openenv_url(server.url), tokenizer=TINY, env_config=config)
        [failed] = env.run_trial([{"seed": 1}], Shout()).groups[0].failed
    assert "the reply is not JSON" in failed.error and "action_json" in failed.error
    with pytest.raises(agentsgym.errors.EnvConfigError, match="set action_json true"):
        OpenEnvEnv("openenv+ws://127.0.0.1:9", env_config={"action_field": None})
