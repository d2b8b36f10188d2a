"""Twenty Questions for two agents (``twentyq/TwentyQuestions-v0-duel``): the env and
its config. How it plays is the env class's docstring, which ``agentsgym describe``
shows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import Field

from agentsgym import AgentAction, EnvConfig, MultistepEnv, Role, StepResult, hookimpl
from agentsgym_twentyq.agent_gamemaster import gamemaster_messages, read_answer
from agentsgym_twentyq.config import DEFAULT_MAX_TURNS
from agentsgym_twentyq.game import GameState, new_game, pick_secret, play_turn
from agentsgym_twentyq.gamemaster import DONT_KNOW, GamemasterReply, RulesGamemaster
from agentsgym_twentyq.parsing import find_question, parse_guess
from agentsgym_twentyq.prompts import rules_prompt, turn_prompt
from agentsgym_twentyq.splits import WordListTasks
from agentsgym_twentyq.words import Secret

if TYPE_CHECKING:
    from collections.abc import Sequence


QUESTIONER, GAMEMASTER = "questioner", "gamemaster"
ORACLE = RulesGamemaster()


class TwentyQuestionsDuelConfig(EnvConfig):
    """env_config of ``twentyq/TwentyQuestions-v0-duel``."""

    max_steps_per_episode: int = Field(
        default=2 * DEFAULT_MAX_TURNS - 1,
        ge=1,
        description="actions of both roles: the questioner has (max_steps + 1) // 2 turns, "
        "each question answered by the gamemaster (default: 21 turns, 20 answers)",
    )
    hardcore: bool = Field(default=False, description="TextArena's hardcore word list")
    show_history: bool = Field(
        default=True, description="repeat the question/answer history in every turn"
    )


@dataclass
class DuelState:
    """The game, and the question waiting for the gamemaster's answer."""

    game: GameState
    pending_action: str | None = None
    pending_question: str | None = None
    questioner_prompted: bool = False
    gamemaster_prompted: bool = False
    judged: int = 0
    agreed: int = 0


class _GivenAnswer:
    """The gamemaster role's answer, handed to the game's turn as a gamemaster's."""

    name = GAMEMASTER

    def __init__(self, reply: GamemasterReply) -> None:
        self.reply = reply

    def answer(
        self, question: str, secret: Secret, history: Sequence[tuple[str, str]]
    ) -> GamemasterReply:
        return self.reply


class TwentyQuestionsDuelEnv(WordListTasks, MultistepEnv):
    """A questioner and a gamemaster, both agents, each with its own conversation.

    The questioner plays as in ``twentyq/TwentyQuestions-v0``; its questions go to the
    ``gamemaster`` role instead of an offline gamemaster. The gamemaster sees TextArena's
    gamemaster prompt (the secret word, then each question) and answers Yes, No or I don't
    know. Rewards (``role_rewards``): the questioner earns 1 for guessing the word, the
    gamemaster the share of its answers that agree with the offline rules gamemaster (the
    oracle) on the questions the oracle can decide; an unclear answer counts as "I don't
    know". Step infos carry the ``oracle``'s answer and whether the model ``agrees``;
    each role's ``answer`` is its own (the gamemaster's reply, the questioner's guessed
    word), so eval's cons@k of a role votes on that role's answers only.

    The questioner trains against a model gamemaster here (``--env-config
    trainable_roles='["questioner"]'`` keeps the gamemaster frozen), or against the offline
    one in ``twentyq/TwentyQuestions-v0``; ``twentyq/oracle-gamemaster`` is a scripted
    gamemaster that answers as the oracle does, and the gamemaster role's default agent on
    the command line (``--agent questioner=MODEL`` needs no ``--agent gamemaster=...``).
    """

    config_class = TwentyQuestionsDuelConfig
    config: TwentyQuestionsDuelConfig
    roles = (
        Role(QUESTIONER, description="asks yes/no questions, then guesses the word"),
        Role(
            GAMEMASTER,
            description="answers each question about the secret word",
            default_agent="twentyq/oracle-gamemaster",
        ),
    )
    run_hooks_inline = True  # no hook waits: the gamemaster is an agent of its own

    @property
    def max_turns(self) -> int:
        """The questioner's turns (the game's turn limit)."""
        return (self.config.max_steps_per_episode + 1) // 2

    @hookimpl
    def initialize_episode(self, task_data: dict[str, Any]) -> DuelState:
        secret = pick_secret(task_data, self.level)
        rules = rules_prompt(secret, self.level, self.max_turns)
        return DuelState(new_game(secret, self.level, self.max_turns, rules))

    @hookimpl
    def turn_role(self, state: DuelState) -> str:
        return GAMEMASTER if state.pending_question is not None else QUESTIONER

    @hookimpl
    def format_prompt(self, state: DuelState, role: str) -> Any:
        game = state.game
        if role == GAMEMASTER:
            messages = gamemaster_messages(str(state.pending_question), game.secret, ())
            first, state.gamemaster_prompted = not state.gamemaster_prompted, True
            return messages if first else messages[1:]  # the system prompt opens it once
        if not state.questioner_prompted:
            state.questioner_prompted = True
            return rules_prompt(game.secret, game.level, self.max_turns)
        return turn_prompt(
            game.last_answer or "",
            game.history,
            game.turns_taken,
            self.max_turns,
            show_history=self.config.show_history,
        )

    @hookimpl
    def step_episode(
        self, state: DuelState, action: str, role: str, reply: AgentAction
    ) -> StepResult:
        if role == QUESTIONER:
            question = find_question(action, cut_off=reply.truncated)
            if parse_guess(action) is None and question is not None:
                state.pending_action, state.pending_question = action, question
                return StepResult(state, 0.0, False, {"kind": "question", "question": question})
            state.game, info = play_turn(state.game, action, ORACLE, cut_off=reply.truncated)
            return StepResult(state, 0.0, state.game.done, info)
        return self._answer(state, action)

    def _answer(self, state: DuelState, action: str) -> StepResult:
        question, game = str(state.pending_question), state.game
        answer = read_answer(action)
        given = GamemasterReply(answer or DONT_KNOW, fallback=answer is None, raw=action)
        oracle = ORACLE.answer(question, game.secret, game.history).answer
        state.game, info = play_turn(game, str(state.pending_action), _GivenAnswer(given))
        state.pending_action = state.pending_question = None
        agrees = None
        if oracle != DONT_KNOW:  # a question the oracle decides: the answer is checked
            agrees = given.answer == oracle
            state.judged += 1
            state.agreed += agrees
        info.update(answer=given.answer, oracle=oracle, agrees=agrees)  # the role's own answer
        return StepResult(state, 0.0, state.game.done, info)

    @hookimpl
    def role_rewards(self, state: DuelState) -> dict[str, float]:
        agreement = state.agreed / state.judged if state.judged else 0.0
        return {QUESTIONER: state.game.reward, GAMEMASTER: agreement}
