"""The hook specifications of agentsgym (pluggy project name ``"agentsgym"``).

There are two kinds of hooks:

* **Load-time hooks** (:func:`register_envs`, :func:`register_agents`,
  :func:`register_trainers`) are implemented as module-level functions in a plugin
  that is published under the ``agentsgym`` entry-point group. They are called once,
  the first time the registry is used.
* **Episode hooks** (:func:`initialize_episode`, :func:`format_prompt`,
  :func:`step_episode`, :func:`reward_shaping`, :func:`finish_episode`) are called by
  the runner through the env instance's own hook relay. The env registers itself in
  that relay, so an env implements them as ``@hookimpl`` methods (without the ``env``
  argument, which is ``self``). Cross-cutting plugins given to the env
  (``MultistepEnv(plugins=[...])``) sit in the same relay and can wrap a step
  (``wrapper=True``) or add reward terms without subclassing the env.

Episode hooks may be plain functions or ``async def`` coroutines (an env that calls
a tool or a remote service). Plain hooks run in a worker thread of the runner, so a
slow one never stalls other episodes' agent calls, unless the env sets
``run_hooks_inline = True`` (hooks that compute for microseconds and never wait): its
turns then run on the event loop, which spares the thread hop. ``async def`` hooks are
awaited on the runner's event loop and must not block it. The hook calls of one env turn share
the budget ``hook_timeout_seconds`` of the env_config.

State ownership: the runner hands each hook the state the previous hook returned and
never copies it. A hook may mutate that state in place and return it, or return a new
object; ``reward_shaping`` receives the state from *before* the step only if
``step_episode`` returned a new object. Keep per-episode data in the state (or keyed
by ``session_id``), never on ``self``: episodes of one env instance run concurrently.

pluggy calls implementations in LIFO registration order; an implementation may
accept any subset of a spec's arguments, by name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from agentsgym.env import MultistepEnv
    from agentsgym.registry import RegisterAgent, RegisterEnv, RegisterTrainer
    from agentsgym.types import AgentAction, Messages, RewardTerm, StepResult

PROJECT_NAME = "agentsgym"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


# --------------------------------------------------------------------- load time
@hookspec
def register_envs(register: RegisterEnv) -> None:
    """Register the environments this plugin provides.

    Called once per process, when the registry is first used (``agentsgym.make``,
    ``agentsgym list-envs``, the runner resolving a dataset row). Not called at
    ``import agentsgym``.

    :param register: call it once per env:
        ``register(env_id, entry_point, description="...", default_agent=None,
        **default_env_config)``.

        * ``env_id``: ``"namespace/Name-vN"`` (an optional ``-variant`` suffix is
          allowed, e.g. ``"twentyq/TwentyQuestions-v0-hardcore"``). Two
          distributions registering the same id is an error naming both.
        * ``entry_point``: ``"package.module:Class"``, a :class:`MultistepEnv`
          subclass, imported only when the env is built; or the URL of an env
          server (``"http://host:port"``, docs/serving.md) that plays it.
        * ``description``: one line, shown by ``agentsgym list-envs``.
        * ``default_agent``: name of a registered agent that plays this env well
          enough for demos (``agentsgym rollout`` uses it when ``--agent`` is not
          given).
        * ``**default_env_config``: env_config defaults for this id; a dataset
          row's or caller's ``env_config`` is layered on top.

    :return: nothing; results go through ``register``.
    """


@hookspec
def register_agents(register: RegisterAgent) -> None:
    """Register agent factories (scripted policies, model-backed agents).

    Called once per process, the first time an agent is looked up by name
    (``agentsgym rollout --agent NAME``, :func:`agentsgym.make_agent`).

    :param register: ``register(name, factory, description="...")``. ``factory``
        is a callable or a ``"package.module:callable"`` string; it is called with
        the keyword options the user gave (``--agent-option key=value``) and returns
        an object with ``get_action(messages, agent_state)``.
    :return: nothing; results go through ``register``.
    """


@hookspec
def register_trainers(register: RegisterTrainer) -> None:
    """Register trainer adapters, the consumers of padded trajectory batches.

    Called once per process, the first time a trainer is looked up by name
    (``agentsgym train --trainer NAME``, :func:`agentsgym.make_trainer`).

    :param register: ``register(name, factory, description="...")``. ``factory``
        is a callable or a ``"package.module:callable"`` string returning a
        :class:`agentsgym.trainers.TrainerAdapter`.
    :return: nothing; results go through ``register``.
    """


# ------------------------------------------------------------------ episode time
@hookspec(firstresult=True)
def initialize_episode(env: MultistepEnv, session_id: str, task_data: dict[str, Any]) -> Any:
    """Create the state of a new episode.

    Called once at the start of every episode (every rollout, and every episode of
    a trial when ``episodes_per_trial > 1``), before the first
    :func:`format_prompt`.

    :param env: the env instance playing the episode.
    :param session_id: unique id of this rollout; stable across the episodes of one
        trial, so an env can keep per-session resources keyed by it.
    :param task_data: the dataset row's ``task_data`` (one task: ``solution``,
        ``seed``, ...). A ``seed`` key must make the episode deterministic.
    :return: the episode state, any object the env's other hooks understand.
        ``firstresult``: the first non-``None`` result wins, so a plugin can
        replace the env's own initialisation by returning a state.
    """


@hookspec(firstresult=True)
def format_prompt(env: MultistepEnv, state: Any, step: int) -> str | Messages:
    """Produce the message(s) the agent sees before its next action.

    Called before every agent action: at ``step == 0`` right after
    :func:`initialize_episode`, then after every :func:`step_episode` that did not
    end the episode.

    :param env: the env instance.
    :param state: the current episode state.
    :param step: number of agent actions taken so far in this episode.
    :return: the *new* messages appended to the conversation: a string (one
        ``user`` message) or a list of ``{"role": ..., "content": ...}`` dicts
        (step 0 may start with a ``system`` message). ``firstresult``.
    """


@hookspec(firstresult=True)
def step_episode(
    env: MultistepEnv, state: Any, action: str, step: int, reply: AgentAction
) -> StepResult:
    """Apply the agent's action to the episode.

    Called once per agent action, after the action is appended to the conversation
    and to the token stream.

    :param env: the env instance.
    :param state: the current episode state.
    :param action: the agent's reply text, exactly as generated.
    :param step: index of this action in the episode (0 for the first).
    :param reply: the full :class:`~agentsgym.types.AgentAction`: ``reply.truncated``
        says the model was cut at its generation length limit (no end-of-turn token),
        ``reply.token_ids`` the sampled ids when the agent returned them.
    :return: ``(next_state, reward, done, info)`` (a :class:`StepResult` or a plain
        4-tuple): the new state, the step reward earned by this action, whether the
        episode is over, and a JSON-serialisable dict of diagnostics kept in the
        episode's step infos. ``firstresult``; wrap it (``wrapper=True``) to observe
        or alter actions and results, e.g. to parse or strip think blocks.
    """


@hookspec
def reward_shaping(
    env: MultistepEnv,
    state: Any,
    action: str,
    step_result: StepResult,
    step: int,
    reply: AgentAction,
) -> RewardTerm | list[RewardTerm] | None:
    """Add a named term to the step reward.

    Called after every :func:`step_episode`. Every implementation runs.

    :param env: the env instance.
    :param state: the state passed to :func:`step_episode` (the state *before* the
        step, unless that hook mutated it in place).
    :param action: the agent's reply text.
    :param step_result: what :func:`step_episode` returned.
    :param step: index of this action in the episode.
    :param reply: the full :class:`~agentsgym.types.AgentAction`.
    :return: ``RewardTerm(name, value)`` (or a ``(name, value)`` tuple), a list of
        them, or ``None`` for no term. Terms add to the step reward, and each is also
        summed per name into the episode's ``metrics["reward/<name>"]``.
    """


@hookspec
def finish_episode(
    env: MultistepEnv, state: Any, truncated: bool, error: str | None, session_id: str
) -> RewardTerm | list[RewardTerm] | None:
    """End an episode: a final reward term, and the release of per-episode resources.

    Called exactly once at the end of every episode, however it ended: the env said
    ``done``, the runner cut it at ``max_steps_per_episode`` (``truncated=True``), or
    it failed (an exception, a timeout; ``error`` holds the message). Every
    implementation runs; an exception here is logged and never hides the episode's
    own outcome.

    :param env: the env instance.
    :param state: the last state (``None`` when :func:`initialize_episode` failed).
    :param truncated: the runner ended the episode at the step limit, not the env.
    :param error: why the episode failed, or ``None``.
    :param session_id: the rollout's session id (close what you keyed by it).
    :return: ``RewardTerm(name, value)``, a list of them, or ``None``. Terms are added
        to the reward of the episode's last action (so an outcome reward at the step
        limit lands on the last reply's tokens) and summed into
        ``metrics["reward/<name>"]``. Ignored for a failed episode or one without
        actions.
    """
