"""One episode, every producer: for the same env, tasks and scripted agent, the rows of
a local run equal those of ``agentsgym serve`` over agentsgym/v1, OpenEnv and AgentGym's
protocol, of TRL's ``environment_factory`` bridge, and of a harness program through the
model gateway: each records through the core's episode recorder, so nothing of the
episode may differ but what a protocol cannot carry (said per producer below). Three
envs: a single-agent game, a game with roles (the client plays x, the server's agent o)
and a tool env (the harness program plays the single-agent game: see its test for why
not the other two)."""

from __future__ import annotations

import json
from typing import Any

import pytest

import agentsgym
from agentsgym import AgentAction, Episode

pytest.importorskip("agentsgym_serve", reason="the servers come with agentsgym-serve")
pytest.importorskip("agentsgym_classical", reason="the games come with agentsgym-classical")
pytest.importorskip("agentsgym_tools", reason="the tool env comes with agentsgym-tools")
pytest.importorskip("agentsgym_gateway", reason="the harness program needs agentsgym-gateway")

from agentsgym_classical import BisectAgent
from agentsgym_classical.tictactoe_agents import HeuristicAgent, RandomMoveAgent
from agentsgym_gateway import HarnessEnv, ProgramOutcome, ProgramRun
from agentsgym_serve import BackgroundServer, create_app

pytestmark = pytest.mark.timeout(300)

TINY = "agentsgym/tiny-chatml"
GUESS = "agentsgym/GuessTheNumber-v0"
GUESS_CONFIG = {"max_steps_per_episode": 4}  # some episodes end at the step limit
TTT = "classical/TicTacToe-v0"
CALCULATOR = "tools/Calculator-v0"
SEEDS = [0, 2, 4, 6]


class served:
    """A real server of ``env_id`` on 127.0.0.1 for the block."""

    def __init__(self, env_id: str, env_config: dict[str, Any] | None = None, **options: Any):
        self.server = BackgroundServer(create_app(env_id, env_config, **options))

    def __enter__(self) -> str:
        return str(self.server.__enter__().url)

    def __exit__(self, *exc: object) -> None:
        self.server.__exit__(*exc)


def rows(episodes: list[Episode], *, drop: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """The episodes' rows, less what names the env, the session or the task (a remote
    env is named by its URL, a task by the protocol's form of it) and less ``drop``."""
    out = []
    for episode in episodes:
        row = episode.to_record()
        for key in ("session_id", "env_id", "task_data", "role", *drop):
            row.pop(key, None)
        out.append(json.loads(json.dumps(row)))
    return out


def played(batch: Any, role: str | None = None) -> list[Episode]:
    return [e for g in batch.groups for e in g.episodes if role is None or e.role == role]


# ---------------------------------------------------------------------- a single-agent game
def test_a_single_agent_game_is_the_same_episode_from_every_producer() -> None:
    local = agentsgym.make(GUESS, tokenizer=TINY, env_config=GUESS_CONFIG)
    want = played(local.run_trial([{"seed": s} for s in SEEDS], BisectAgent()))
    assert any(e.truncated for e in want) and any(not e.truncated for e in want)
    with served(GUESS, GUESS_CONFIG) as url:
        v1 = agentsgym.make(url, tokenizer=TINY)
        over_v1 = played(v1.run_trial([{"seed": s} for s in SEEDS], BisectAgent()))
        openenv = agentsgym.make(
            "openenv+" + url.replace("http://", "ws://"), tokenizer=TINY, env_config=GUESS_CONFIG
        )
        tasks = [{"task_data": {"seed": s}} for s in SEEDS]
        over_openenv = played(openenv.run_trial(tasks, BisectAgent()))
        # AgentGym's tasks are rows of the served split: row i is the task {"seed": 2 i}
        agentgym = agentsgym.make(f"agentgym+{url}", tokenizer=TINY, env_config=GUESS_CONFIG)
        tasks = [{"data_idx": s // 2} for s in SEEDS]
        over_agentgym = played(agentgym.run_trial(tasks, BisectAgent()))
    assert rows(over_v1) == rows(want)  # everything, the step infos included
    # OpenEnv's observation and AgentGym's reply carry no step info of the env's own
    assert rows(over_openenv, drop=("step_infos",)) == rows(want, drop=("step_infos",))
    assert rows(over_agentgym, drop=("step_infos",)) == rows(want, drop=("step_infos",))


# ---------------------------------------------------------------------- a harness program
class GuessingProgram(HarnessEnv):
    """An agent program that plays GuessTheNumber: agentsgym's own openai client loop (the
    ``openai`` agent) against a local copy of the env, its model the gateway's session.
    The model behind the gateway is the run's agent; the verifier is the game's reward."""

    def program(self, task_data: dict[str, Any]) -> Any:
        def run(run: ProgramRun) -> float:
            game = agentsgym.make(GUESS, env_config=GUESS_CONFIG)
            model = agentsgym.make_agent(
                "openai", base_url=run.base_url, api_key=run.api_key, model=run.model
            )
            try:
                batch = game.run_trial([run.task_data], model)
            finally:
                game.close()
            (episode,) = played(batch)
            assert episode.ok, episode.error
            return episode.final_reward

        return run

    def verify(self, task_data: dict[str, Any], workdir: Any, outcome: ProgramOutcome) -> float:
        return float(outcome.result)


def test_a_harness_program_replaying_the_agents_replies_gives_the_same_rows() -> None:
    """The scripted agent answers the program's calls through the gateway (the run's own
    agent): the rows' tokens, masks, rewards and messages are the local run's. A harness
    episode cannot carry what stays inside the program (the env's step infos, reward
    terms and truncation: the gateway sees calls, not steps) and has metrics of its own
    (calls, segments, sampled share); those are left out. A game with roles is not
    compared (one program session is one view: the gateway records the calls of one
    model), nor a tool env (an agent backend answers with the agent's text, which the
    gateway's tool parser reads as a model's; a scripted agent's structured calls have no
    text to carry them)."""
    tasks = [{"seed": s} for s in SEEDS]
    local = agentsgym.make(GUESS, tokenizer=TINY, env_config=GUESS_CONFIG)
    want = played(local.run_trial(tasks, BisectAgent()))
    assert any(e.truncated for e in want)  # some games end at the step limit
    harness = GuessingProgram(agentsgym.load_tokenizer(TINY))
    try:
        got = played(harness.run_trial(tasks, BisectAgent()))
    finally:
        harness.close()
    assert all(e.ok for e in got), [e.error for e in got]
    assert [len(e.segments) for e in got] == [1] * len(SEEDS)  # one row per rollout
    kept_in_the_program = ("step_infos", "step_reward_terms", "metrics", "truncated")
    assert rows(got, drop=kept_in_the_program) == rows(want, drop=kept_in_the_program)


# ---------------------------------------------------------------------- a game with roles
def test_a_role_is_the_same_view_of_the_game_from_every_producer() -> None:
    """The client plays x; o is the server's seeded random agent, moving as the local
    run's o does (the client sends its rollout's seed)."""
    tasks = [{"seed": s} for s in SEEDS]
    local = agentsgym.make(TTT, tokenizer=TINY)
    want = played(local.run_trial(tasks, {"x": HeuristicAgent(), "o": RandomMoveAgent()}), "x")
    assert {e.metrics["outcome"] for e in want} != {0.0}  # some games are won or lost
    with served(TTT, agents={"o": "classical/tictactoe-random"}) as url:
        v1 = agentsgym.make(url, tokenizer=TINY, env_config={"role": "x"})
        over_v1 = played(v1.run_trial(tasks, HeuristicAgent()))
        # its rollout seeds derive from its URL and task form: unsent, the server seeds
        # each task's first rollout as the local run does
        unseeded = {"rollout_seed_field": None}
        openenv = agentsgym.make(
            "openenv+" + url.replace("http://", "ws://"), tokenizer=TINY, env_config=unseeded
        )
        over_openenv = played(
            openenv.run_trial([{"task_data": t} for t in tasks], HeuristicAgent())
        )
    # the game's outcome reaches a v1 client with the finish reply, as its role_rewards:
    # the same term on its last action, the same metrics["outcome"], the same role
    assert rows(over_v1) == rows(want)
    assert {e.role for e in over_v1} == {"x"}
    # OpenEnv carries no reward terms (the outcome is in the last step's reward)
    carried = ("step_infos", "step_reward_terms", "metrics")
    assert rows(over_openenv, drop=carried) == rows(want, drop=carried)


# ---------------------------------------------------------------------- a tool env
def call(number: int, name: str, **arguments: int) -> dict[str, Any]:
    function = {"name": name, "arguments": arguments}
    return {"id": f"call_{number}", "type": "function", "function": function}


# one call a reply, then the answer; the calls' ids are the ones the bridge's calls get
SCRIPT: list[Any] = [[call(0, "multiply", a=3, b=4)], [call(1, "add", a=12, b=5)], "\\boxed{17}"]


class ToolScript:
    """Calls as a chat server returns them (``tool_calls``, with ids), then the answer."""

    def get_action(self, messages: Any, state: Any) -> tuple[AgentAction, Any]:
        turn = SCRIPT[state or 0]
        action = AgentAction(turn) if isinstance(turn, str) else AgentAction("", tool_calls=turn)
        return action, (state or 0) + 1


def through_the_trl_bridge(task: dict[str, Any]) -> Episode:
    """TRL's loop, replayed: reset, each call as a method call, the answer judged."""
    from agentsgym_tools import trl_environment

    factory = trl_environment(CALCULATOR)
    environment = factory()
    environment.reset(prompt=[], task_data=task)
    for turn in SCRIPT[:-1]:
        for call in turn:
            function = call["function"]
            getattr(environment, function["name"])(**function["arguments"])
    [reward] = factory.reward(
        [[{"role": "assistant", "content": SCRIPT[-1]}]], environments=[environment]
    )
    assert reward == environment.episode.final_reward == 1.0
    return environment.episode


def test_a_tool_env_is_the_same_episode_locally_served_and_through_the_trl_bridge() -> None:
    task = {"a": 3, "b": 4, "c": 5}
    # TRL tokenizes its own rollouts: the bridge records messages and rewards, so the
    # local and served runs are compared without a tokenizer
    want = played(agentsgym.make(CALCULATOR).run_trial([task], ToolScript()))
    assert want[0].num_turns == 3 and want[0].final_reward == 1.0
    with served(CALCULATOR) as url:
        over_v1 = played(agentsgym.make(url).run_trial([task], ToolScript()))
    bridged = through_the_trl_bridge(task)
    assert rows(over_v1) == rows(want)
    assert rows([bridged]) == rows(want)
