"""One game of Twenty Questions on TextArena's state machinery.

The turn counter, the turn limit, the outcome and the observation log are TextArena's
``SinglePlayerState``, used the way its ``TwentyQuestionsEnv.step`` uses it. What
differs, and why:

* The gamemaster is pluggable (see :mod:`agentsgym_twentyq.gamemaster`); TextArena's
  constructor would build an OpenRouter model, so ``TwentyQuestionsEnv.__init__`` is
  never called and nothing of that class is instantiated. A gamemaster that cannot
  answer fails the episode (:class:`~agentsgym_twentyq.errors.GamemasterError`).
* Guesses are parsed by :mod:`agentsgym_twentyq.parsing` (every listed word is
  guessable; a substring no longer wins).
* The limit is checked after the turn counter moves, so ``max_turns`` is exactly the
  number of player turns (TextArena checks before it moves and lets one extra action
  through).
* ``SinglePlayerState`` gets ``seed=None``: TextArena's ``State`` would call the
  process-wide ``random.seed`` with it, which concurrent episodes must not do. The
  seed in ``task_data`` only picks the word (see :func:`pick_secret`).
* Each step works on a fork of the state (:func:`fork_state`) and returns a new
  :class:`GameState`, so the state an episode hook received is never changed behind
  its back: ``reward_shaping`` sees the state before the step, and a step the runner
  abandoned (over ``hook_timeout_seconds``; a plain function cannot be stopped) goes
  on writing only into its own fork, never into the state the runner kept for
  ``finish_episode``, nor into another episode's. The fork copies TextArena's few
  containers one level deep (their items are strings, numbers and tuples of them)
  instead of ``copy.deepcopy``-ing the whole state, which cost more than the rest of
  a turn together and grew with the episode.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import textarena as ta

from agentsgym.errors import DatasetRowError
from agentsgym_twentyq.errors import GamemasterError
from agentsgym_twentyq.gamemaster import ANSWERS, Gamemaster, GamemasterReply
from agentsgym_twentyq.parsing import (
    find_question,
    is_correct,
    is_guessable,
    normalize_word,
    parse_guess,
)
from agentsgym_twentyq.words import Level, Secret, lookup_category, word_list

PLAYER_ID = 0
WIN_REASON = "Congratulations! You guessed the word."
WRONG_REASON = "Invalid guess. You guessed incorrectly."
LIMIT_REASON = "The turn limit has been reached"
NO_QUESTION = (
    "I could not find a yes-or-no question (ending in ?) or a [guess] in your reply. Ask "
    "one short question, or wrap your guess in square brackets."
)
CUT_OFF = (
    "Your reply was cut off at the length limit before a question or a [guess]. Ask one "
    "short question, or wrap your guess in square brackets."
)


@dataclass(frozen=True)
class GameState:
    """The state of one episode: the secret and TextArena's state object."""

    secret: Secret
    level: Level
    ta_state: ta.SinglePlayerState
    last_answer: str | None = None

    @property
    def history(self) -> list[tuple[str, str]]:
        return list(self.ta_state.game_state.get("history", []))

    @property
    def turns_taken(self) -> int:
        return int(self.ta_state.turn)

    @property
    def done(self) -> bool:
        return bool(self.ta_state.done)

    @property
    def reward(self) -> float:
        rewards = self.ta_state.rewards or {}
        return float(rewards.get(PLAYER_ID, 0.0))


def pick_secret(task_data: dict[str, Any], level: Level) -> Secret:
    """The secret of a task: ``solution`` (+ optional ``category``), or one drawn by ``seed``.

    Without a solution the word is drawn like TextArena's ``reset`` does (a random
    theme, then a random word of it), from a generator seeded by ``task_data["seed"]``.
    """
    solution = task_data.get("solution")
    if solution is None:
        rng = random.Random(task_data.get("seed"))
        words = word_list(level)
        categories = sorted({s.category for s in words if s.category})
        category = rng.choice(categories)
        return rng.choice([s for s in words if s.category == category])
    if not isinstance(solution, str) or not solution.strip():
        raise DatasetRowError(
            f"task_data solution must be a non-empty string, got {solution!r}; fix the row, or "
            "drop `solution` to draw a word by `seed`"
        )
    if not is_guessable(solution):
        raise DatasetRowError(
            f"task_data solution {solution!r} cannot be written as a guess; use letters, "
            "spaces, hyphens and apostrophes only"
        )
    category = task_data.get("category") or lookup_category(solution, prefer=level)
    if category not in (None, "place", "person", "thing"):
        raise DatasetRowError(
            f"task_data category must be place, person or thing, got {category!r}"
        )
    return Secret(solution.strip(), category)


def new_game(secret: Secret, level: Level, max_turns: int, rules: str) -> GameState:
    """A fresh TextArena state holding the secret, the rules prompt logged."""
    state = ta.SinglePlayerState(num_players=1, seed=None, max_turns=max_turns)
    state.reset(
        game_state={
            "target_word": secret.word,
            "category": secret.category,
            "history": [],
            "rendered_text": f"Game word: {secret.word}",
        },
        player_prompt_function=lambda player_id, game_state: rules,
        # TextArena's default is one dict object (a mutable default argument) that
        # reset writes to: every state would share it. Each episode gets its own.
        role_mapping={PLAYER_ID: "Player"},
    )
    return GameState(secret=secret, level=level, ta_state=state)


def fork_state(ta_state: ta.SinglePlayerState) -> ta.SinglePlayerState:
    """A copy of ``ta_state`` that shares no mutable object with it.

    ``SinglePlayerState`` holds numbers and flags, and a few containers whose items
    are immutable (strings, numbers, tuples of them, ``ObservationType`` members):
    ``game_state`` (its ``history`` a list of question/answer tuples), the
    ``observations`` and ``logs`` lists, the per-player ``game_info`` dicts, and
    ``step_info``, ``rewards`` and ``role_mapping``. Copying those containers one level
    deep makes the copy independent at a fraction of ``copy.deepcopy``'s cost.
    ``tests/test_state_fork.py`` walks both object graphs to keep this true.
    """
    # copy.copy goes through __reduce_ex__, three times slower for a plain object
    forked = object.__new__(type(ta_state))
    vars(forked).update(vars(ta_state))
    game_state = dict(ta_state.game_state)
    if "history" in game_state:
        game_state["history"] = list(game_state["history"])
    forked.game_state = game_state
    forked.observations = {pid: list(seen) for pid, seen in ta_state.observations.items()}
    forked.logs = list(ta_state.logs)
    forked.game_info = {pid: dict(info) for pid, info in ta_state.game_info.items()}
    forked.step_info = dict(ta_state.step_info)
    forked.rewards = dict(ta_state.rewards) if ta_state.rewards is not None else None
    forked.role_mapping = dict(ta_state.role_mapping)
    return forked


def play_turn(
    state: GameState, action: str, gamemaster: Gamemaster, *, cut_off: bool = False
) -> tuple[GameState, dict[str, Any]]:
    """Apply one player reply: judge a guess or have the gamemaster answer a question.

    A reply that holds neither (a statement, or one ``cut_off`` at the length limit
    before its question) uses up its turn without asking the gamemaster: the env says
    what it could not find (``info["kind"] == "none"``), and nothing enters the history.
    """
    ta_state = fork_state(state.ta_state)
    ta_state.add_observation(
        from_id=PLAYER_ID,
        to_id=-1,
        message=action,
        observation_type=ta.ObservationType.PLAYER_ACTION,
    )
    guess = parse_guess(action)
    info: dict[str, Any]
    answer: str | None = None
    if guess is not None:
        correct = is_correct(guess, state.secret.word)
        ta_state.set_outcome(
            reward=1 if correct else 0, reason=WIN_REASON if correct else WRONG_REASON
        )
        info = {
            "kind": "guess",
            "guess": guess,
            "answer": normalize_word(guess),
            "correct": correct,
        }
    elif (question := find_question(action, cut_off=cut_off)) is None:
        answer = CUT_OFF if cut_off else NO_QUESTION
        ta_state.add_observation(
            from_id=ta.GAME_ID,
            to_id=-1,
            message=answer,
            observation_type=ta.ObservationType.GAME_MESSAGE,
        )
        info = {"kind": "none", **({"cut_off": True} if cut_off else {})}
    else:
        reply = _ask(gamemaster, question, state)
        answer = reply.answer
        ta_state.game_state["history"].append((question, answer))
        ta_state.add_observation(
            from_id=ta.GAME_ID,
            to_id=-1,
            message=answer,
            observation_type=ta.ObservationType.GAME_MESSAGE,
        )
        info = {"kind": "question", "question": question, **reply.info()}
    ta_state.step()
    if ta_state.check_turn_limit():
        ta_state.set_outcome(reward=0, reason=LIMIT_REASON)
    next_state = GameState(state.secret, state.level, ta_state, answer)
    info["turn"] = next_state.turns_taken
    if next_state.done:
        info["reason"] = ta_state.game_info[PLAYER_ID].get("reason")
    return next_state, info


def _ask(gamemaster: Gamemaster, question: str, state: GameState) -> GamemasterReply:
    """The gamemaster's answer, or a :class:`GamemasterError` when there is none.

    A gamemaster that raises, or returns something other than one of the answers, has
    not answered; playing on with a made-up "I don't know" would record a reward the
    real game never gave, so the episode fails instead.
    """
    name = getattr(gamemaster, "name", type(gamemaster).__name__)
    try:
        reply = gamemaster.answer(question, state.secret, state.history)
    except GamemasterError:
        raise
    except Exception as exc:  # a third-party gamemaster that does not raise our error
        raise GamemasterError(
            f"gamemaster {name!r} raised {type(exc).__name__}: {exc}; the episode fails "
            "rather than go on with an answer the gamemaster never gave"
        ) from exc
    if not isinstance(reply, GamemasterReply) or reply.answer not in ANSWERS:
        raise GamemasterError(
            f"gamemaster {name!r} returned {reply!r:.200}, not a GamemasterReply holding one "
            f"of {list(ANSWERS)}; fix its answer() method"
        )
    return reply
