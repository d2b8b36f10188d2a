"""The shapes in which AgentGym's env clients differ, each played against `agentsgym serve`.

Each client below copies the request and reply handling of one of AgentGym's clients
(WooooDyy/AgentGym, ``agentenv/agentenv/envs``), with ``requests`` as they use it:

* BabyAI's ``step`` with its sanitiser (``re.sub(r"[^A-Za-z0-9, ]+", "", action)``),
  which turns GuessTheNumber's ``[50]`` into ``50``: the env's
  ``agentgym_action_format`` puts it back;
* WebShop's: a bare-integer ``/create`` (``--agentgym-create integer``), ``env_idx``
  in every body and query, ``session_id`` as the task index, ``state`` read from
  ``/step``, the bare string of ``GET /observation?env_idx=``;
* the tool envs' (Weather, Movie, Academia, Sheet, TODO): ``env_idx`` the instance,
  ``id`` the task;
* ALFWorld's: ``{"game", "world_type"}`` resets, ``available_actions`` read from every
  reply;
* SciWorld's: ``task_description`` read from the reset;
* lmrlgym's Maze and Wordle: the task index named ``game`` and ``seed``.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

import agentsgym
from agentsgym_classical import BisectAgent
from agentsgym_serve.agentgym_shapes import format_action
from serve_helpers import GUESS, served

requests = pytest.importorskip("requests")
pytestmark = pytest.mark.timeout(120)

INTRO = "I am thinking of an integer"


def sanitise(action: str) -> str:
    """BabyAI's and TextCraft's step: the last ``Action:`` line, sanitised."""
    matches = re.findall(r"Action:\s*(.*?)(?=\n|$)", action, re.DOTALL)
    action = matches[-1] if matches else ""
    action = re.sub(r"[^A-Za-z0-9, ]+", "", action)
    return " ".join(action.split()).strip()


def bisect(observations: list[str], low: int = 1, high: int = 100) -> str:
    """BisectAgent's guess for the conversation so far: ``[N]``."""
    messages = [{"role": "user", "content": text} for text in observations]
    reply, _ = BisectAgent(low, high).get_action(messages, None)
    return reply.split()[-1].rstrip(".")


class SanitisingBabyAIEnvClient:
    """AgentGym's BabyAIEnvClient, with the sanitising step of its current version."""

    def __init__(self, env_server_base: str, data_len: int, *args: Any, timeout: int = 300):
        self.env_server_base = env_server_base
        self.timeout = timeout
        self.data_len = data_len
        ok = requests.post(f"{self.env_server_base}/create", timeout=self.timeout)
        if ok.status_code != 200:
            raise requests.RequestException(f"Failed to create environment: {ok}")
        self.env_id = ok.json()["id"]

    def _post(self, path: str, data: dict[str, Any]) -> dict[str, Any]:
        data["id"] = self.env_id
        res = requests.post(f"{self.env_server_base}/{path}", json=data, timeout=self.timeout)
        assert res.status_code == 200
        return res.json()  # type: ignore[no-any-return]

    def observe(self) -> str:
        return self.info["observation"]  # type: ignore[no-any-return]

    def step(self, action: str) -> tuple[str, float, bool]:
        action_matches = re.findall(r"Action:\s*(.*?)(?=\n|$)", action, re.DOTALL)
        if len(action_matches) > 1:
            return "Error: Only one 'Action' is allowed per response.", 0, False
        action = action_matches[-1] if action_matches else ""
        action = re.sub(r"[^A-Za-z0-9, ]+", "", action)
        action = " ".join(action.split()).strip()
        response = self._post("step", {"action": action})
        self.info = {
            "observation": response["observation"],
            "reward": response["reward"],
            "score": response["score"],
            "done": response["done"],
        }
        return response["observation"], response["score"], response["done"]

    def reset(self, data_idx: int = 0) -> dict[str, Any]:
        response = self._post("reset", {"data_idx": data_idx})
        self.info = {
            "observation": response["observation"],
            "reward": response["reward"],
            "score": response["score"],
            "done": response["done"],
        }
        return response


class WebshopEnvClient:
    """AgentGym's WebshopEnvClient: bare-integer create, env_idx, session_id, state."""

    def __init__(self, env_server_base: str, data_len: int, *args: Any, timeout: int = 300):
        self.env_server_base = env_server_base
        self.timeout = timeout
        self.data_len = data_len
        ok = requests.post(f"{self.env_server_base}/create", timeout=self.timeout)
        if ok.status_code != 200:
            raise requests.RequestException(f"Failed to create environment: {ok}")
        self.env_id = ok.json()

    def _post(self, path: str, data: dict[str, Any]) -> Any:
        data["env_idx"] = self.env_id
        res = requests.post(f"{self.env_server_base}/{path}", json=data, timeout=self.timeout)
        assert res.status_code == 200
        return res.json()

    def _get(self, path: str) -> Any:
        res = requests.get(
            f"{self.env_server_base}/{path}?env_idx={self.env_id}", timeout=self.timeout
        )
        assert res.status_code == 200
        return res.json()

    def observe(self) -> str:
        return self._get("observation")  # type: ignore[no-any-return]

    def step(self, action: str) -> tuple[str, float, bool]:
        if action.endswith("</s>"):
            action = action[:-5]
        _action = action.split("Action:")
        if len(_action) > 1:
            action = _action[1].strip()
        else:
            action = _action[0].strip()
        response = self._post("step", {"action": action})
        return response["state"], response["reward"], response["done"]

    def reset(self, idx: int = 0) -> Any:
        response = self._post("reset", {"session_id": idx})
        response[0] = self.observe()
        return response


class ToolEnvClient:
    """The tool envs' clients (Weather, Movie, Academia, Sheet, TODO): a bare-integer
    create, ``env_idx`` the instance and, in the reset, ``id`` the task."""

    def __init__(self, env_server_base: str, data_len: int, *args: Any, timeout: int = 300):
        self.env_server_base = env_server_base
        self.timeout = timeout
        ok = requests.post(f"{self.env_server_base}/create", timeout=self.timeout)
        if ok.status_code != 200:
            raise requests.RequestException(f"Failed to create environment: {ok}")
        self.env_id = ok.json()
        self.info: dict[str, Any] = {}

    def _post(self, path: str, data: dict[str, Any]) -> dict[str, Any]:
        data["env_idx"] = self.env_id
        res = requests.post(f"{self.env_server_base}/{path}", json=data, timeout=self.timeout)
        assert res.status_code == 200
        return res.json()  # type: ignore[no-any-return]

    def observe(self) -> str:
        return self.info["observation"]  # type: ignore[no-any-return]

    def step(self, action: str) -> tuple[str, float, bool]:
        response = self._post("step", {"action": action})
        self.info = {
            "observation": response["observation"],
            "reward": response["reward"],
            "done": response["done"],
        }
        return response["observation"], response["reward"], response["done"]

    def reset(self, id: int) -> dict[str, Any]:
        response = self._post("reset", {"id": id})
        self.info = {"observation": response["observation"], "reward": 0, "done": False}
        return response


class AlfWorldEnvClient:
    """AgentGym's AlfWorldEnvClient: reset by ``game`` and ``world_type``, and
    ``available_actions`` read from every reply into the observation."""

    def __init__(self, env_server_base: str, data_len: int, *args: Any, timeout: int = 300):
        self.env_server_base = env_server_base
        self.timeout = timeout
        ok = requests.post(f"{self.env_server_base}/create", timeout=self.timeout)
        if ok.status_code != 200:
            raise requests.RequestException(f"Failed to create environment: {ok}")
        self.env_id = ok.json()["id"]

    def _post(self, path: str, data: dict[str, Any]) -> dict[str, Any]:
        data["id"] = self.env_id
        res = requests.post(f"{self.env_server_base}/{path}", json=data, timeout=self.timeout)
        assert res.status_code == 200
        return res.json()  # type: ignore[no-any-return]

    def observe(self) -> str:
        return f"{self.info['observation']}\nAVAILABLE ACTIONS: " + ",".join(
            self.info["available_actions"]
        )

    def step(self, action: str) -> tuple[str, float, bool]:
        response = self._post("step", {"action": action})
        self.info = {
            "observation": response["observation"],
            "available_actions": response["available_actions"],
            "reward": response["reward"],
            "done": response["done"],
        }
        return self.observe(), response["reward"], response["done"]

    def reset(self, game: int, world_type: str = "Text") -> dict[str, Any]:
        response = self._post("reset", {"game": game, "world_type": world_type})
        self.info = {
            "observation": response["observation"],
            "available_actions": response["available_actions"],
            "reward": 0,
            "done": False,
        }
        return response


class SciworldEnvClient:
    """AgentGym's SciworldEnvClient: the task description read from the reset."""

    def __init__(self, env_server_base: str, data_len: int, *args: Any, timeout: int = 300):
        self.env_server_base = env_server_base
        self.timeout = timeout
        ok = requests.post(f"{self.env_server_base}/create", timeout=self.timeout)
        if ok.status_code != 200:
            raise requests.RequestException(f"Failed to create environment: {ok}")
        self.env_id = ok.json()["id"]

    def _post(self, path: str, data: dict[str, Any]) -> dict[str, Any]:
        data["id"] = self.env_id
        res = requests.post(f"{self.env_server_base}/{path}", json=data, timeout=self.timeout)
        assert res.status_code == 200
        return res.json()  # type: ignore[no-any-return]

    def step(self, action: str) -> tuple[str, float, bool]:
        response = self._post("step", {"action": action})
        self.info = {
            "observation": response["observation"],
            "reward": response["reward"],
            "score": response["score"],
            "done": response["done"],
        }
        return response["observation"], response["score"], response["done"]

    def reset(self, data_idx: int = 0) -> dict[str, Any]:
        response = self._post("reset", {"data_idx": data_idx})
        self.info = {
            "observation": response["task_description"] + "\n" + response["observation"],
            "reward": 0,
            "score": 0,
            "done": False,
        }
        return response


def play(step: Any, first: str, low: int = 1, high: int = 100) -> tuple[list[str], bool]:
    """Bisect through a client's ``step`` (``Action: [N]``) to the end of the episode."""
    observations, done, reward = [first], False, 0.0
    while not done:
        observation, reward, done = step(f"Thought: bisect.\nAction: {bisect(observations)}")
        observations.append(observation)
    return observations, reward == 1.0


# ------------------------------------------------------------------ the sanitiser
def test_sanitised_babyai_actions_reach_guess_the_number_as_guesses() -> None:
    local = agentsgym.make(GUESS).run_trial([{"seed": 2 * i} for i in range(3)], BisectAgent())
    with served(GUESS) as server:
        client = SanitisingBabyAIEnvClient(server.url, data_len=3)
        for data_idx, group in enumerate(local.groups):
            client.reset(data_idx)
            assert sanitise(f"Action: {bisect([client.observe()])}") == "50"  # no brackets
            observations, won = play(client.step, client.observe())
            episode = group.episodes[0]
            assert won and client.info["score"] == episode.final_reward == 1.0
            # turn for turn the local episode: each "50" was stepped as "[50]"
            assert observations[:-1] == [
                m["content"] for m in episode.messages if m["role"] == "user"
            ]


def test_an_env_without_an_action_format_gets_the_sanitised_action() -> None:
    with served("agentgym_envs:UnformattedEnv", allow_class_paths=True) as server:
        client = SanitisingBabyAIEnvClient(server.url, data_len=1)
        client.reset(0)
        observation, score, done = client.step("Action: [50]")
        assert score == 0.0
        assert "could not find a guess like [50]" in observation and not done


def test_the_servers_action_format_overrides_the_envs() -> None:
    options = {"allow_class_paths": True, "agentgym_action_format": "guess [{action}]"}
    with served("agentgym_envs:UnformattedEnv", **options) as server:
        client = SanitisingBabyAIEnvClient(server.url, data_len=1)
        client.reset(0)
        assert client.step("Action: [50]") == ("", 1.0, True)  # target 50: won


@pytest.mark.parametrize(
    ("action", "expected"),
    [
        ("50", "[50]"),
        (" 50 ", "[50]"),
        ("go to desk 1, then look", "[go to desk 1, then look]"),
        ("[50]", "[50]"),  # not sanitised: as sent
        ("My guess is [50].", "My guess is [50]."),
        ("", ""),
        ("   ", "   "),
    ],
)
def test_format_action(action: str, expected: str) -> None:
    assert format_action(action, "[{action}]") == expected
    assert format_action(action, None) == action


def test_an_action_format_without_a_placeholder_is_refused() -> None:
    from agentsgym_serve import create_app

    with pytest.raises(ValueError, match=r"\{action\}"):
        create_app(GUESS, agentgym_action_format="[x]")
    with pytest.raises(ValueError, match="object or integer"):
        create_app(GUESS, agentgym_create="list")


# ------------------------------------------------------------------ env_idx clients
def test_webshop_client_bare_integer_create_env_idx_and_state() -> None:
    local = agentsgym.make(GUESS).run_trial([{"seed": 2 * i} for i in range(2)], BisectAgent())
    with served(GUESS, agentgym_create="integer") as server:
        client = WebshopEnvClient(server.url, data_len=2)
        assert isinstance(client.env_id, int) and client.env_id in server.service.table.live
        for idx, group in enumerate(local.groups):
            reply = client.reset(idx)
            first = reply[0]  # WebShop's client writes the observation into the reply
            assert first.startswith(INTRO) and reply["state"] == reply["observation"] == first
            observations, won = play(client.step, first)
            episode = group.episodes[0]
            assert won and observations[:-1] == [
                m["content"] for m in episode.messages if m["role"] == "user"
            ]
            assert client.observe() == ""  # over
        closed = requests.post(f"{server.url}/close", json={"env_idx": client.env_id})
        assert closed.json() == {"closed": True} and len(server.service.table) == 0


def test_tool_env_client_env_idx_instance_and_id_task() -> None:
    with served(GUESS, agentgym_create="integer") as server:
        client = ToolEnvClient(server.url, data_len=4)
        client.reset(id=1)  # task 1 of the train split: target 8
        observations, won = play(client.step, client.observe())
        assert won and "50 is wrong; the number is lower" in observations[1]


def test_the_default_create_reply_is_the_object() -> None:
    with served(GUESS) as server:
        created = requests.post(f"{server.url}/create").json()
        assert isinstance(created, dict) and created["observation"].startswith(INTRO)
        assert created["task_description"] == created["state"] == created["observation"]
        assert created["available_actions"] == []


# ------------------------------------------------------------------ per-env fields
def test_alfworld_client_game_world_type_and_available_actions() -> None:
    options = {"allow_class_paths": True, "env_config": {"high": 10}}
    with served("agentgym_envs:OfferingEnv", **options) as server:
        client = AlfWorldEnvClient(server.url, data_len=3)
        client.reset(game=2, world_type="Text")  # train task 2: target 4
        assert client.info["available_actions"] == [str(n) for n in range(1, 11)]
        assert client.observe().endswith("AVAILABLE ACTIONS: 1,2,3,4,5,6,7,8,9,10")
        observation, reward, done = client.step(client.info["available_actions"][0])
        assert "1 is wrong; the number is higher" in observation and not done
        assert observation.endswith("AVAILABLE ACTIONS: 2,3,4,5,6,7,8,9,10")
        observation, reward, done = client.step("4")  # a bare action, put into [4]
        assert (reward, done) == (1.0, True)
        assert client.info["available_actions"] == []  # over: nothing offered


def test_sciworld_client_reads_the_task_description() -> None:
    with served(GUESS) as server:
        client = SciworldEnvClient(server.url, data_len=1)
        reply = client.reset(0)
        assert reply["task_description"].startswith(INTRO)
        assert client.info["observation"] == f"{reply['task_description']}\n{reply['observation']}"
        assert client.step("[50]") == ("", 1.0, True)


@pytest.mark.parametrize("field", ["game", "seed", "session_id", "item_id", "idx", "data_idx"])
def test_the_task_index_by_any_of_its_names(field: str) -> None:
    with served(GUESS) as server:
        instance = requests.post(f"{server.url}/create").json()["id"]
        reset = requests.post(f"{server.url}/reset", json={"id": instance, field: 1})
        assert reset.status_code == 200
        step = requests.post(f"{server.url}/step", json={"id": instance, "action": "[8]"})
        assert step.json()["done"] is True and step.json()["reward"] == 1.0  # task 1: 8


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"id": "{instance}", "game": 1, "data_idx": 1}, "more than one task index"),
        ({"env_idx": "{instance}", "id": 1, "game": 1}, "more than one task index"),
        ({"env_idx": "{instance}", "id": -1}, "must be >= 0"),
        ({"id": "{instance}", "world_type": 3}, "world_type"),
    ],
)
def test_reset_bodies_that_are_refused(body: dict[str, Any], message: str) -> None:
    with served(GUESS) as server:
        instance = requests.post(f"{server.url}/create").json()["id"]
        body = {k: instance if v == "{instance}" else v for k, v in body.items()}
        reply = requests.post(f"{server.url}/reset", json=body)
        assert reply.status_code == 422 and message in reply.text


def test_a_body_without_an_instance_is_refused_when_openenv_is_off() -> None:
    # (with OpenEnv's routes on, a body naming neither id nor env_idx is OpenEnv's)
    with served(GUESS, openenv=False) as server:
        reply = requests.post(f"{server.url}/reset", json={"data_idx": 0})
        assert reply.status_code == 422 and "name the instance" in reply.text


def test_env_idx_bodies_are_agentgyms_when_openenv_is_on() -> None:
    pytest.importorskip("openenv")
    with served(GUESS, openenv=True) as server:
        instance = requests.post(f"{server.url}/create").json()["id"]
        reset = requests.post(f"{server.url}/reset", json={"env_idx": instance, "id": 1})
        assert reset.json()["task_description"].startswith(INTRO)
        step = requests.post(f"{server.url}/step", json={"env_idx": instance, "action": "8"})
        assert step.json()["done"] is True and step.json()["reward"] == 1.0


def test_step_and_observation_name_one_instance() -> None:
    with served(GUESS) as server:
        instance = requests.post(f"{server.url}/create").json()["id"]
        both = {"id": instance, "env_idx": instance + 1, "action": "[50]"}
        reply = requests.post(f"{server.url}/step", json=both)
        assert reply.status_code == 422 and "different instances" in reply.text
        same = {"id": instance, "env_idx": instance, "action": "[50]"}
        assert requests.post(f"{server.url}/step", json=same).json()["done"] is True
        missing = requests.get(f"{server.url}/observation")
        assert missing.status_code == 422 and missing.json()["error"] == "missing_instance"
        by_id = requests.get(f"{server.url}/observation?id={instance}").json()
        assert by_id == {"observation": ""}
        assert requests.get(f"{server.url}/observation?env_idx={instance}").json() == ""
        # Wordle's /filtered_vocab: an agentsgym env has no vocabulary to filter
        assert requests.get(f"{server.url}/filtered_vocab?id={instance}").status_code == 404


# ------------------------------------------------------------------ the command's options
def test_serve_refuses_a_bad_create_shape_or_action_format() -> None:
    from agentsgym.testing import run_cli

    shape = run_cli("serve", GUESS, "--port", "0", "--agentgym-create", "list")
    assert shape.code == 2 and "--agentgym-create must be object or integer" in shape.stderr
    action_format = run_cli("serve", GUESS, "--port", "0", "--agentgym-action-format", "[x]")
    assert action_format.code == 2 and "{action}" in action_format.stderr


def test_serve_passes_its_agentgym_options_to_the_server(tmp_path: Any) -> None:
    import signal
    import subprocess
    import sys

    from test_serve_cli import first_line

    command = [sys.executable, "-m", "agentsgym", "serve", GUESS, "--port", "0"]
    options = ["--agentgym-create", "integer", "--agentgym-action-format", "{action}"]
    with open(tmp_path / "serve.log", "w") as errors:
        process = subprocess.Popen(
            [*command, *options], stdout=subprocess.PIPE, stderr=errors, text=True
        )
        try:
            # printed once the server accepts connections: no waiting for it to listen
            url = first_line(process).split(" on ", 1)[1].split(" ", 1)[0]
            instance = requests.post(f"{url}/create", timeout=30).json()
            assert isinstance(instance, int)  # --agentgym-create integer
            step = {"env_idx": instance, "action": "50"}
            reply = requests.post(f"{url}/step", json=step, timeout=30).json()
            # "{action}" overrides GuessTheNumber's "[{action}]": a bare 50 is no guess
            assert "could not find a guess" in reply["observation"] and reply["done"] is False
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=60)
            assert process.stdout is not None
            process.stdout.close()
