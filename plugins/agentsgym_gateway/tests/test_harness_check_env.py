"""``agentsgym check-env`` on harness envs: what matters for a program is checked, what
drives turn hooks is skipped with a reason, and a broken program is a failed check."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import openai

from agentsgym import AgentAction, load_tokenizer
from agentsgym.runtime import ChatTokenizer
from agentsgym.testing import check_env, register_env, run_cli
from agentsgym_gateway.examples import OpenAIToolLoopEnv
from agentsgym_gateway.harness import HarnessEnv
from agentsgym_gateway.programs import CommandProgram, ProgramOutcome, ProgramRun
from agentsgym_serve.model_server import OpenAICompatServer, ScriptedPolicy
from gateway_fixtures import MODEL, TOKENIZER

ADD_CALL = '<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n</tool_call>'
"""The scripted model's tool call, written as the tiny template writes a call back (as a
model trained on its template does); it answers with the tool's result (1 + 2, whatever
the task: the verifier then scores 0 unless a + b is 3)."""
HARNESS_CHECKS = [
    "programs end within episode_timeout_seconds and exit 0",
    "each program's calls reach the gateway and become one episode",
    "rows per rollout are at most 1.25",
    "the verifier returns a finite reward",
    "a crashing program fails its episode with its exit status and stderr, not the run",
    "a program past episode_timeout_seconds is stopped and fails its episode",
]
SKIPPED = {
    "episodes play without a tokenizer",
    "tools are declared and bad calls answered as tool messages",
    "finish_episode runs once per episode",
    "episodes cut at max_steps_per_episode are truncated",
    "episodes are deterministic for the same task_data, also concurrently",
    "an env with run_hooks_inline never waits in its hooks",
}


def test_check_env_runs_the_programs_through_an_openai_agents_server() -> None:
    policy = ScriptedPolicy(
        lambda messages: (
            f"The sum is {messages[-1]['content']}." if messages[-1]["role"] == "tool" else ADD_CALL
        ),
        tokenizer=TOKENIZER,
    )
    with OpenAICompatServer(policy, models=[MODEL]) as server:
        report = check_env(
            "gateway/OpenAIToolLoop-v0",
            agent="openai",
            agent_options={"base_url": server.base_url, "model": MODEL},
            env_config={"tool_parser": "hermes"},
            tokenizer=TOKENIZER,
        )
    assert report.passed
    by_name = {c.name: c for c in report.checks}
    assert [c.name for c in report.checks][-6:] == HARNESS_CHECKS
    assert {c.name for c in report.skipped} == SKIPPED
    assert all(c.detail for c in report.skipped)  # each says why
    fidelity = by_name["token streams keep the fidelity invariants"]
    assert fidelity.status == "ok" and "sampled token share 1" in fidelity.detail
    calls = by_name["each program's calls reach the gateway and become one episode"]
    assert calls.detail.startswith("8 calls in 4 episodes") and "server: 8" in calls.detail
    assert by_name[HARNESS_CHECKS[2]].detail == "1.00 rows per rollout (4 episodes)"
    assert by_name["the verifier returns a finite reward"].detail.startswith("rewards ")
    assert by_name["step infos are JSON-serialisable"].status == "ok"


class CrashingProgramEnv(HarnessEnv):
    """Its program crashes before it calls the model."""

    def program(self, task_data: dict[str, Any]) -> CommandProgram:
        code = "import sys; print('no model for me', file=sys.stderr); sys.exit(5)"
        return CommandProgram((sys.executable, "-c", code))

    def verify(self, task_data: dict[str, Any], workdir: Path, outcome: ProgramOutcome) -> float:
        return 1.0

    def get_train_dataset(self) -> Any:
        return self.make_dataset([{"seed": 1}, {"seed": 2}])


def test_a_program_that_crashes_fails_check_env_and_says_how_from_the_cli() -> None:
    with register_env("test/CrashingProgram-v0", CrashingProgramEnv):
        result = run_cli("check-env", "test/CrashingProgram-v0", "--tokenizer", TOKENIZER)
    assert result.code == 1, result.output
    lines = {line.split(":")[0]: line for line in result.stdout.splitlines()}
    program_line = lines["FAIL programs end within episode_timeout_seconds and exit 0"]
    assert "exited with status 5" in program_line and "no model for me" in program_line
    # the harness's own machinery still holds: a crash or a hang fails only its episode
    assert any(line.startswith("ok   a crashing program fails") for line in lines)
    assert any(line.startswith("ok   a program past episode_timeout") for line in lines)
    assert any(line.startswith("skip finish_episode runs once") for line in lines)


class UnscoredEnv(OpenAIToolLoopEnv):
    """The example's program, and a verifier that cannot read its output."""

    def verify(self, task_data: dict[str, Any], workdir: Path, outcome: ProgramOutcome) -> float:
        return float(outcome.stdout)  # "I am not sure." is no number


def test_a_verifier_that_raises_fails_its_check_with_the_error() -> None:
    with register_env("test/Unscored-v0", UnscoredEnv):
        report = check_env("test/Unscored-v0", tokenizer=TOKENIZER, raise_on_failure=False)
    failed = {c.name: c.detail for c in report.failures}
    assert "ValueError: could not convert string to float" in failed[HARNESS_CHECKS[3]]
    # the crash and hang checks replace the program: they still pass
    assert HARNESS_CHECKS[4] not in failed and HARNESS_CHECKS[5] not in failed


def test_without_a_tokenizer_every_play_is_skipped_with_the_reason_never_failed() -> None:
    report = check_env("gateway/OpenAIToolLoop-v0", tokenizer=None)
    assert report.passed
    skipped = {c.name: c.detail for c in report.skipped}
    assert set(HARNESS_CHECKS) | SKIPPED <= set(skipped)
    assert "given no tokenizer" in skipped["step infos are JSON-serialisable"]


class ToolCallingModel:
    """The run's own model (token-in, as agentsgym-trl's transformers agent is): it calls
    ``add`` as the tiny template writes a call, then answers with the tool's result; its
    ids are its text's, then the end-of-turn token."""

    wants_prompt_token_ids = True

    def __init__(self) -> None:
        self.chat = ChatTokenizer(load_tokenizer(TOKENIZER))

    def get_action(
        self, messages: Any, state: Any, prompt_token_ids: list[int]
    ) -> tuple[AgentAction, Any]:
        last = messages[-1]
        text = f"The sum is {last['content']}." if last["role"] == "tool" else ADD_CALL
        ids = self.chat.encode_model_text(text) + list(self.chat.eot_ids)
        action = AgentAction(text, ids, [0.0] * len(ids), prompt_token_ids=prompt_token_ids)
        return action, state


def test_a_tool_loop_answered_by_the_runs_own_model_is_one_row_per_rollout() -> None:
    """The agent backend renders the program's tool call as vLLM does (its arguments an
    object, as the model sampled them), so the call after a tool turn extends the row."""
    report = check_env(
        "gateway/OpenAIToolLoop-v0",
        agent=ToolCallingModel(),
        env_config={"tool_parser": "hermes"},
        tokenizer=TOKENIZER,
    )
    by_name = {c.name: c for c in report.checks}
    assert by_name[HARNESS_CHECKS[1]].detail.startswith("8 calls in 4 episodes")
    assert by_name[HARNESS_CHECKS[2]].detail == "1.00 rows per rollout (4 episodes)"


class ForgetfulEnv(OpenAIToolLoopEnv):
    """A program that asks twice, each time a fresh conversation (it drops its history)."""

    def program(self, task_data: dict[str, Any]) -> Any:
        def run(run: ProgramRun) -> str:
            client = openai.OpenAI(base_url=run.base_url, api_key=run.api_key)
            for question in ("first?", "second?"):
                messages = [{"role": "user", "content": question}]
                answer = client.chat.completions.create(model=run.model, messages=messages)
            return str(answer.choices[0].message.content)

        return run


def test_a_program_that_drops_its_history_misses_the_rows_goal_and_is_told_why() -> None:
    with register_env("test/Forgetful-v0", ForgetfulEnv):
        report = check_env("test/Forgetful-v0", tokenizer=TOKENIZER, raise_on_failure=False)
    failed = {c.name: c.detail for c in report.failures}
    detail = failed[HARNESS_CHECKS[2]]
    assert detail.startswith("2.00 rows per rollout, above the goal of 1.25: 4 calls")
    assert "episode 0 call 1" in detail and "rewrote or dropped its history" in detail
