"""trl-grpo builds its GRPOConfig from the fields the installed class has.

transformers 5.17 has ``gradient_checkpointing`` only; later releases renamed it to
``activation_checkpointing``. Passing the new name to the old class crashed
``agentsgym train --trainer trl-grpo`` with a TypeError before a single step.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

pytest.importorskip("torch")
trl = pytest.importorskip("trl")

import agentsgym
from agentsgym.errors import TrainerOptionError
from agentsgym.trainers import RolloutSource
from agentsgym_trl import TRLGRPOAdapter
from agentsgym_trl.grpo_config import config_field_names, installed_names

GUESS = "agentsgym/GuessTheNumber-v0"
NEW_NAMES = {"activation_checkpointing", "activation_checkpointing_kwargs"}


def _config_without_new_names() -> type:
    """A stand-in for GRPOConfig under transformers 5.17: the installed class's fields,
    less the names that later releases introduced."""
    fields = [
        (field.name, Any, dataclasses.field(default=None))
        for field in dataclasses.fields(trl.GRPOConfig)
        if field.init and field.name not in NEW_NAMES
    ]
    return dataclasses.make_dataclass("GRPOConfigOf517", fields)


@pytest.fixture(scope="module")
def adapter(tmp_path_factory: Any) -> TRLGRPOAdapter:
    return TRLGRPOAdapter("tiny", output_dir=tmp_path_factory.mktemp("grpo"))


@pytest.fixture(scope="module")
def source() -> RolloutSource:
    tokenizer = agentsgym.load_tokenizer("agentsgym/tiny-chatml")
    env = agentsgym.make(GUESS, tokenizer=tokenizer, env_config={"high": 3})
    rows = list(env.get_train_dataset(size=2))
    return RolloutSource(rows, tokenizer=tokenizer, num_rollouts=2, tasks_per_step=1)


def test_a_config_class_without_the_new_name_gets_the_old_one(
    adapter: TRLGRPOAdapter, source: RolloutSource, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(trl, "GRPOConfig", _config_without_new_names())
    config = adapter.grpo_args(source, max_steps=1)
    assert type(config).__name__ == "GRPOConfigOf517"
    assert config.gradient_checkpointing is False  # no CUDA here: the switch is off
    assert config.num_generations == 2


def test_the_installed_config_takes_every_field_the_adapter_sets(
    adapter: TRLGRPOAdapter, source: RolloutSource
) -> None:
    config = adapter.grpo_args(source, max_steps=3)
    assert isinstance(config, trl.GRPOConfig)
    assert (config.max_steps, config.per_device_train_batch_size) == (3, 2)


def test_a_user_field_under_either_name_goes_under_the_installed_name() -> None:
    old_only = {"gradient_checkpointing", "output_dir"}
    both = old_only | {"activation_checkpointing"}
    derived = {"output_dir": "x", "activation_checkpointing": False}
    given = {"gradient_checkpointing": True}
    fields = installed_names({**derived, **given}, old_only, given=set(given))
    assert fields == {"output_dir": "x", "gradient_checkpointing": True}
    fields = installed_names({**derived, **given}, both, given=set(given))
    assert fields == {"output_dir": "x", "activation_checkpointing": True}


def test_an_unknown_user_field_names_the_field_and_the_close_ones(
    adapter: TRLGRPOAdapter, source: RolloutSource
) -> None:
    adapter.grpo_overrides = {"num_iteration": 2}
    try:
        with pytest.raises(TrainerOptionError, match="num_iteration.*did you mean num_iterations"):
            adapter.grpo_args(source, max_steps=1)
    finally:
        adapter.grpo_overrides = {}


def test_a_derived_field_the_install_lacks_says_to_upgrade() -> None:
    accepted = config_field_names(_config_without_new_names()) - {"shuffle_dataset"}
    with pytest.raises(TrainerOptionError, match="pip install -U trl transformers"):
        installed_names({"shuffle_dataset": True}, accepted)
