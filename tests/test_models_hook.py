"""``register_models``: a plugin names a model, and every option that takes a tokenizer
(``load_tokenizer``, ``--tokenizer``) accepts the name, resolved to the plugin's folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import agentsgym
from agentsgym.errors import UnknownModelError
from agentsgym.registry import get_registry, model_folder
from agentsgym.testing import run_cli
from agentsgym_scaffold import install_plugin

MODEL_PLUGIN = """
from importlib import resources

from agentsgym import hookimpl

CALLS = []


def mini_folder():
    CALLS.append(1)
    return str(resources.files("agentsgym") / "assets" / "tiny-chatml")


@hookimpl
def register_models(register):
    register("mini", "{module}:mini_folder", description="the bundled tokenizer, by name")
"""


def test_a_plugin_names_a_model_that_load_tokenizer_resolves(site: Path) -> None:
    install_plugin(site, "agentsgym-minimodel", "agentsgym_minimodel", MODEL_PLUGIN)
    tokenizer = agentsgym.load_tokenizer("mini")
    bundled = agentsgym.load_tokenizer(agentsgym.DEFAULT_TOKENIZER)
    assert tokenizer.get_vocab() == bundled.get_vocab()
    assert str(model_folder("mini")).endswith("tiny-chatml")
    assert model_folder("not-a-model") is None
    spec = get_registry().component("model", "mini")
    assert spec.distribution == "agentsgym-minimodel"


def test_an_unknown_model_name_is_an_error_naming_the_closest(site: Path) -> None:
    install_plugin(site, "agentsgym-minimodel", "agentsgym_minimodel", MODEL_PLUGIN)
    with pytest.raises(UnknownModelError, match=r"Did you mean: mini\?.*list-models"):
        get_registry().component("model", "minii")


def test_the_cli_takes_the_name_as_tokenizer_and_lists_it(site: Path, tmp_path: Path) -> None:
    install_plugin(site, "agentsgym-minimodel", "agentsgym_minimodel", MODEL_PLUGIN)
    out = tmp_path / "r.jsonl"
    result = run_cli(
        "rollout",
        "agentsgym/GuessTheNumber-v0",
        "--num-tasks",
        "1",
        "--num-rollouts",
        "1",
        "--tokenizer",
        "mini",
        "--out",
        str(out),
    )
    assert result.code == 0, result.output
    row = json.loads(out.read_text().splitlines()[0])
    assert row["full_token_ids"] and sum(row["agent_token_mask"]) > 0
    listed = run_cli("list-models", "--json")
    assert listed.code == 0, listed.output
    names = {m["name"]: m for m in json.loads(listed.output)}
    assert names["mini"]["distribution"] == "agentsgym-minimodel"
