"""Unmodified programs as envs: each run is an episode; failures fail only their episode."""

from __future__ import annotations

import sys
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

import agentsgym
from agentsgym_gateway.harness import HarnessEnv
from agentsgym_gateway.programs import CommandProgram, ProgramOutcome, ProgramRun
from agentsgym_serve.model_server import OpenAICompatServer, ScriptedPolicy
from gateway_fixtures import MODEL, TOKENIZER

ADD_CALL = '<tool_call>{"name": "add", "arguments": {"a": 17, "b": 25}}</tool_call>'
TASKS = [{"a": 17, "b": 25}]


def _server(replies: Any) -> OpenAICompatServer:
    return OpenAICompatServer(ScriptedPolicy(replies, tokenizer=TOKENIZER), models=[MODEL])


def _calculator(final: str) -> Any:
    """Call the tool first, answer once its result is back (per conversation: the
    programs of concurrent rollouts share the server)."""
    return lambda messages: final if messages[-1]["role"] == "tool" else ADD_CALL


def _config(server: OpenAICompatServer, **extra: Any) -> dict[str, Any]:
    return {"backend_url": server.base_url, "model": MODEL, "tool_parser": "hermes", **extra}


def test_a_plain_openai_tool_loop_is_an_env() -> None:
    with _server(_calculator("The sum is 42.")) as server:
        env = agentsgym.make(
            "gateway/OpenAIToolLoop-v0", tokenizer=TOKENIZER, env_config=_config(server)
        )
        with closing(env):
            batch = env.run_trial(TASKS, num_rollouts=2, max_concurrency=2)
    episodes = [e for group in batch.groups for trial in group.trials for e in trial]
    assert len(episodes) == 2
    for episode in episodes:
        assert episode.ok, episode.error
        assert episode.final_reward == 1.0 and episode.num_turns == 2
        assert episode.steps[0].info["tool_calls"] == 1
        assert episode.metrics["sampled_token_share"] == 1.0
        assert {s.token_source for s in episode.steps} == {"server"}


def test_an_openai_agents_sdk_app_is_an_env() -> None:
    pytest.importorskip("agents", reason="the program is an OpenAI Agents SDK app (openai-agents)")
    with _server(_calculator("42")) as server:
        env = agentsgym.make(
            "gateway/AgentsSDK-v0", tokenizer=TOKENIZER, env_config=_config(server)
        )
        with closing(env):
            batch = env.run_trial(TASKS)
    (episode,) = batch.groups[0].trials[0]
    assert episode.ok, episode.error
    assert episode.final_reward == 1.0 and episode.num_turns == 2
    assert [s.info["endpoint"] for s in episode.steps] == ["responses", "responses"]


class ScriptEnv(HarnessEnv):
    """A harness env around an inline script (crashing or hanging on purpose)."""

    script = ""

    def program(self, task_data: dict[str, Any]) -> CommandProgram:
        return CommandProgram((sys.executable, "-c", self.script))

    def verify(self, task_data: dict[str, Any], workdir: Path, outcome: ProgramOutcome) -> float:
        return 1.0


CALL_ONCE = (
    "import os, openai; c = openai.OpenAI(); "
    "c.chat.completions.create(model=os.environ['OPENAI_MODEL'], "
    "messages=[{'role': 'user', 'content': 'hi'}]); "
)


class CrashingEnv(ScriptEnv):
    script = (
        CALL_ONCE
        + "import sys; print('boom: ' + os.environ['OPENAI_API_KEY'], file=sys.stderr); sys.exit(3)"
    )


class HangingEnv(ScriptEnv):
    script = CALL_ONCE + "import time; time.sleep(60)"


def test_a_crash_or_a_hang_fails_its_episode_with_status_and_stderr_never_the_run() -> None:
    with _server(["hello"]) as server:
        tokenizer = agentsgym.load_tokenizer(TOKENIZER)
        crashing = CrashingEnv(tokenizer, _config(server))
        hanging = HangingEnv(tokenizer, _config(server, episode_timeout_seconds=3))
        with closing(crashing), closing(hanging):
            (crashed,) = crashing.run_trial(TASKS).groups[0].trials[0]
            (hung,) = hanging.run_trial(TASKS).groups[0].trials[0]
    assert "exited with status 3" in crashed.error and "boom" in crashed.error
    assert "agw-" not in crashed.error  # the session key is never recorded
    assert crashed.num_turns == 1  # what it did before it crashed is kept
    assert "did not finish within 3 s" in hung.error
    assert crashed.final_reward == 0.0 and hung.final_reward == 0.0


def test_a_callable_program_gets_its_session_and_input() -> None:
    seen: list[ProgramRun] = []

    def program(run: ProgramRun) -> str:
        import openai

        seen.append(run)
        client = openai.OpenAI(base_url=run.base_url, api_key=run.api_key)
        answer = client.chat.completions.create(
            model=run.model, messages=[{"role": "user", "content": run.input}]
        )
        (run.workdir / "answer.txt").write_text(answer.choices[0].message.content)
        return answer.choices[0].message.content

    class FileEnv(HarnessEnv):
        def program(self, task_data: dict[str, Any]) -> Any:
            return program

        def prepare(self, task_data: dict[str, Any], workdir: Path) -> str:
            (workdir / "task.txt").write_text("task")
            return "say 42"

        def verify(
            self, task_data: dict[str, Any], workdir: Path, outcome: ProgramOutcome
        ) -> float:
            return 1.0 if (workdir / "answer.txt").read_text() == "42" else 0.0

    with _server(["42"]) as server:
        env = FileEnv(agentsgym.load_tokenizer(TOKENIZER), _config(server))
        with closing(env):
            batch = env.run_trial(TASKS)
    (episode,) = batch.groups[0].trials[0]
    assert episode.ok and episode.final_reward == 1.0
    assert seen[0].input == "say 42" and seen[0].base_url.endswith("/v1")


def test_a_local_model_agent_serves_the_programs_with_its_own_sampled_ids() -> None:
    """The tiny random model (agentsgym-trl) answers the program's calls in process: the
    prompt ids are the env template's rendering of the call, the completion its sample."""
    agent = agentsgym.make_agent("transformers", model="tiny", max_new_tokens=8, seed=0)
    with closing(agentsgym.make("gateway/OpenAIToolLoop-v0", tokenizer=agent.tokenizer)) as env:
        batch = env.run_trial(TASKS, agent, num_rollouts=2)
    for (episode,) in batch.groups[0].trials:
        assert episode.ok, episode.error
        assert episode.num_turns >= 1
        assert {s.token_source for s in episode.steps} == {"server"}
        assert episode.metrics["sampled_token_share"] == 1.0
        assert episode.has_logprobs
        assert {s.policy_version for s in episode.steps} == {agent.policy_version}


def test_a_pydantic_ai_agent_is_an_env() -> None:
    """pydantic-ai sends an assistant turn of tool calls with ``content: null``, which the
    bundled tiny template cannot render: the backend renders with the Qwen2.5 pack."""
    pytest.importorskip("pydantic_ai", reason="the program is a pydantic-ai agent")
    from tokenizer_packs import load_pack, pack_path

    load_pack("qwen2.5-1.5b-instruct")  # skips without the pack
    qwen = str(pack_path("qwen2.5-1.5b-instruct"))
    policy = ScriptedPolicy(_calculator("42"), tokenizer=qwen)
    with OpenAICompatServer(policy, models=[MODEL]) as server:
        env = agentsgym.make("gateway/PydanticAI-v0", tokenizer=qwen, env_config=_config(server))
        with closing(env):
            batch = env.run_trial(TASKS)
    (episode,) = batch.groups[0].trials[0]
    assert episode.ok, episode.error
    assert episode.final_reward == 1.0 and episode.num_turns == 2
    assert episode.metrics["sampled_token_share"] == 1.0
