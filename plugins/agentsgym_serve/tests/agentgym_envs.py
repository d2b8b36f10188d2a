"""Envs the AgentGym shape tests serve by class path (``agentgym_envs:OfferingEnv``)."""

from __future__ import annotations

from agentsgym_classical import GuessState, GuessTheNumberEnv


class OfferingEnv(GuessTheNumberEnv):
    """GuessTheNumber that declares its moves, as ALFWorld's server lists
    ``available_actions``: the numbers not guessed yet, written bare (the server puts
    them into ``[...]``, GuessTheNumber's ``agentgym_action_format``)."""

    def agentgym_available_actions(self, state: GuessState) -> list[str]:
        low, high = self.config.low, self.config.high
        return [str(n) for n in range(low, high + 1) if n not in state.guesses]


class UnformattedEnv(GuessTheNumberEnv):
    """GuessTheNumber without an AgentGym action format: actions reach it as sent."""

    agentgym_action_format = None
