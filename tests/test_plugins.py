"""Plugin discovery: entry points, fault isolation, load controls, clashes, laziness;
and the register hooks called through pluggy (plugin objects, ordering, wrappers)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import agentsgym
from agentsgym.errors import PluginLoadError, RegistrationError
from agentsgym.plugins import LoadSettings, load_plugins
from agentsgym.registry import get_registry
from agentsgym_scaffold import install_plugin
from fake_dists import GOOD_PLUGIN


def test_import_loads_no_plugin() -> None:
    code = (
        "import sys, agentsgym; print(sorted(m for m in sys.modules if m.startswith('agentsgym')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = out.stdout.strip()
    assert "agentsgym.registry" not in loaded and "agentsgym.plugins" not in loaded
    assert "agentsgym.builtin" not in loaded


def test_third_party_env_is_discovered_through_its_entry_point(site: Path) -> None:
    install_plugin(site, "agentsgym-echo", "agentsgym_echo", GOOD_PLUGIN, entry_point="echo")
    spec = get_registry().resolve("echo/Echo-v0")
    assert (spec.distribution, spec.version, spec.plugin) == ("agentsgym-echo", "1.0", "echo")
    env = agentsgym.make("echo/Echo-v0")
    batch = env.run_trial([{"word": "zeta"}], agentsgym.make_agent("echo/echo"))
    assert batch.final_rewards == [1.0]
    trainer = agentsgym.runtime.make_trainer("echo/recording", learning_rate=0.1)
    assert trainer.options == {"learning_rate": 0.1}
    assert get_registry().trainers["echo/recording"].distribution == "agentsgym-echo"


def test_broken_plugin_is_recorded_and_others_keep_working(site: Path) -> None:
    install_plugin(site, "agentsgym-echo", "agentsgym_echo", GOOD_PLUGIN, entry_point="echo")
    install_plugin(site, "agentsgym-broken", "agentsgym_broken", "import no_such_module_x\n")
    registry = get_registry()
    broken = [p for p in registry.host.plugins if p.name == "agentsgym_broken"]
    assert [(p.distribution, p.ok) for p in broken] == [("agentsgym-broken", False)]
    assert "no_such_module_x" in broken[0].error
    assert "echo/Echo-v0" in registry.envs and "agentsgym/GuessTheNumber-v0" in registry.envs


def test_plugin_whose_register_hook_raises_is_recorded(site: Path) -> None:
    source = "from agentsgym import hookimpl\n@hookimpl\ndef register_envs(register):\n    raise ValueError('bad data file')\n"
    install_plugin(site, "agentsgym-raises", "agentsgym_raises", source)
    registry = get_registry()
    failed = {p.name: p.error for p in registry.host.plugins if not p.ok}
    assert failed["agentsgym_raises"] == "ValueError: bad data file"


def test_strict_mode_reraises_with_the_plugin_and_distribution(site: Path) -> None:
    install_plugin(site, "agentsgym-broken", "agentsgym_broken", "raise ImportError('nope')\n")
    with pytest.raises(PluginLoadError, match="agentsgym_broken.*agentsgym-broken.*nope"):
        load_plugins(LoadSettings(strict=True))


def test_load_controls_allowlist_blocklist_and_no_autoload(site: Path) -> None:
    install_plugin(site, "agentsgym-echo", "agentsgym_echo", GOOD_PLUGIN, entry_point="echo")
    install_plugin(site, "agentsgym-broken", "agentsgym_broken", "raise ImportError('x')\n")

    def names(settings: LoadSettings) -> set[str]:
        return {p.name for p in load_plugins(settings).plugins}

    assert {"echo", "agentsgym_broken"} <= names(LoadSettings())
    assert names(LoadSettings(allowlist=frozenset({"echo"}))) == {"agentsgym.builtin", "echo"}
    assert "echo" not in names(LoadSettings(blocklist=frozenset({"agentsgym-echo"})))
    assert names(LoadSettings(autoload=False)) == {"agentsgym.builtin"}
    env = {"AGENTSGYM_BLOCK_PLUGINS": "agentsgym_broken, echo", "AGENTSGYM_STRICT_PLUGINS": "1"}
    settings = LoadSettings.from_environ(env)
    assert settings.blocklist == {"agentsgym_broken", "echo"} and settings.strict


def test_id_clash_names_both_distributions(site: Path) -> None:
    install_plugin(site, "agentsgym-echo", "agentsgym_echo", GOOD_PLUGIN, entry_point="echo")
    clash = GOOD_PLUGIN.replace("echo/echo", "echo2/echo")
    install_plugin(
        site, "agentsgym-echo-fork", "agentsgym_echo_fork", clash, entry_point="echofork"
    )
    with pytest.raises(RegistrationError, match="agentsgym-echo.*agentsgym-echo-fork"):
        get_registry()


def test_cli_lists_third_party_and_broken_plugins(site: Path) -> None:
    install_plugin(site, "agentsgym-echo", "agentsgym_echo", GOOD_PLUGIN, entry_point="echo")
    install_plugin(site, "agentsgym-broken", "agentsgym_broken", "raise ImportError('nope')\n")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
    }
    cli = [sys.executable, "-m", "agentsgym", "list-envs", "--json", "--verbose"]
    out = subprocess.run(cli, capture_output=True, text=True, env=env, check=True)
    items = json.loads(out.stdout)
    echo = next(i for i in items if i.get("id") == "echo/Echo-v0")
    assert echo["distribution"] == "agentsgym-echo" and echo["version"] == "1.0"
    assert echo["entry_point"] == "agentsgym_echo:EchoEnv" and echo["description"] == "say the word"
    assert echo["hooks"] == ["register_agents", "register_envs", "register_trainers"]
    broken = next(i for i in items if i.get("plugin") == "agentsgym_broken")
    assert broken["distribution"] == "agentsgym-broken" and "nope" in broken["error"]
    strict = subprocess.run(
        [sys.executable, "-m", "agentsgym", "--strict-plugins", "list-envs"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert strict.returncode == 2 and "agentsgym-broken" in strict.stderr


def test_pytest_plugin_provides_the_bundled_tokenizer(agentsgym_tokenizer) -> None:
    assert (
        agentsgym_tokenizer.apply_chat_template(
            [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True
        )
        == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    )


def test_every_test_runs_in_its_own_tmp_path(tmp_path: Path) -> None:
    """agentsgym_tmp_cwd, named in every [tool.pytest.ini_options] of the workspace: a
    command run with its default output (rollouts.parquet) writes into tmp_path."""
    assert Path.cwd() == tmp_path


HYPOTHESIS_PACKAGE_TEST = """
from hypothesis import given, settings, strategies as st


@settings(max_examples=5, database=None)
@given(st.text())
def test_text(text):
    assert isinstance(text, str)
"""


def test_hypothesis_writes_into_the_tests_tmp_path_not_the_folder_pytest_ran_in(
    tmp_path: Path,
) -> None:
    """hypothesis fixes its folder to the working directory it is imported in (at
    collection: where pytest ran) and fills caches there while tests run, even with
    ``database=None``; under agentsgym_tmp_cwd they go into the test's own tmp_path."""
    pytest.importorskip("hypothesis")
    package = tmp_path / "package"
    package.mkdir()
    (package / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\nusefixtures = ["agentsgym_tmp_cwd"]\n', encoding="utf-8"
    )
    (package / "test_text.py").write_text(HYPOTHESIS_PACKAGE_TEST, encoding="utf-8")
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--basetemp", "runs"],
        cwd=package,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert (package / "runs" / "test_text0" / ".hypothesis").is_dir()
    # hypothesis's own pytest plugin caches the tests' constants while collecting,
    # before any fixture: that one folder is hypothesis's, in the folder pytest ran in
    beside = package / ".hypothesis"
    assert not beside.exists() or {p.name for p in beside.iterdir()} <= {".gitignore", "constants"}


OBJECT_PLUGIN = '''
from agentsgym import hookimpl


class EchoPlugin:
    """A plugin that is an object, not a module: its env comes from an attribute."""

    def __init__(self, env_id):
        self.env_id = env_id

    @hookimpl
    def register_envs(self, register):
        register(self.env_id, "agentsgym_echo:EchoEnv", description="from an object")


PLUGIN = EchoPlugin("obj/Echo-v0")
'''

ORDERED_PLUGIN = """
import builtins
from agentsgym import hookimpl


@hookimpl{marker}
def register_envs(register):
    builtins.agentsgym_test_calls.append("{module}")
"""

WRAPPER_PLUGIN = """
import builtins
from agentsgym import hookimpl


@hookimpl(wrapper=True)
def register_envs(register):
    builtins.agentsgym_test_calls.append("wrapped")
    try:
        return (yield)
    except ValueError as exc:  # the wrapped plugin's failure, seen and forgiven
        builtins.agentsgym_test_calls.append(f"forgave {exc}")
        return []
"""


def test_a_plugin_object_registers_through_its_methods(site: Path) -> None:
    install_plugin(site, "agentsgym-echo", "agentsgym_echo", GOOD_PLUGIN)
    install_plugin(
        site, "agentsgym-obj", "agentsgym_obj", OBJECT_PLUGIN, target="agentsgym_obj:PLUGIN"
    )
    spec = get_registry().resolve("obj/Echo-v0")
    assert (spec.distribution, spec.plugin, spec.description) == (
        "agentsgym-obj",
        "agentsgym_obj",
        "from an object",
    )
    batch = agentsgym.make("obj/Echo-v0").run_trial(
        [{"word": "zeta"}], agentsgym.make_agent("echo/echo")
    )
    assert batch.final_rewards == [1.0]


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What the ordering and wrapper plugins record, in call order."""
    import builtins

    recorded: list[str] = []
    monkeypatch.setattr(builtins, "agentsgym_test_calls", recorded, raising=False)
    return recorded


@pytest.mark.parametrize(
    ("marker", "expected"),
    [("", ["z_last", "a_first"]), ("(tryfirst=True)", ["a_first", "z_last"])],
)
def test_register_hooks_follow_pluggys_order(
    site: Path, calls: list[str], marker: str, expected: list[str]
) -> None:
    """Plugins load by entry-point name; pluggy calls the last loaded first, unless an
    implementation asks for ``tryfirst``."""
    install_plugin(site, "agentsgym-a", "a_first", ORDERED_PLUGIN.replace("{marker}", marker))
    install_plugin(site, "agentsgym-z", "z_last", ORDERED_PLUGIN.replace("{marker}", ""))
    get_registry()
    assert calls == expected


def test_a_wrapper_wraps_each_plugins_registration(site: Path, calls: list[str]) -> None:
    raising = "from agentsgym import hookimpl\n@hookimpl\ndef register_envs(register):\n    raise ValueError('bad data')\n"
    install_plugin(site, "agentsgym-raises", "agentsgym_raises", raising)
    install_plugin(site, "agentsgym-wrapper", "agentsgym_wrapper", WRAPPER_PLUGIN)
    registry = get_registry()
    registering = [p for p in registry.host.plugins if "register_envs" in p.hooks]
    assert calls.count("wrapped") == len(registering) - 1  # every plugin but the wrapper
    assert "forgave bad data" in calls
    assert all(p.ok for p in registry.host.plugins), [p.error for p in registry.host.plugins]
    assert "agentsgym/GuessTheNumber-v0" in registry.envs
