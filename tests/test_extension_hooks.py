"""The extension hooks a third-party package uses beyond envs, agents and trainers:
``register_commands``, ``register_executors`` (and the flags an executor declares) and
``register_env_sources``; and what a user gets when a command, executor or URL scheme
that no loaded plugin provides is asked for: one line saying where such names come from,
with no plugin distribution named by the core."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import agentsgym
from agentsgym.errors import (
    RegistrationError,
    UnknownEnvError,
    UnknownExecutorError,
    UntrustedRemoteEnvError,
)
from agentsgym.registry import get_registry
from agentsgym.testing import run_cli
from agentsgym_scaffold import install_plugin
from fake_dists import GOOD_PLUGIN

GUESS = "agentsgym/GuessTheNumber-v0"

COMMAND_PLUGIN = '''
import typer
from agentsgym import hookimpl


@hookimpl
def register_commands(cli):
    @cli.command("hello")
    def hello(name: str = typer.Argument(..., help="who")) -> None:
        """Say hello."""
        print(f"hello {name}")
'''

BROKEN_COMMAND_PLUGIN = """
from agentsgym import hookimpl


@hookimpl
def register_commands(cli):
    raise RuntimeError("the commands of this plugin are broken")
"""

EXECUTOR_PLUGIN = '''
from agentsgym import hookimpl
from agentsgym.executors import LocalExecutor

SEEN = []


class RecordingExecutor(LocalExecutor):
    """Plays locally, and remembers each request (its keys and options)."""

    def __init__(self, tag="none"):
        self.tag = tag

    async def arun(self, request, *, on_episode=None, on_trial=None):
        SEEN.append((self.tag, sorted(request.keys)))
        return await super().arun(request, on_episode=on_episode, on_trial=on_trial)


@hookimpl
def register_executors(register):
    register("recording", "{module}:RecordingExecutor", description="local, recorded")
'''

FLAGGED_EXECUTOR_PLUGIN = EXECUTOR_PLUGIN.replace(
    'description="local, recorded")',
    'description="local, recorded", flags=[ExecutorFlag(flag="--rec-tag", option="tag", '
    'metavar="TAG", help="the tag to record")])',
).replace("from agentsgym import hookimpl", "from agentsgym import hookimpl\nfrom agentsgym.runtime import ExecutorFlag")

BAD_FLAG_PLUGIN = """
from agentsgym import hookimpl


@hookimpl
def register_executors(register):
    register("badflag", "agentsgym.executors:LocalExecutor", flags=[{"flag": "-x", "option": "x"}])
"""

SOURCE_PLUGIN = """
from agentsgym import hookimpl


def normalize(url):
    word = url.split("://", 1)[1]
    if not word.isalpha():
        raise ValueError(f"{url!r}: the word must be letters only")
    return "mem+echo://" + word.lower()


def build(url, *, tokenizer=None, env_config=None, plugins=()):
    from agentsgym_echo import EchoEnv

    env = EchoEnv(tokenizer=tokenizer, env_config=env_config, plugins=plugins)
    env.fixed_word = url.split("://", 1)[1]
    return env


@hookimpl
def register_env_sources(register):
    register("mem+echo", "{module}:build", description="an echo env in memory",
             normalize="{module}:normalize")
"""


# ------------------------------------------------------------------ register_commands
def test_a_plugin_adds_a_command(site: Path) -> None:
    install_plugin(site, "agentsgym-hello", "agentsgym_hello", COMMAND_PLUGIN)
    result = run_cli("hello", "world")
    assert result.code == 0 and result.stdout.strip() == "hello world", result.output
    assert "hello" in run_cli("--help").stdout


def test_a_plugin_whose_commands_break_is_reported_and_the_others_work(site: Path) -> None:
    install_plugin(site, "agentsgym-broken", "agentsgym_broken", BROKEN_COMMAND_PLUGIN)
    install_plugin(site, "agentsgym-hello", "agentsgym_hello", COMMAND_PLUGIN)
    assert run_cli("hello", "again").stdout.strip() == "hello again"
    listing = run_cli("list-envs")
    assert listing.code == 0 and GUESS in listing.stdout
    assert "the commands of this plugin are broken" in listing.output
    version = run_cli("--version")
    assert "agentsgym-broken 1.0 (plugin agentsgym_broken): failed to load" in version.stdout


def test_the_core_commands_register_through_the_same_hook() -> None:
    from agentsgym.builtin import plugin

    registered: list[str] = []

    class Recorder:
        def command(self, name: str, **kwargs: Any) -> Any:
            registered.append(name)
            return lambda function: function

    plugin.register_commands(cli=Recorder())
    assert {"rollout", "list-envs", "describe", "check-env"} <= set(registered)


@pytest.mark.parametrize(
    ("command", "plugin"),
    [
        ("train", "trl"),
        ("serve", "serve"),
        ("atropos", "atropos"),
        ("view", "viewer"),
        ("new-env", "scaffold"),
    ],
)
def test_a_command_no_plugin_provides_is_one_line_saying_where_commands_come_from(
    monkeypatch: pytest.MonkeyPatch, command: str, plugin: str
) -> None:
    monkeypatch.setenv("AGENTSGYM_BLOCK_PLUGINS", plugin)
    result = run_cli(command, "--help")
    assert result.code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    assert f"no command `agentsgym {command}` is installed" in lines[0]
    assert "README" in lines[0] and "agentsgym --version" in lines[0]
    assert f"AGENTSGYM_BLOCK_PLUGINS={plugin}" in lines[0]  # the setting that hid it


def test_a_typo_of_a_command_gets_the_closest_one() -> None:
    result = run_cli("rollotu")
    assert result.code == 2 and "(did you mean `agentsgym rollout`?)" in result.output


# ------------------------------------------------------------------ register_executors
def test_a_plugin_adds_an_executor(site: Path) -> None:
    install_plugin(site, "agentsgym-recexec", "agentsgym_recexec", EXECUTOR_PLUGIN)
    batch = agentsgym.runtime.run_dataset(
        [{"env_class_path": GUESS, "task_data": {"seed": s}} for s in range(2)],
        "agentsgym/bisect",
        2,
        executor="recording",
        executor_options={"tag": "py"},
    )
    import agentsgym_recexec

    assert agentsgym_recexec.SEEN == [("py", [(0, 0), (0, 1), (1, 0), (1, 1)])]
    assert batch.final_rewards == [1.0] * 4
    assert get_registry().executor("recording").distribution == "agentsgym-recexec"


def test_run_dataset_passes_num_workers_only_to_executors_that_take_it() -> None:
    """``num_workers`` of run_dataset is for parallel executors; the local one ignores it
    (scripts sweep settings with one call), but refuses it as an explicit option."""
    rows = [{"env_class_path": GUESS, "task_data": {"seed": 1}}]
    batch = agentsgym.runtime.run_dataset(rows, "agentsgym/bisect", 1, num_workers=2)
    assert batch.final_rewards == [1.0]
    with pytest.raises(agentsgym.errors.RunSettingsError, match="has no option 'num_workers'"):
        agentsgym.runtime.run_dataset(rows, "agentsgym/bisect", executor_options={"num_workers": 2})


def test_the_cli_plays_on_a_plugins_executor_with_its_options(site: Path, tmp_path: Path) -> None:
    install_plugin(site, "agentsgym-recexec", "agentsgym_recexec", EXECUTOR_PLUGIN)
    out = tmp_path / "r.jsonl"
    args = ("rollout", GUESS, "--num-tasks", "2", "--num-rollouts", "1", "--out", str(out))
    result = run_cli(*args, "--executor", "recording", "--executor-option", "tag=cli")
    assert result.code == 0, result.output
    import agentsgym_recexec

    assert agentsgym_recexec.SEEN == [("cli", [(0, 0), (1, 0)])]
    assert len(out.read_text().splitlines()) == 2
    bad = run_cli(*args, "--overwrite", "--executor", "recording", "--executor-option", "tga=x")
    assert bad.code == 2 and "has no option 'tga' (did you mean 'tag'?)" in bad.output


def test_executor_errors_are_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    out = str(tmp_path / "x.jsonl")
    stray = run_cli("rollout", GUESS, "--num-workers", "3", "--out", out)
    assert stray.code == 2 and "executor 'local' has no option 'num_workers'" in stray.output
    unknown = run_cli("rollout", GUESS, "--executor", "dask", "--out", out)
    assert unknown.code == 2 and "no executor registered with name 'dask'" in unknown.output
    monkeypatch.setenv("AGENTSGYM_BLOCK_PLUGINS", "ray")
    from agentsgym.registry import reset_registry

    reset_registry()
    missing = run_cli("rollout", GUESS, "--executor", "ray", "--out", out)
    assert missing.code == 2 and "Executors come from plugin distributions" in missing.output
    assert "AGENTSGYM_BLOCK_PLUGINS=ray" in missing.output
    assert "Traceback" not in missing.output and not Path(out).exists()
    with pytest.raises(UnknownExecutorError, match="README"):
        agentsgym.runtime.run_dataset(
            [{"env_class_path": GUESS, "task_data": {}}], "scripted", executor="ray"
        )


def test_an_executor_brings_its_own_flags_to_the_commands(site: Path, tmp_path: Path) -> None:
    install_plugin(site, "agentsgym-recexec", "agentsgym_recexec", FLAGGED_EXECUTOR_PLUGIN)
    assert "--rec-tag" in run_cli("rollout", "--help", width=200).stdout
    out = tmp_path / "r.jsonl"
    args = ("rollout", GUESS, "--num-tasks", "1", "--num-rollouts", "1", "--out", str(out))
    result = run_cli(*args, "--executor", "recording", "--rec-tag", "flagged")
    assert result.code == 0, result.output
    import agentsgym_recexec

    assert agentsgym_recexec.SEEN == [("flagged", [(0, 0)])]
    stray = run_cli(*args, "--overwrite", "--rec-tag", "x")
    assert stray.code == 2, stray.output
    assert "--rec-tag is a flag of the executor 'recording'" in stray.output
    assert "add --executor recording" in stray.output


def test_a_malformed_executor_flag_is_a_registration_error(site: Path) -> None:
    install_plugin(site, "agentsgym-badflag", "agentsgym_badflag", BAD_FLAG_PLUGIN)
    with pytest.raises(RegistrationError, match="agentsgym-badflag registers the executor"):
        get_registry()


# ------------------------------------------------------------------ register_env_sources
def test_a_plugin_adds_a_kind_of_env_source(site: Path) -> None:
    install_plugin(site, "agentsgym-echo", "agentsgym_echo", GOOD_PLUGIN)
    install_plugin(site, "agentsgym-memecho", "agentsgym_memecho", SOURCE_PLUGIN)
    env = agentsgym.make("MEM+ECHO://Zeta")
    # the source builds from the canonical URL, which is also the env id
    assert env.fixed_word == "zeta" and env.env_id == "mem+echo://zeta"
    batch = env.run_trial([{"word": "zeta"}], agentsgym.make_agent("echo/echo"))
    assert batch.final_rewards == [1.0]
    with pytest.raises(UnknownEnvError, match="the word must be letters only"):
        agentsgym.make("mem+echo://zeta9")
    row = {"env_class_path": "mem+echo://zeta", "task_data": {"word": "zeta"}}
    with pytest.raises(UntrustedRemoteEnvError):
        agentsgym.runtime.run_dataset([row], "echo/echo")
    allowed = agentsgym.runtime.run_dataset([row], "echo/echo", allow_remote=["mem+echo://zeta"])
    assert allowed.final_rewards == [1.0]


def test_two_plugins_claiming_one_scheme_is_an_error_naming_both(site: Path) -> None:
    install_plugin(site, "agentsgym-memecho", "agentsgym_memecho", SOURCE_PLUGIN)
    install_plugin(site, "agentsgym-memecho2", "agentsgym_memecho2", SOURCE_PLUGIN)
    with pytest.raises(RegistrationError, match="agentsgym-memecho.*agentsgym-memecho2"):
        get_registry()


def test_a_url_whose_source_is_not_installed_says_where_sources_come_from(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AGENTSGYM_BLOCK_PLUGINS", "serve")
    with pytest.raises(UnknownEnvError, match="Env sources come from plugin distributions"):
        agentsgym.make("http://127.0.0.1:9")
    with pytest.raises(UnknownEnvError, match="no installed plugin plays ftp:// env URLs"):
        agentsgym.make("ftp://example.com/env")


@pytest.mark.parametrize(("kind", "name"), [("agent", "transformers"), ("trainer", "trl-grpo")])
def test_an_agent_or_trainer_no_plugin_provides_says_where_they_come_from(
    monkeypatch: pytest.MonkeyPatch, kind: str, name: str
) -> None:
    monkeypatch.setenv("AGENTSGYM_BLOCK_PLUGINS", "trl")
    build = agentsgym.make_agent if kind == "agent" else agentsgym.runtime.make_trainer
    with pytest.raises(agentsgym.errors.AgentsGymError) as raised:
        build(name)
    message = str(raised.value)
    assert f"{kind.capitalize()}s come from plugin distributions" in message
    assert "AGENTSGYM_BLOCK_PLUGINS=trl" in message and "\n" not in message
    assert "agentsgym-trl" not in message  # the core names no plugin
