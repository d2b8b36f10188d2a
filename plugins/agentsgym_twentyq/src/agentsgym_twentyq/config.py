"""TwentyQuestionsConfig: the env_config keys of the TwentyQuestions envs.

Everything here is constant across the tasks of one env instance; the secret word
and the seed arrive in ``task_data``.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from agentsgym import EnvConfig

RULES_GAMEMASTER = "rules"
# TextArena's default max_turns: twenty questions and a final guess.
DEFAULT_MAX_TURNS = 21


class TwentyQuestionsConfig(EnvConfig):
    """env_config of ``twentyq/TwentyQuestions-v0`` and its ``-hardcore`` variant."""

    max_steps_per_episode: int = Field(
        default=DEFAULT_MAX_TURNS,
        ge=1,
        description="turns per episode, questions plus the final guess; TextArena's "
        "max_turns (its default 21 is twenty questions and a guess)",
    )
    hardcore: bool = Field(
        default=False, description="use TextArena's hardcore word list instead of the basic one"
    )
    gamemaster: str = Field(
        default=RULES_GAMEMASTER,
        min_length=1,
        description="'rules' (offline, answers from the word's spelling and category) or "
        "the name of a registered agentsgym agent, e.g. 'openai'",
    )
    gamemaster_options: dict[str, Any] = Field(
        default_factory=dict,
        description="keyword options for the gamemaster agent, e.g. {'base_url': "
        "'http://localhost:8000/v1', 'model': '...'}; keep API keys in the environment",
    )
    show_history: bool = Field(
        default=True,
        description="repeat the numbered question/answer history in every turn, as "
        "TextArena's observation does (off: only the latest answer, fewer tokens)",
    )

    @model_validator(mode="after")
    def _rules_take_no_options(self) -> TwentyQuestionsConfig:
        if self.gamemaster == RULES_GAMEMASTER and self.gamemaster_options:
            raise ValueError(
                "gamemaster_options are given but gamemaster is 'rules', which takes none; "
                "set gamemaster to an agent name (e.g. 'openai') or drop the options"
            )
        return self
