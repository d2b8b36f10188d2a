"""The hook specifications of agentsgym (pluggy project name ``"agentsgym"``).

* **Load-time hooks** (``register_*``) are module-level functions of a plugin published
  under the ``agentsgym`` entry-point group, called once per process. The core registers
  its own envs, agents, executor and commands through them (agentsgym.builtin.plugin).
* **Episode hooks** are called by the runner through the env instance's own hook relay,
  where the env registers itself: it implements them as ``@hookimpl`` methods without
  the ``env`` argument (``self``). Plugins given to the env (``plugins=[...]``) share
  the relay, so they can wrap a step or add reward terms without subclassing.

Episode hooks may be ``async def`` (awaited on the runner's event loop: never block it);
plain ones run in a worker thread unless the env sets ``run_hooks_inline``. The hook
calls of one env turn share the budget ``hook_timeout_seconds``. Each hook gets the state
the previous one returned, never a copy (mutate it in place, or return a new object);
keep per-episode data in the state, never on ``self``: episodes of one env instance run
concurrently (docs/plugin-authors.md).

pluggy calls implementations in LIFO registration order; an implementation may accept
any subset of a spec's arguments, by name.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

import pluggy

if TYPE_CHECKING:
    import typer

    from agentsgym.engine import PlayableEnv
    from agentsgym.types import AgentAction, Messages, RewardTerm, StepResult

__all__ = [
    "PROJECT_NAME",
    "RegisterAgent",
    "RegisterComponent",
    "RegisterEnv",
    "RegisterEnvSource",
    "RegisterExecutor",
    "RegisterModel",
    "RegisterTrainer",
    "finish_episode",
    "format_prompt",
    "hookimpl",
    "hookspec",
    "initialize_episode",
    "register_agents",
    "register_commands",
    "register_env_sources",
    "register_envs",
    "register_executors",
    "register_models",
    "register_trainers",
    "reward_shaping",
    "role_rewards",
    "step_episode",
    "turn_role",
]

PROJECT_NAME = "agentsgym"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


# ------------------------------------------------------- the register callbacks
class RegisterEnv(Protocol):
    """The ``register`` of :func:`register_envs`."""

    def __call__(
        self,
        env_id: str,
        entry_point: str,
        *,
        description: str = "",
        default_agent: str | None = None,
        **default_env_config: Any,
    ) -> None: ...


class RegisterComponent(Protocol):
    """The ``register`` of ``register_agents``, ``register_trainers``, ``register_models``."""

    def __call__(self, name: str, factory: Any, *, description: str = "") -> None: ...


RegisterAgent = RegisterTrainer = RegisterModel = RegisterComponent


class RegisterExecutor(Protocol):
    """The ``register`` of :func:`register_executors`."""

    def __call__(
        self, name: str, factory: Any, *, description: str = "", flags: Sequence[Any] = ()
    ) -> None: ...


class RegisterEnvSource(Protocol):
    """The ``register`` of :func:`register_env_sources`."""

    def __call__(
        self, scheme: str, factory: Any, *, description: str = "", normalize: Any = None
    ) -> None: ...


# --------------------------------------------------------------------- load time
@hookspec
def register_envs(register: RegisterEnv) -> None:
    """Register the environments this plugin provides.

    Called once per process, when the registry is first used (``agentsgym.make``,
    ``agentsgym list-envs``, the runner resolving a dataset row); not at ``import agentsgym``.

    :param register: call it once per env: ``register(env_id, entry_point,
        description="...", default_agent=None, **default_env_config)``.

        * ``env_id``: ``"namespace/Name-vN"``, optionally with a ``-variant`` suffix
          (``"twentyq/TwentyQuestions-v0-hardcore"``). Two distributions registering the
          same id is an error naming both.
        * ``entry_point``: ``"package.module:Class"`` of a :class:`MultistepEnv` subclass,
          imported only when the env is built; or the URL of an env server that plays it
          (``"http://host:port"``, docs/serving.md).
        * ``description``: one line, shown by ``agentsgym list-envs``.
        * ``default_agent``: a registered agent that plays this env well enough for demos
          (``agentsgym rollout`` uses it when ``--agent`` is not given).
        * ``**default_env_config``: env_config defaults for this id; a dataset row's or
          caller's ``env_config`` is layered on top.

    :return: nothing; results go through ``register``.
    """


@hookspec
def register_agents(register: RegisterAgent) -> None:
    """Register agent factories (scripted policies, model-backed agents).

    Called once per process, the first time an agent is looked up by name (``agentsgym
    rollout --agent NAME``, :func:`agentsgym.make_agent`).

    :param register: ``register(name, factory, description="...")``. ``factory`` is a
        callable or a ``"package.module:callable"`` string, called with the user's keyword
        options (``--agent-option key=value``); it returns an object with
        ``get_action(messages, agent_state)``.
    :return: nothing; results go through ``register``.
    """


@hookspec
def register_trainers(register: RegisterTrainer) -> None:
    """Register trainer adapters, the consumers of padded trajectory batches.

    Called once per process, the first time a trainer is looked up by name (``agentsgym
    train --trainer NAME``, :func:`agentsgym.runtime.make_trainer`).

    :param register: ``register(name, factory, description="...")``. ``factory`` is a
        callable or a ``"package.module:callable"`` string returning a
        :class:`agentsgym.trainers.TrainerAdapter`.
    :return: nothing; results go through ``register``.
    """


@hookspec
def register_executors(register: RegisterExecutor) -> None:
    """Register executors: where the trials of a run are played.

    Called once per process, the first time an executor is looked up by name (``agentsgym
    rollout --executor NAME``, ``run_dataset(..., executor=NAME)``). The core registers
    ``local`` (this process's event loop) through this hook.

    :param register: ``register(name, factory, description="...", flags=())``.

        * ``factory``: a callable or a ``"package.module:callable"`` string, called with
          the run's executor options (``--num-workers``, ``--executor-option key=value``,
          and the executor's own flags); it returns an
          :class:`agentsgym.executors.Executor`: an object with ``remote`` (trials run in
          other processes, which then build agents from :class:`~agentsgym.runtime.AgentSpec`
          recipes) and ``async arun(request, *, on_episode=None, on_trial=None)``
          returning episodes by ``(task_index, rollout_index)``.
        * ``flags``: :class:`agentsgym.runtime.ExecutorFlag` s (or dicts of their fields): each
          adds a flag to every command that takes ``--executor`` (``--cluster-address ADDR``
          becomes the option ``address``); given with another executor, it is an error
          naming the executor it belongs to.
    :return: nothing; results go through ``register``.
    """


@hookspec
def register_models(register: RegisterModel) -> None:
    """Register model names: a name every ``--model``/``--tokenizer`` option accepts.

    Called once per process; :func:`agentsgym.load_tokenizer` and model loaders resolve names.

    :param register: ``register(name, factory, description="...")``. ``factory`` is a
        callable or a ``"package.module:callable"`` string, called without arguments
        (offline); it returns the path of a local transformers model folder.
    :return: nothing; results go through ``register``.
    """


@hookspec
def register_env_sources(register: RegisterEnvSource) -> None:
    """Register a kind of env source: a URL scheme that names envs played elsewhere.

    Called once per process, the first time the registry is used. When
    ``agentsgym.make(url)``, a dataset row or a registered entry point names a URL
    (``http://host:port``), the plugin that registered its scheme builds the env. A URL
    from a dataset row is untrusted input and resolves only when the user allowed it (see
    :mod:`agentsgym.trust`), whichever source plays it.

    :param register: ``register(scheme, factory, description="...", normalize=None)``.

        * ``scheme``: the URL scheme, lower case (``"http"``, ``"agentgym+http"``); two
          distributions registering one is an error.
        * ``factory``: a callable or ``"package.module:callable"`` string, called as
          ``factory(url, tokenizer=..., env_config=..., plugins=...)``; returns a
          :class:`~agentsgym.MultistepEnv` (usually a subclass whose hooks call the server).
        * ``normalize``: optional callable (or path) ``normalize(url) -> url``, called when
          the URL is resolved: it returns the canonical URL (the env's id) or raises
          ``ValueError`` saying what is wrong, so that a bad URL in a dataset fails before
          any episode is played.
    :return: nothing; results go through ``register``.
    """


@hookspec
def register_commands(cli: typer.Typer) -> None:
    """Add commands to the ``agentsgym`` command line.

    Called once when the command line starts, before its arguments are parsed, with the
    Typer application. Add commands as to any Typer app::

        @hookimpl
        def register_commands(cli):
            @cli.command("hello")
            def hello(name: str) -> None:
                \"\"\"Say hello.\"\"\"
                print(f"hello {name}")

    Import heavy libraries inside the command functions: every command of every plugin is
    registered at every start. The core's own commands register through this hook too. A
    plugin whose ``register_commands`` raises is reported and left out; the other
    commands keep working.

    :param cli: the ``typer.Typer`` application of ``agentsgym``.
    :return: nothing.
    """


# ------------------------------------------------------------------ episode time
@hookspec(firstresult=True)
def initialize_episode(
    env: PlayableEnv, session_id: str, task_data: dict[str, Any], rollout_seed: int
) -> Any:
    """Create the state of a new episode.

    Called once at the start of every episode (every rollout, and every episode of a trial
    when ``episodes_per_trial > 1``), before the first :func:`format_prompt`.

    :param env: the env instance playing the episode (a :class:`~agentsgym.MultistepEnv`).
    :param session_id: unique id of this rollout, stable across the episodes of one trial,
        so an env can keep per-session resources keyed by it.
    :param task_data: the dataset row's ``task_data`` (one task: ``solution``, ``seed``,
        ...). A ``seed`` key must make the episode deterministic.
    :param rollout_seed: the seed of this rollout's agents (their ``EpisodeContext.seed``:
        the same across runs, different across the rollouts of a task). For an env that
        plays agents of its own (a client of ``agentsgym serve`` sends it to the server,
        whose agents play the other roles), so that a task's rollouts differ as a local
        run's do. Never seed the env's own randomness with it: that comes from
        ``task_data``.
    :return: the episode state, any object the env's other hooks understand.
        ``firstresult``: the first non-``None`` result wins, so a plugin can replace the
        env's own initialisation by returning a state.
    """


@hookspec(firstresult=True)
def turn_role(env: PlayableEnv, state: Any, step: int) -> str:
    """Say whose turn it is, in an env with several roles (``MultistepEnv.roles``).

    Called before every :func:`format_prompt` of an env that declares roles: at
    ``step == 0`` right after :func:`initialize_episode`, then after every
    :func:`step_episode` that did not end the episode. Never called for an env that
    declares no roles (it has one agent, and every ``role`` argument is ``None``).

    :param env: the env instance.
    :param state: the current episode state.
    :param step: number of actions taken so far in this episode, by every role.
    :return: the name of the role that acts next, one of the env's declared roles.
        ``firstresult``; a name the env did not declare fails the episode.
    """


@hookspec(firstresult=True)
def format_prompt(env: PlayableEnv, state: Any, step: int, role: str | None) -> str | Messages:
    """Produce the message(s) the agent sees before its next action.

    Called before every agent action: at ``step == 0`` right after
    :func:`initialize_episode`, then after every :func:`step_episode` that did not end the
    episode.

    :param env: the env instance.
    :param state: the current episode state.
    :param step: number of agent actions taken so far in this episode.
    :param role: the role about to act (what :func:`turn_role` said), ``None`` in an env
        without roles. Each role has a conversation of its own: return what *this* role
        observes since its last action.
    :return: the *new* messages appended to the conversation (the acting role's): a
        string (one ``user`` message) or a list of ``{"role": ..., "content": ...}`` dicts
        (a role's first prompt may start with a ``system`` message). ``firstresult``.
    """


@hookspec(firstresult=True)
def step_episode(
    env: PlayableEnv, state: Any, action: str, step: int, reply: AgentAction, role: str | None
) -> StepResult:
    """Apply the agent's action to the episode.

    Called once per agent action, after the action is appended to the conversation and to
    the token stream.

    :param env: the env instance.
    :param state: the current episode state.
    :param action: the agent's reply text, exactly as generated.
    :param step: index of this action in the episode (0 for the first).
    :param reply: the full :class:`~agentsgym.types.AgentAction`: ``reply.truncated`` says
        the model was cut at its generation length limit (no end-of-turn token),
        ``reply.token_ids`` are the sampled ids when the agent returned them.
    :param role: the role that acted (``None`` in an env without roles); the step reward
        is that role's.
    :return: ``(next_state, reward, done, info)`` (a :class:`StepResult` or a plain
        4-tuple): the new state, the step reward earned by this action, whether the
        episode is over, and a JSON-serialisable dict of diagnostics kept in the episode's
        step infos. An env that cuts the episode short itself, without finishing it (a
        remote server at its step limit), says so with ``info["truncated"] = True``
        (:data:`~agentsgym.types.TRUNCATED_KEY`): the episode ends there as truncated,
        as at ``max_steps_per_episode``. ``firstresult``; wrap it (``wrapper=True``) to
        observe or alter actions and results, e.g. to parse or strip think blocks. A
        reward that cannot be computed (a judge model failed) raises
        :class:`~agentsgym.errors.RewardUnavailableError`: the episode fails as unscored.
    """


@hookspec
def reward_shaping(
    env: PlayableEnv,
    state: Any,
    action: str,
    step_result: StepResult,
    step: int,
    reply: AgentAction,
    role: str | None,
) -> RewardTerm | list[RewardTerm] | None:
    """Add a named term to the step reward.

    Called after every :func:`step_episode`. Every implementation runs.

    :param env: the env instance.
    :param state: the state passed to :func:`step_episode` (the state *before* the step,
        unless that hook mutated it in place).
    :param action: the agent's reply text.
    :param step_result: what :func:`step_episode` returned. Its ``info`` is the step's
        info, read after every implementation ran: what a term was computed from (a
        judge model's prompt, reply and score) may be added to it.
    :param step: index of this action in the episode.
    :param reply: the full :class:`~agentsgym.types.AgentAction`.
    :param role: the role that acted (``None`` in an env without roles): the terms are
        its own.
    :return: ``RewardTerm(name, value)`` (or a ``(name, value)`` tuple), a list of them,
        or ``None`` for no term. Terms add to the step reward, and each is also summed per
        name into the episode's ``metrics["reward/<name>"]``. A term that cannot be
        computed (its judge failed) raises :class:`~agentsgym.errors.RewardUnavailableError`
        rather than return a made-up value.
    """


@hookspec
def finish_episode(
    env: PlayableEnv, state: Any, truncated: bool, error: str | None, session_id: str
) -> RewardTerm | list[RewardTerm] | None:
    """End an episode: a final reward term, and the release of per-episode resources.

    Called exactly once at the end of every episode, however it ended: the env said
    ``done``, the runner cut it at ``max_steps_per_episode`` (``truncated=True``), or it
    failed (an exception, a timeout; ``error`` holds the message). Every implementation
    runs; an exception here is logged and never hides the episode's own outcome.

    :param env: the env instance.
    :param state: the last state (``None`` when :func:`initialize_episode` failed).
    :param truncated: the runner ended the episode at the step limit, not the env.
    :param error: why the episode failed, or ``None``.
    :param session_id: the rollout's session id (close what you keyed by it).
    :return: ``RewardTerm(name, value)``, a list of them, or ``None``. Terms are added to
        the reward of the episode's last action (so an outcome reward at the step limit
        lands on the last reply's tokens) and summed into ``metrics["reward/<name>"]``.
        Ignored for a failed episode or one without actions. A
        :class:`~agentsgym.errors.RewardUnavailableError` raised here fails the episode
        as unscored (its error keeps that kind), any other exception as an ``EpisodeError``.
    """


@hookspec(firstresult=True)
def role_rewards(
    env: PlayableEnv, state: Any, truncated: bool, error: str | None
) -> dict[str, float] | None:
    """The outcome reward of each role, at the end of an episode with several roles.

    Called once at the end of every episode of an env that declares roles, after
    :func:`finish_episode`, unless the episode failed. Never called for an env without
    roles (its ``finish_episode`` terms are the outcome).

    :param env: the env instance.
    :param state: the last state.
    :param truncated: the runner ended the episode at the step limit, not the env.
    :param error: always ``None`` today (a failed episode earns nothing); kept so that an
        implementation may take the same arguments as :func:`finish_episode`.
    :return: ``{role: reward}`` for every declared role (a zero-sum game returns
        opposite values; a role left out fails the episode, saying which), or ``None``
        for a game without outcome. Each reward is added to the reward of
        that role's last action, as the term ``outcome`` (``metrics["reward/outcome"]``
        of the role's episode); a role that never acted cannot carry one, and its value
        is kept in its metrics only. ``firstresult``.
    """
