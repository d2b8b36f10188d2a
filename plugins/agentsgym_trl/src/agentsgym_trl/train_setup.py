"""What ``agentsgym train`` builds before the first step: the tasks, the trainer, the
run's record and who plays."""

from __future__ import annotations

import inspect
from typing import Any

import typer

from agentsgym import DEFAULT_TOKENIZER, get_registry, is_secret, make, redact
from agentsgym.cli import OPERATIONAL_AGENT_OPTIONS, RUN_LIMIT_ENV_KEYS, build_agent

DEFAULT_MAX_NEW_TOKENS = 256
TINY_MAX_NEW_TOKENS = 16
"""The tiny random model never ends its turn: every reply runs to the limit, on every
turn of every episode (at 256, a tool env's first step is tens of thousands of tokens)."""


def default_max_new_tokens(model: str | None) -> int:
    """``--max-new-tokens`` when it is not given."""
    from agentsgym_trl.tiny_model import TINY_MODEL

    return TINY_MAX_NEW_TOKENS if model == TINY_MODEL else DEFAULT_MAX_NEW_TOKENS


def default_tokenizer(model: str | None) -> str:
    """The tokenizer of ``--model`` when ``--tokenizer`` is not given."""
    from agentsgym_trl.tiny_model import TINY_MODEL

    if model is None or model == TINY_MODEL:
        return DEFAULT_TOKENIZER
    return model


def task_rows(
    env_id: str, tokenizer: Any, env_config: dict[str, Any], split: str, num_tasks: int
) -> tuple[Any, list[Any]]:
    """The env, and the first ``num_tasks`` rows of its ``split`` (train or eval)."""
    env = make(env_id, tokenizer=tokenizer, env_config=env_config)
    dataset = env.get_train_dataset() if split == "train" else env.get_eval_dataset()
    rows = [dataset[i] for i in range(min(num_tasks, len(dataset)))]
    if not rows:
        raise typer.BadParameter(f"the {split} split of {env_id} has no tasks")
    return env, rows


def factory_parameters(name: str) -> tuple[set[str], bool]:
    """The named keyword parameters of a trainer factory, and whether it takes ``**kw``."""
    factory = get_registry().trainer(name).load()
    try:
        parameters = list(inspect.signature(factory).parameters.values())
    except (TypeError, ValueError):
        return set(), True
    names = {p.name for p in parameters if p.kind is not inspect.Parameter.VAR_KEYWORD}
    return names, any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


def trainer_options(
    trainer: str,
    command_options: dict[str, Any],
    model_options: dict[str, Any],
    trainer_option_values: dict[str, Any],
) -> tuple[dict[str, Any], bool]:
    """The keywords of the trainer factory, and whether it trains a model.

    The command's own options go to the factory when it takes them (``model_options``
    only to a factory that takes a ``model``); ``--trainer-option`` values always do
    (an unknown one is the factory's error to report).
    """
    accepted, takes_any = factory_parameters(trainer)
    takes_model = "model" in accepted
    options = dict(command_options)
    if takes_model:
        if model_options.get("model") is None:
            raise typer.BadParameter(
                f"--trainer {trainer} trains a model: give --model PATH (or 'tiny')"
            )
        options.update({k: v for k, v in model_options.items() if v is not None})
    if not takes_any:
        options = {k: v for k, v in options.items() if k in accepted}
    options.update(trainer_option_values)
    return options, takes_model


def run_arguments(
    arguments: dict[str, Any],
    agent_options: dict[str, Any],
    env_config: dict[str, Any],
    trainer_option_values: dict[str, Any],
) -> dict[str, Any]:
    """The run's record, kept in every checkpoint and compared by ``--resume``.

    Secrets at any depth are redacted (a JSON option's api_key, a URL's userinfo), and
    top-level secret options left out, so that they may change; so are the options
    that only say how to run (connections, run limits).
    """
    return redact(
        {
            **arguments,
            "agent_options": {
                k: v
                for k, v in agent_options.items()
                if k not in OPERATIONAL_AGENT_OPTIONS and not is_secret(k)
            },
            "env_config": {k: v for k, v in env_config.items() if k not in RUN_LIMIT_ENV_KEYS},
            "trainer_options": {k: v for k, v in trainer_option_values.items() if not is_secret(k)},
        }
    )


def player(
    env_id: str,
    agent: str | None,
    agent_option: list[str] | None,
    *,
    takes_model: bool,
    model: str | None,
    tokenizer: Any,
    sampling: dict[str, Any],
) -> Any:
    """Who plays: ``--agent``; else the trainer's own model (``None``); for a trainer
    without one (a sink), ``--model`` through a transformers agent or the env's agent."""
    if agent is not None:
        return build_agent(env_id, agent, agent_option)
    if takes_model:
        return None
    if model is not None:
        from agentsgym_trl.transformers_agent import TransformersAgent

        return TransformersAgent(model, tokenizer=tokenizer, **sampling)
    return build_agent(env_id, None, agent_option)
