"""AgentGym's own clients work unchanged against `agentsgym serve`, all but lmrlgym's
Wordle client, as docs/serving.md's table says.

The classes below copy the request and response handling of AgentGym's
``BabyAIEnvClient``, ``TextCraftEnvClient`` and (its constructor) ``WordleEnvClient``
(WooooDyy/AgentGym, ``agentenv/agentenv/envs/babyai.py``, ``textcraft.py`` and
``lmrlgym.py``) line for line, with ``requests`` as they use it; only the base classes
(``BaseEnvClient``, the conversation start) are left out. Before the server returned
``score`` and the ``/create`` observation, the first two raised ``KeyError``."""

from __future__ import annotations

import re
from typing import Any

import pytest

import agentsgym
from agentsgym_classical import BisectAgent
from serve_helpers import GUESS, served

requests = pytest.importorskip("requests")
pytestmark = pytest.mark.timeout(120)


class BabyAIEnvClient:
    """AgentGym's BabyAIEnvClient: its __init__, _post, _get, observe, step, reset."""

    def __init__(self, env_server_base: str, data_len: int, *args: Any, timeout: int = 300):
        self.env_server_base = env_server_base
        self.timeout = timeout
        self.data_len = data_len

        ok = requests.post(f"{self.env_server_base}/create", timeout=self.timeout)
        if ok.status_code != 200:
            raise requests.RequestException(f"Failed to create environment: {ok}")

        ok = ok.json()
        self.env_id = ok["id"]

    def _post(self, path: str, data: dict[str, Any]) -> dict[str, Any]:
        data["id"] = self.env_id
        res = requests.post(f"{self.env_server_base}/{path}", json=data, timeout=self.timeout)
        assert res.status_code == 200
        return res.json()  # type: ignore[no-any-return]

    def _get(self, path: str) -> dict[str, Any]:
        res = requests.get(f"{self.env_server_base}/{path}?id={self.env_id}", timeout=self.timeout)
        assert res.status_code == 200
        return res.json()  # type: ignore[no-any-return]

    def observe(self) -> str:
        return self.info["observation"]  # type: ignore[no-any-return]

    def step(self, action: str) -> tuple[str, float, bool]:
        if action.endswith("</s>"):
            action = action[:-5]
        _action = action.split("Action:")
        if len(_action) > 1:
            action = _action[1].strip()
        else:
            action = _action[0].strip()
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


class TextCraftEnvClient:
    """AgentGym's TextCraftEnvClient: its __init__ (a JSON body to /create, the
    observation read from the reply), step (its Action: parsing), reset and close."""

    def __init__(
        self,
        env_server_base: str,
        data_len: int,
        *args: Any,
        timeout: int = 300,
        minecraft_dir: str = "agentenv_textcraft/",
        commands: str | None = None,
        goal: str | None = None,
    ):
        self.env_server_base = env_server_base
        self.timeout = timeout
        self.data_len = data_len

        dir_info = {"minecraft_dir": minecraft_dir, "commands": commands, "goal": goal}
        ok = requests.post(f"{self.env_server_base}/create", timeout=self.timeout, json=dir_info)
        if ok.status_code != 200:
            raise requests.RequestException(f"Failed to create environment: {ok}")

        ok = ok.json()
        self.env_id = ok["id"]
        self.info = {"observation": ok["observation"], "reward": 0, "done": False}

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
            "done": response["done"],
        }
        return response["observation"], response["reward"], response["done"]

    def reset(self, idx: int = 0) -> dict[str, Any]:
        response = self._post("reset", {"data_idx": idx})
        self.info.update({"observation": response["observation"], "reward": 0, "done": False})
        return response

    def close(self) -> dict[str, Any]:
        return self._post("close", {})


def bisect(observations: list[str]) -> str:
    """BisectAgent's guess for the conversation so far (observations as user turns)."""
    messages = [{"role": "user", "content": text} for text in observations]
    reply, _ = BisectAgent().get_action(messages, None)
    return reply.split()[-1].rstrip(".")  # "[50]"


def test_babyai_client_reads_score_on_reset_and_step() -> None:
    local = agentsgym.make(GUESS).run_trial([{"seed": 2 * i} for i in range(4)], BisectAgent())
    with served(GUESS) as server:
        client = BabyAIEnvClient(server.url, data_len=4)
        for data_idx, group in enumerate(local.groups):
            reply = client.reset(data_idx)
            assert reply["score"] == 0.0 and reply["reward"] == 0.0 and reply["done"] is False
            observations = [client.observe()]
            scores = []
            done = False
            while not done:
                observation, score, done = client.step(
                    f"Thought: bisect.\nAction: {bisect(observations)}"
                )
                observations.append(observation)
                scores.append(score)
            episode = group.episodes[0]
            # score: the episode's rewards so far (AgentGym's BabyAI server sums them)
            running = [sum(s.reward for s in episode.steps[: i + 1]) for i in range(len(scores))]
            assert scores == running and client.info["score"] == episode.final_reward == 1.0
            assert observations[:-1] == [
                m["content"] for m in episode.messages if m["role"] == "user"
            ]
        assert client._get("observation")["observation"] == ""  # over: nothing more to observe


def test_textcraft_client_reads_the_observation_of_create() -> None:
    with served(GUESS) as server:
        client = TextCraftEnvClient(server.url, data_len=3, commands="x", goal="y")
        first = client.observe()  # task 0, started by /create
        assert first.startswith("I am thinking of an integer")
        # TextCraft's action parsing keeps letters, digits, commas and spaces: "50",
        # which GuessTheNumber's agentgym_action_format steps as "[50]" (task 0's target)
        observation, reward, done = client.step("Thought: halve.\nAction: [50]")
        assert (observation, reward, done) == ("", 1.0, True)
        client.reset(2)
        assert client.observe() == first  # every task opens with the same text
        assert client.close() == {"closed": True}
        assert len(server.service.table) == 0


class WordleEnvClient(BabyAIEnvClient):
    """AgentGym's lmrlgym WordleEnvClient (``agentenv/agentenv/envs/lmrlgym.py``): its
    __init__ is BabyAI's, and then it reads the vocabulary (its prints left out)."""

    def __init__(self, env_server_base: str, data_len: int, *args: Any, timeout: int = 300):
        super().__init__(env_server_base, data_len, *args, timeout=timeout)
        vocab = self._get("filtered_vocab")
        self.info = {"vocab": vocab, "reward": 0, "done": False}


def test_wordles_client_does_not_start_against_an_agentsgym_env() -> None:
    """As docs/serving.md's table says: its constructor asks for the Wordle vocabulary
    (which it writes into a first observation of its own, never the env's) and asserts
    a 200; an agentsgym env has no vocabulary, so the server answers 404."""
    with served(GUESS) as server:
        with pytest.raises(AssertionError):
            WordleEnvClient(server.url, data_len=1)
        reply = requests.get(f"{server.url}/filtered_vocab?id=0", timeout=30)
        assert reply.status_code == 404
