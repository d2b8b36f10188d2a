"""The embedded, seed-generated arithmetic word problems (no download needed)."""

from agentsgym_classical.arithmetic.generator import WordProblem, generate, generate_split
from agentsgym_classical.arithmetic.solver import solve_text

__all__ = ["WordProblem", "generate", "generate_split", "solve_text"]
