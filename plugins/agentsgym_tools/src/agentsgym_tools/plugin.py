"""The agentsgym plugin of agentsgym-tools: the example tool env and its solver.

Published under the ``agentsgym`` entry-point group as ``tools``.
"""

from __future__ import annotations

from agentsgym import RegisterAgent, RegisterEnv, hookimpl

SOLVER = "tools/calculator-solver"


@hookimpl
def register_envs(register: RegisterEnv) -> None:
    register(
        "tools/Calculator-v0",
        "agentsgym_tools.calculator:CalculatorEnv",
        description="a * b + c with multiply and add tools, answered as \\boxed{N} (example)",
        default_agent=SOLVER,
    )


@hookimpl
def register_agents(register: RegisterAgent) -> None:
    register(
        SOLVER,
        "agentsgym_tools.calculator:calculator_solver",
        description="solves tools/Calculator-v0 with its tools (options: tokenizer, token_out)",
    )
