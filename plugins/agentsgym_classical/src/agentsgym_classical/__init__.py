"""agentsgym-classical: GSM8K, MATH, AIME and multiple-choice envs for agentsgym.

Answers are checked with math-verify in worker processes under a hard deadline; an
embedded family of generated word problems lets everything run offline. The envs
register through the ``agentsgym`` entry-point group (see :mod:`.plugin`).
"""

from agentsgym_classical.guess_number import (
    BisectAgent,
    GuessState,
    GuessTheNumberConfig,
    GuessTheNumberEnv,
)

__all__ = ["BisectAgent", "GuessState", "GuessTheNumberConfig", "GuessTheNumberEnv"]
__version__ = "0.1.0"
