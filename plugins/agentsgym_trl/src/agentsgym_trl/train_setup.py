"""What ``agentsgym train`` builds before the first step: the tasks, the trainer, the
run's record and who plays."""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any

import typer

from agentsgym import DEFAULT_TOKENIZER, make
from agentsgym.cli import (
    OPERATIONAL_AGENT_OPTIONS,
    RUN_LIMIT_ENV_KEYS,
    AgentChoices,
    RunAgents,
    agent_name,
    build_component,
    check_options,
    parse_key_values,
    split_role_options,
)
from agentsgym.errors import AgentError
from agentsgym.runtime import AgentSpec, get_registry, is_secret, redact

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


@dataclass(frozen=True)
class TrainAgents:
    """``--agent`` and ``--agent-option`` of ``train``.

    ``agent`` plays the trained roles (``None``: the trainer's own model; for a sink,
    the env's agent); ``--agent ROLE=NAME`` gives one role of an env with roles an
    agent of its own (a scripted opponent...), and that role is not trained. A role
    without one is played by ``agent`` (self-play). ``--agent-option ROLE.key=value``
    goes to that role's agent only, the others to ``agent``.
    """

    agent: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    role_agents: dict[str, str] = field(default_factory=dict)
    role_options: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def parse(
        cls, env_id: str, env: Any, agent: list[str] | None, agent_option: list[str] | None
    ) -> TrainAgents:
        """The choice of the command line, each role's agent and options checked."""
        choices = AgentChoices.parse(agent)
        if choices.per_env:
            named = next(iter(choices.per_env))
            raise AgentError(
                f"--agent {named}={choices.per_env[named]}: train plays one env ({env_id}); "
                "give --agent NAME, or --agent ROLE=NAME for one role of an env with roles"
            )
        choices.role_agents({env_id: env})  # every role named must be one of the env's
        # Only the roles named here: a role's default agent is for rollouts and evals;
        # in training a role without --agent ROLE=NAME is the model's (self-play).
        role_agents = dict(choices.per_role)
        options, role_options = split_role_options(
            parse_key_values(agent_option, "--agent-option"), role_agents
        )
        registry = get_registry()
        for role, name in role_agents.items():
            check_options(
                registry.agent(name).load(),
                role_options.get(role, {}),
                what=f"agent {name!r} of role {role!r}",
            )
        return cls(choices.default, options, role_agents, role_options)

    def trained_roles(self, env: Any) -> tuple[str, ...] | None:
        """The roles whose groups are trained (``None``: an env without roles): the
        env's trainable roles less those played by an agent of their own."""
        if not env.role_names:
            return None
        trained = tuple(r for r in env.trainable_roles if r not in self.role_agents)
        if not trained:
            given = ", ".join(f"--agent {r}={n}" for r, n in self.role_agents.items())
            raise AgentError(
                f"{given}: every trainable role of {env.env_id} "
                f"({', '.join(env.trainable_roles) or 'none'}) has an agent of its own, so "
                "no role is left to train; leave out --agent for the role to train"
            )
        return trained

    def opponents(self, *, remote: bool) -> dict[str, Any]:
        """The agent of each role that has its own: built, or as a recipe (an
        :class:`~agentsgym.runtime.AgentSpec`) for an executor that plays elsewhere."""
        registry = get_registry()
        return {
            role: (
                AgentSpec(name, self.role_options.get(role, {}))
                if remote
                else build_component(registry.agent(name), self.role_options.get(role, {}))
            )
            for role, name in self.role_agents.items()
        }

    def arguments(self) -> dict[str, Any]:
        """What the run's record keeps of the choice (compared by ``--resume``); the
        role agents only when there are any, so that older checkpoints still match."""
        recorded: dict[str, Any] = {
            "agent": self.agent,
            "agent_options": agent_record(self.options),
        }
        if self.role_agents:
            recorded["role_agents"] = dict(sorted(self.role_agents.items()))
            recorded["role_agent_options"] = {
                role: agent_record(self.role_options.get(role, {}))
                for role in sorted(self.role_agents)
            }
        return recorded


def agent_record(options: dict[str, Any]) -> dict[str, Any]:
    """An agent's options as the run's record keeps them: without the ones that only say
    how to run (connections, batching) and without secrets."""
    return {
        k: v for k, v in options.items() if k not in OPERATIONAL_AGENT_OPTIONS and not is_secret(k)
    }


def run_arguments(
    arguments: dict[str, Any],
    agents: TrainAgents,
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
            **agents.arguments(),
            "env_config": {k: v for k, v in env_config.items() if k not in RUN_LIMIT_ENV_KEYS},
            "trainer_options": {k: v for k, v in trainer_option_values.items() if not is_secret(k)},
        }
    )


def player(
    env_id: str,
    env: Any,
    agents: TrainAgents,
    *,
    takes_model: bool,
    model: str | None,
    tokenizer: Any,
    sampling: dict[str, Any],
    remote: bool = False,
) -> Any:
    """Who plays the trained roles: ``--agent``; else the trainer's own model
    (``None``); for a trainer without one (a sink), ``--model`` through a transformers
    agent, else the agents ``rollout`` would choose (:func:`rollout_players`).
    ``remote``: an executor that plays elsewhere gets a recipe
    (:class:`~agentsgym.runtime.AgentSpec`) that each worker builds."""
    name = agents.agent
    if name is None and takes_model:
        return None
    if name is None and model is not None:
        if remote:
            return AgentSpec("transformers", {"model": model, **sampling})
        from agentsgym_trl.transformers_agent import TransformersAgent

        return TransformersAgent(model, tokenizer=tokenizer, **sampling)
    if name is None:
        return rollout_players(env_id, env, agents, remote=remote)
    name = agent_name(env_id, name)
    spec = get_registry().agent(name)
    if remote:
        check_options(spec.load(), agents.options, what=f"agent {name!r}")
        return AgentSpec(name, dict(agents.options))
    return build_component(spec, agents.options)


def rollout_players(env_id: str, env: Any, agents: TrainAgents, *, remote: bool) -> Any:
    """A sink's agents without ``--agent NAME`` or ``--model``, chosen as ``rollout``
    chooses them (:class:`~agentsgym.cli.RunAgents`): the env's default agent, else in
    an env with roles each role's own (``--agent ROLE=NAME``, else its
    ``Role.default_agent``); one agent, or a dict of them by role (which then holds the
    role agents too). A role left without one is refused before anything is played,
    naming the role and the flag to give."""
    role_options = {
        f"{role}.{key}": value
        for role, options in agents.role_options.items()
        for key, value in options.items()
    }
    chosen = RunAgents.choose(
        AgentChoices(per_role=dict(agents.role_agents)),
        [env_id],
        {**agents.options, **role_options},
        build=not remote,
        envs={env_id: env},
    )
    return chosen.players(remote=remote)[env_id]
