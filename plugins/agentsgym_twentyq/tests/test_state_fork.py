"""Each step forks TextArena's state instead of deep-copying it: the fork must share no
mutable object with the state it came from, and the states of different episodes must
share none either. These are what make it safe for the runner to hand hooks the state
without copying, to abandon a step that overran its budget (its thread goes on writing
into its own fork), and to run many episodes of one env at once."""

from __future__ import annotations

import copy
import enum
import threading
import types
from typing import Any

import agentsgym
from agentsgym import hookimpl
from agentsgym_twentyq.env import TwentyQuestionsEnv
from agentsgym_twentyq.game import GameState, fork_state, play_turn
from agentsgym_twentyq.gamemaster import GamemasterReply, RulesGamemaster
from agentsgym_twentyq.questioner import ReferenceQuestioner
from twentyq_testutil import BASIC

IMMUTABLE = (str, bytes, int, float, bool, type(None), enum.Enum, range, frozenset)
CODE = (type, types.FunctionType, types.ModuleType, types.MethodType)


def mutable_objects(root: Any) -> dict[int, Any]:
    """Every mutable object reachable from ``root`` (containers and plain instances)."""
    found: dict[int, Any] = {}
    stack = [root]
    while stack:
        obj = stack.pop()
        if isinstance(obj, IMMUTABLE + CODE):
            continue
        if isinstance(obj, tuple):
            stack.extend(obj)
            continue
        if id(obj) in found:
            continue
        found[id(obj)] = obj
        if isinstance(obj, dict):
            stack.extend(obj.keys())
            stack.extend(obj.values())
        elif isinstance(obj, (list, set, frozenset)):
            stack.extend(obj)
        else:
            stack.extend(vars(obj).values())
    return found


def shared_mutables(a: Any, b: Any) -> list[Any]:
    left, right = mutable_objects(a), mutable_objects(b)
    return [left[key] for key in left.keys() & right.keys()]


def played_state(env: Any, task: dict[str, Any], questions: int) -> GameState:
    state = env.hook.initialize_episode(env=env, session_id="s", task_data=task)
    for question in ["Is it a place?", "Does it start with 'a'?", "Is it one word?"][:questions]:
        state, _ = play_turn(state, question, env.gamemaster)
    return state


def test_a_fork_shares_no_mutable_object_with_its_origin(basic_env: Any) -> None:
    state = played_state(basic_env, {"solution": "yo-yo"}, 3)
    forked = fork_state(state.ta_state)
    assert shared_mutables(state.ta_state, forked) == []
    # and it is the same state: every attribute equal
    assert vars(forked) == vars(state.ta_state)


def test_a_step_leaves_the_state_it_was_given_exactly_as_it_was(basic_env: Any) -> None:
    for action in ("Does it have more than 5 letters?", "[yo-yo]", "[kite]"):
        state = played_state(basic_env, {"solution": "yo-yo"}, 2)
        before = copy.deepcopy(vars(state.ta_state))
        after, _ = play_turn(state, action, basic_env.gamemaster)
        assert vars(state.ta_state) == before, action
        assert after.ta_state is not state.ta_state
        assert shared_mutables(state.ta_state, after.ta_state) == []


def test_states_of_different_episodes_share_no_mutable_object(basic_env: Any) -> None:
    # TextArena's reset() has a mutable default role_mapping that every state would share
    first = played_state(basic_env, {"solution": "apple"}, 2)
    second = played_state(basic_env, {"solution": "yo-yo"}, 1)
    assert shared_mutables(first.ta_state, second.ta_state) == []


class BlockingGamemaster:
    """Rules answers, except that a question about 'y' for yo-yo blocks until released."""

    def __init__(self) -> None:
        self.rules = RulesGamemaster()
        self.release = threading.Event()
        self.returned = threading.Event()

    def answer(self, question: str, secret: Any, history: Any) -> GamemasterReply:
        if "'y'" in question and secret.word == "yo-yo":
            self.release.wait(120)
            self.returned.set()
        return self.rules.answer(question, secret, history)


class BlockingQuestioner:
    """Asks two questions, the second of which blocks the gamemaster, then guesses."""

    script = ("Is it a place?", "Does it start with 'y'?", "[yo-yo]")

    def get_action(self, messages: Any, agent_state: Any) -> tuple[str, Any]:
        turn = sum(1 for m in messages if m["role"] == "assistant")
        return self.script[min(turn, 2)], agent_state


class FinishProbe:
    def __init__(self) -> None:
        self.states: list[Any] = []

    @hookimpl
    def finish_episode(self, state: Any) -> None:
        self.states.append(state)


def test_an_abandoned_step_never_changes_a_state_anyone_still_holds() -> None:
    gamemaster = BlockingGamemaster()
    probe = FinishProbe()
    env = TwentyQuestionsEnv(
        env_config={"hook_timeout_seconds": 1.0}, plugins=[probe], gamemaster=gamemaster
    )
    # the same gamemaster object, TextArena's module state, the default budget
    other_env = TwentyQuestionsEnv(gamemaster=gamemaster)
    assert not env.run_hooks_inline  # a gamemaster that may wait: turns in worker threads
    try:
        [abandoned] = env.run_trial([{"solution": "yo-yo"}], BlockingQuestioner()).failed
        assert not gamemaster.returned.is_set()  # the step still runs in its thread
        [held] = probe.states  # the state the runner kept: after the first question
        snapshot = copy.deepcopy(vars(held.ta_state))
        # meanwhile other episodes play on, unaffected
        others = other_env.run_trial(
            [{"solution": "apple"}, {"solution": "kite"}], ReferenceQuestioner(), num_rollouts=2
        )
    finally:
        gamemaster.release.set()
    assert gamemaster.returned.wait(60)
    assert abandoned.error.startswith("EpisodeTimeoutError") and len(abandoned.steps) == 1
    assert held.turns_taken == 1 and vars(held.ta_state) == snapshot
    reference = agentsgym.make(BASIC).run_trial(
        [{"solution": "apple"}, {"solution": "kite"}], ReferenceQuestioner(), num_rollouts=2
    )
    assert not others.failed
    assert [e.messages for e in others.episodes] == [e.messages for e in reference.episodes]
    assert others.final_rewards == reference.final_rewards


def test_turns_run_on_the_event_loop_only_with_the_offline_gamemaster(basic_env: Any) -> None:
    assert basic_env.run_hooks_inline
    basic_env.use_gamemaster(BlockingGamemaster())
    assert not basic_env.run_hooks_inline
