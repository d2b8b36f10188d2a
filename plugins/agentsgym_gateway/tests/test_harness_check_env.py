"""``agentsgym check-env`` on harness envs: what matters for a program is checked, what
drives turn hooks is skipped with a reason, and a broken program is a failed check."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from agentsgym.testing import check_env, register_env, run_cli
from agentsgym_gateway.examples import OpenAIToolLoopEnv
from agentsgym_gateway.harness import HarnessEnv
from agentsgym_gateway.programs import CommandProgram, ProgramOutcome
from agentsgym_serve.model_server import OpenAICompatServer, ScriptedPolicy
from gateway_fixtures import MODEL, TOKENIZER

ADD_CALL = '<tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call>'
"""The scripted model's tool call; it answers with the tool's result (1 + 2, whatever the
task: the verifier then scores 0 unless a + b is 3)."""
HARNESS_CHECKS = [
    "programs end within episode_timeout_seconds and exit 0",
    "each program's calls reach the gateway and become one episode",
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
    assert [c.name for c in report.checks][-5:] == HARNESS_CHECKS
    assert {c.name for c in report.skipped} == SKIPPED
    assert all(c.detail for c in report.skipped)  # each says why
    fidelity = by_name["token streams keep the fidelity invariants"]
    assert fidelity.status == "ok" and "sampled token share 1" in fidelity.detail
    calls = by_name["each program's calls reach the gateway and become one episode"]
    assert calls.detail.startswith("8 calls in 4 episodes") and "server: 8" in calls.detail
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
    assert "ValueError: could not convert string to float" in failed[HARNESS_CHECKS[2]]
    # the crash and hang checks replace the program: they still pass
    assert HARNESS_CHECKS[3] not in failed and HARNESS_CHECKS[4] not in failed


def test_without_a_tokenizer_every_play_is_skipped_with_the_reason_never_failed() -> None:
    report = check_env("gateway/OpenAIToolLoop-v0", tokenizer=None)
    assert report.passed
    skipped = {c.name: c.detail for c in report.skipped}
    assert set(HARNESS_CHECKS) | SKIPPED <= set(skipped)
    assert "given no tokenizer" in skipped["step infos are JSON-serialisable"]
