"""TwentyQuestionsEnv: TextArena's TwentyQuestions as an agentsgym env.

``task_data`` is ``{"solution": word, "seed": int}`` (``category`` optional, for words
outside TextArena's lists). Reward 1.0 for a correct guess, 0.0 otherwise; a guess
ends the episode, and so does running out of turns (reward 0.0). A reply that asks
no question and makes no guess (a statement, or a reply cut at the agent's length
limit before its question) uses up its turn without asking the gamemaster; the next
message says what was missing (step info ``kind: "none"``, with ``cut_off`` when the
reply was cut).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from agentsgym import AgentAction, MultistepEnv, StepResult, hookimpl
from agentsgym_twentyq.config import TwentyQuestionsConfig
from agentsgym_twentyq.game import GameState, new_game, pick_secret, play_turn
from agentsgym_twentyq.gamemaster import Gamemaster, RulesGamemaster
from agentsgym_twentyq.gamemaster_factory import as_gamemaster, build_gamemaster
from agentsgym_twentyq.prompts import rules_prompt, turn_prompt
from agentsgym_twentyq.splits import WordListTasks

logger = logging.getLogger(__name__)

SECRET_OPTION_KEYS = frozenset({"api_key"})


class TwentyQuestionsEnv(WordListTasks, MultistepEnv):
    """Find the secret word by asking yes/no questions, then guess it in brackets.

    :param gamemaster: a :class:`~agentsgym_twentyq.gamemaster.Gamemaster`, or any
        agent with ``get_action(messages, state)``, used instead of the one
        ``env_config`` names (tests, custom gamemasters that are not registered).
    """

    config_class = TwentyQuestionsConfig
    config: TwentyQuestionsConfig

    def __init__(
        self,
        tokenizer: Any = None,
        env_config: dict[str, Any] | None = None,
        *,
        plugins: Iterable[object] = (),
        gamemaster: Any = None,
    ) -> None:
        super().__init__(tokenizer, env_config, plugins=plugins)
        self.gamemaster: Gamemaster = (
            as_gamemaster(gamemaster) if gamemaster is not None else build_gamemaster(self.config)
        )

    def use_gamemaster(self, gamemaster: Any) -> None:
        """Swap the gamemaster (a Gamemaster, or an agent to wrap) for later episodes."""
        self.gamemaster = as_gamemaster(gamemaster)

    def close(self) -> None:
        """Close the gamemaster's model client, if it has one (commands call this when a
        run ends; the openai agent's HTTP session would be left open otherwise)."""
        agent = getattr(self.gamemaster, "agent", None)
        if callable(close := getattr(agent, "close", None)):
            close()

    @property
    def run_hooks_inline(self) -> bool:
        """Whether the runner may call this env's hooks on its event loop.

        With the rules gamemaster a turn is pure computation on the state (tens of
        microseconds), which costs less than handing it to a worker thread. A
        gamemaster that asks a model waits on the network, so its turns run in worker
        threads, where they never stall other episodes.
        """
        return isinstance(self.gamemaster, RulesGamemaster)

    # ------------------------------------------------------------------ hooks
    @hookimpl
    def initialize_episode(self, session_id: str, task_data: dict[str, Any]) -> GameState:
        secret = pick_secret(task_data, self.level)
        max_turns = self.config.max_steps_per_episode
        return new_game(secret, self.level, max_turns, rules_prompt(secret, self.level, max_turns))

    @hookimpl
    def format_prompt(self, state: GameState, step: int) -> str:
        max_turns = self.config.max_steps_per_episode
        if step == 0:
            return rules_prompt(state.secret, state.level, max_turns)
        return turn_prompt(
            state.last_answer or "",
            state.history,
            state.turns_taken,
            max_turns,
            show_history=self.config.show_history,
        )

    @hookimpl
    def step_episode(self, state: GameState, action: str, reply: AgentAction) -> StepResult:
        next_state, info = play_turn(state, action, self.gamemaster, cut_off=reply.truncated)
        reward = next_state.reward if next_state.done else 0.0
        return StepResult(next_state, reward, next_state.done, info)

    # ------------------------------------------------------------------ datasets
    def row_env_config(self) -> dict[str, Any]:
        """The rows' env_config, with any ``api_key`` of gamemaster_options left out.

        Rows are written to files and shared; a key belongs in the environment
        (``OPENAI_API_KEY``), not in a dataset.
        """
        config = super().row_env_config()
        options = config.get("gamemaster_options")
        if options and SECRET_OPTION_KEYS & set(options):
            logger.warning(
                "leaving %s out of the dataset rows' gamemaster_options",
                ", ".join(sorted(SECRET_OPTION_KEYS & set(options))),
            )
            config["gamemaster_options"] = {
                k: v for k, v in options.items() if k not in SECRET_OPTION_KEYS
            }
        return config
