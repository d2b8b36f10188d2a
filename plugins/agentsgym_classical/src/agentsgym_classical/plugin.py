"""The agentsgym plugin of agentsgym-classical: its envs, its scripted solver, and the
example env GuessTheNumber with its bisection agent.

Published under the ``agentsgym`` entry-point group as ``classical``.
"""

from __future__ import annotations

from agentsgym import RegisterAgent, RegisterEnv, hookimpl

SOLVER = "classical/arithmetic-solver"


@hookimpl
def register_envs(register: RegisterEnv) -> None:
    register(
        "agentsgym/GuessTheNumber-v0",
        "agentsgym_classical.guess_number:GuessTheNumberEnv",
        description="Find a hidden integer in [1, 100] from higher/lower hints (example env)",
        default_agent="agentsgym/bisect",
    )
    envs = "agentsgym_classical.envs"
    register(
        "classical/GSM8K-v0",
        f"{envs}:GSM8KEnv",
        description="GSM8K-format math word problems (question, answer '#### N'); "
        "HF dataset or local file via env_config dataset",
        default_agent=SOLVER,
    )
    register(
        "classical/MATH-v0",
        f"{envs}:MathEnv",
        description="MATH / MATH-500 format (problem, solution, answer), LaTeX answers "
        "checked with math-verify",
        default_agent=SOLVER,
    )
    register(
        "classical/AIME-v0",
        f"{envs}:AIMEEnv",
        description="AIME format: problem and an integer answer 0-999",
        default_agent=SOLVER,
    )
    register(
        "classical/MultipleChoice-v0",
        f"{envs}:MultipleChoiceEnv",
        description="multiple choice, AQuA-RAT style (question, options A-E, correct letter)",
        default_agent=SOLVER,
    )
    register(
        "classical/Arithmetic-v0",
        f"{envs}:ArithmeticEnv",
        description="embedded generated multi-step arithmetic word problems (offline, seeded)",
        default_agent=SOLVER,
    )
    register(
        "classical/QuickArithmetic-v0",
        "agentsgym_classical.quick:QuickArithmeticEnv",
        description="one operation on small numbers, answered with the number only "
        "(a format-following task a small model learns on a CPU)",
    )
    register(
        "classical/TicTacToe-v0",
        "agentsgym_classical.tictactoe:TicTacToeEnv",
        description="tic-tac-toe for two agents, roles x and o (o plays random moves unless "
        "--agent o=NAME; --agent NAME for self-play)",
        default_agent="classical/tictactoe-heuristic",
    )


@hookimpl
def register_agents(register: RegisterAgent) -> None:
    register(
        SOLVER,
        "agentsgym_classical.agent:ArithmeticSolverAgent",
        description="scripted solver of the embedded arithmetic problems, in every classical "
        "format (options: mistake_rate, seed)",
    )
    register(
        "agentsgym/bisect",
        "agentsgym_classical.guess_number:BisectAgent",
        description="plays GuessTheNumber by bisection",
    )
    register(
        "classical/tictactoe-random",
        "agentsgym_classical.tictactoe_agents:RandomMoveAgent",
        description="plays TicTacToe with random legal moves (option: seed)",
    )
    register(
        "classical/tictactoe-heuristic",
        "agentsgym_classical.tictactoe_agents:HeuristicAgent",
        description="plays TicTacToe: win, block, centre, corner (options: randomness, seed)",
    )
