"""The plugin author's CLI: --version, flags in help, completion, one tokenizer default,
config keys in list-envs, describe (new-env: agentsgym-scaffold's tests)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import typer
from typer.testing import CliRunner

from agentsgym import MultistepEnv
from agentsgym.cli import build_app
from agentsgym.cli.options import CLI_TOKENIZER_DEFAULT

runner = CliRunner()


def cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentsgym", *args],
        check=False,
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200", **env},
    )


def invoke(*args: str) -> str:
    result = runner.invoke(build_app(), list(args), env={"COLUMNS": "200"}, prog_name="agentsgym")
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


def commands() -> dict[str, typer.core.TyperCommand]:
    group = typer.main.get_command(build_app())
    return dict(group.commands)  # type: ignore[attr-defined]


# ------------------------------------------------------------------ --version
def test_version_names_agentsgym_and_every_installed_plugin() -> None:
    result = cli("--version")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"agentsgym {version('agentsgym')}"
    for dist, plugin in (
        ("agentsgym-twentyq", "twentyq"),
        ("agentsgym-classical", "classical"),
        ("agentsgym-serve", "serve"),
        ("agentsgym-trl", "trl"),
        ("agentsgym-ray", "ray"),
        ("agentsgym-atropos", "atropos"),
        ("agentsgym-viewer", "viewer"),
        ("agentsgym-scaffold", "scaffold"),
    ):
        assert f"{dist} {version(dist)} (plugin {plugin})" in lines


def test_version_reports_a_broken_plugin(tmp_path: Path) -> None:
    from agentsgym_scaffold import install_plugin

    install_plugin(
        tmp_path,
        "agentsgym-broken",
        "agentsgym_broken",
        "raise ImportError('no numpy')",
        version="2.5",
    )
    result = cli("--version", PYTHONPATH=str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert (
        "agentsgym-broken 2.5 (plugin agentsgym_broken): failed to load: ImportError: no numpy"
        in result.stdout
    )


# ------------------------------------------------------------------ help shows flags as flags
def test_boolean_flags_and_counters_show_no_value_type_in_any_help() -> None:
    outputs = {"": invoke("--help")}
    outputs.update({name: invoke(name, "--help") for name in commands()})
    for name, text in outputs.items():
        assert "<bool>" not in text, f"`agentsgym {name} --help` shows a flag as <bool>"
    top = outputs[""]
    assert re.search(r"--strict-plugins\s+re-raise", top), top
    assert re.search(r"--verbose\s+-v\s+more log", top), top
    assert re.search(r"--num-tasks\s+<int", outputs["rollout"])  # real values keep their type
    assert re.search(r"--json\s+print", outputs["list-envs"])


def test_flags_still_parse_as_flags() -> None:
    items = json.loads(invoke("list-envs", "--json", "--verbose"))
    assert any(item.get("config") for item in items)


# ------------------------------------------------------------------ shell completion
def test_completion_script_and_env_id_completion() -> None:
    script = cli("--show-completion", "bash", _TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION="1")
    assert script.returncode == 0, script.stderr
    assert "_AGENTSGYM_COMPLETE=complete_bash" in script.stdout
    assert "complete -o default -F _agentsgym_completion agentsgym" in script.stdout
    ids = cli(
        COMP_WORDS="agentsgym describe twentyq/Tw",
        COMP_CWORD="2",
        _AGENTSGYM_COMPLETE="complete_bash",
    )
    assert ids.stdout.split() == [
        "twentyq/TwentyQuestions-v0",
        "twentyq/TwentyQuestions-v0-duel",
        "twentyq/TwentyQuestions-v0-hardcore",
    ]
    names = cli(COMP_WORDS="agentsgym check", COMP_CWORD="1", _AGENTSGYM_COMPLETE="complete_bash")
    assert names.stdout.split() == ["check-env"]


def test_every_command_that_takes_an_env_id_completes_it() -> None:
    takers = sorted(
        name
        for name, command in commands().items()
        if any(p.name == "env_id" for p in command.params)
    )
    assert {"rollout", "eval", "train", "describe", "check-env", "atropos"} <= set(takers)
    for name in takers:
        ids = cli(
            COMP_WORDS=f"agentsgym {name} agentsgym/G",
            COMP_CWORD="2",
            _AGENTSGYM_COMPLETE="complete_bash",
        )
        assert ids.stdout.split() == ["agentsgym/GuessTheNumber-v0"], name


# ------------------------------------------------------------------ one tokenizer default
def test_every_command_that_plays_shares_the_tokenizer_default() -> None:
    assert CLI_TOKENIZER_DEFAULT == "agentsgym/tiny-chatml"
    for name in ("rollout", "eval", "check-env"):
        (param,) = [p for p in commands()[name].params if p.name == "tokenizer"]
        assert param.default == CLI_TOKENIZER_DEFAULT, name
        assert "default" in (param.help or "") and "'none'" in (param.help or ""), name


def test_eval_plays_with_the_bundled_tokenizer_by_default(tmp_path: Path, monkeypatch) -> None:
    from agentsgym import factory

    seen: list[object] = []
    real_make = factory.make

    def spying_make(env_id, tokenizer=None, env_config=None, **kwargs):
        seen.append(tokenizer)
        return real_make(env_id, tokenizer=tokenizer, env_config=env_config, **kwargs)

    import agentsgym.cli.running as running_module

    monkeypatch.setattr(running_module, "make", spying_make)
    invoke(
        "eval",
        "agentsgym/GuessTheNumber-v0",
        "--num-tasks",
        "1",
        "--out",
        str(tmp_path / "e.jsonl"),
    )
    assert seen == [CLI_TOKENIZER_DEFAULT]


# ------------------------------------------------------------------ config keys
def test_list_envs_json_verbose_shows_config_keys_from_the_config_class() -> None:
    items = {
        i["id"]: i for i in json.loads(invoke("list-envs", "--json", "--verbose")) if "id" in i
    }
    guess = {k["key"]: k for k in items["agentsgym/GuessTheNumber-v0"]["config"]}
    assert guess["low"] == {
        "key": "low",
        "type": "int",
        "default": 1,
        "required": False,
        "registered": False,
        "constraints": [">= -1000000000000", "<= 1000000000000"],
        "description": "smallest possible number",
    }
    assert guess["reward_strategy"]["type"] == "'spread' | 'last_token' | 'terminal'"
    assert guess["chat_template_kwargs"]["default"] == {}
    # a subclass that redefines a common key without a description keeps the base one
    assert guess["max_steps_per_episode"]["description"].startswith("agent actions after which")
    assert ">= 1" in guess["max_steps_per_episode"]["constraints"]
    hardcore = {k["key"]: k for k in items["twentyq/TwentyQuestions-v0-hardcore"]["config"]}
    assert hardcore["hardcore"]["default"] is True and hardcore["hardcore"]["registered"]
    # the hooks of the plugin that registers it: agentsgym-classical's
    assert items["agentsgym/GuessTheNumber-v0"]["hooks"] == ["register_agents", "register_envs"]
    plain = json.loads(invoke("list-envs", "--json"))
    assert all("config" not in item for item in plain)  # no env class imported without --verbose


def test_list_envs_verbose_table_shows_config_keys() -> None:
    text = invoke("list-envs", "--verbose")
    assert "agentsgym/GuessTheNumber-v0 env_config" in text
    assert "smallest possible number" in text and "largest possible number" in text


# ------------------------------------------------------------------ describe
def test_describe_prints_docs_config_datasets_and_agent() -> None:
    text = invoke("describe", "agentsgym/GuessTheNumber-v0")
    assert "Find a hidden integer with higher/lower hints." in text  # the class docstring
    assert "smallest possible number" in text
    assert re.search(r"train\s+│\s+200\s+│\s+\{\"seed\": 0\}", text), text
    assert re.search(r"eval\s+│\s+50", text)
    assert "default agent: agentsgym/bisect: plays GuessTheNumber by bisection" in text


def test_describe_json_marks_registered_defaults() -> None:
    item = json.loads(invoke("describe", "twentyq/TwentyQuestions-v0-hardcore", "--json"))
    assert item["registered_env_config"] == {"hardcore": True}
    assert item["default_agent"] == "twentyq/reference-questioner"
    assert item["datasets"]["eval"]["size"] > 0 and item["datasets"]["eval"]["sample_task"]
    assert {"initialize_episode", "format_prompt", "step_episode"} <= set(item["hooks"])
    assert item["docs"]


def test_describe_and_list_envs_verbose_show_the_tools_of_a_sample_task() -> None:
    from envs_for_tests import BrokenToolsCountdownEnv, CountdownEnv, PerTaskToolsCountdownEnv

    from agentsgym.testing import register_env

    with (
        register_env("test/ToolCount-v0", PerTaskToolsCountdownEnv),
        register_env("test/BrokenTools-v0", BrokenToolsCountdownEnv),
        register_env("test/Count-v0", CountdownEnv),
    ):
        item = json.loads(invoke("describe", "test/ToolCount-v0", "--json"))
        no_arguments = {"type": "object", "properties": {}}
        assert item["tools"] == [
            {"name": "peek", "description": "peek at the counter", "parameters": no_arguments},
            {"name": "poke", "description": "poke at the counter", "parameters": no_arguments},
        ]
        assert item["datasets"]["train"]["sample_task"] == {"start": 2, "tools": ["peek", "poke"]}
        assert "tools:\n  peek(): peek at the counter\n  poke(): poke at the counter\n" in invoke(
            "describe", "test/ToolCount-v0"
        )
        assert json.loads(invoke("describe", "test/Count-v0", "--json"))["tools"] == []
        assert "tools: none" in invoke("describe", "test/Count-v0")
        broken = json.loads(invoke("describe", "test/BrokenTools-v0", "--json"))["tools"]
        assert broken == {"error": "ConnectionError: the tool server is down"}
        text = invoke("describe", "test/BrokenTools-v0")
        assert "tools: not shown: ConnectionError: the tool server is down" in text
        listed = {
            i["id"]: i for i in json.loads(invoke("list-envs", "--json", "--verbose")) if "id" in i
        }
        assert [t["name"] for t in listed["test/ToolCount-v0"]["tools"]] == ["peek", "poke"]
        assert listed["test/Count-v0"]["tools"] == []
        assert listed["test/BrokenTools-v0"]["tools"] == broken
        table = invoke("list-envs", "--verbose")
        assert "tools:\n  peek(): peek at the counter\n  poke(): poke at the counter\n" in table


def test_describe_of_an_unknown_env_is_one_readable_error() -> None:
    result = cli("describe", "agentsgym/GuessNumber-v0")
    assert result.returncode == 2 and "Did you mean: agentsgym/GuessTheNumber-v0" in result.stderr
    assert "Traceback" not in result.stderr


def test_describe_of_an_env_whose_class_does_not_import_says_so() -> None:
    from agentsgym.registry import EnvSpec, get_registry

    # registered by a plugin, but its class's module is missing (the conftest resets it)
    get_registry().envs["broken/Broken-v0"] = EnvSpec(
        id="broken/Broken-v0", entry_point="agentsgym_no_such_module:Env", distribution="broken"
    )
    result = runner.invoke(build_app(), ["describe", "broken/Broken-v0"], env={"COLUMNS": "200"})
    assert result.exit_code == 1
    assert "does not import: ModuleNotFoundError" in result.output


class DocumentedCountdown(MultistepEnv):
    """Count down; see :class:`~agentsgym.env.MultistepEnv`, :func:`agentsgym.make` and
    the ``max_steps_per_episode`` key (:ref:`the guide <guide>`)."""


def test_describe_shows_sphinx_roles_as_plain_names_and_reflows_paragraphs() -> None:
    from agentsgym.testing import register_env

    with register_env("test/Documented-v0", DocumentedCountdown):
        text = invoke("describe", "test/Documented-v0")
    # one line: the paragraph's lines join, and the terminal wraps it at its own width
    assert "see MultistepEnv, agentsgym.make and the max_steps_per_episode key (the guide)" in text
    assert ":class:" not in text and "``" not in text
