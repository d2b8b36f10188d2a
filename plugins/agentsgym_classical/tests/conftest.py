"""Fixtures of the agentsgym-classical tests: tiny GSM8K, MATH, AIME and multiple-choice
benchmarks, written to .jsonl/.json/.parquet files in tmp_path.

Shared through fixtures rather than an importable helper module: the workspace runs
pytest in importlib mode, where test folders are not on sys.path.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

GSM8K_ROWS = [
    {
        "question": "Natalia sold clips to 48 of her friends in April, and then she sold half as "
        "many clips in May. How many clips did Natalia sell altogether in April and May?",
        "answer": "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\nNatalia sold 48+24 = "
        "<<48+24=72>>72 clips altogether in April and May.\n#### 72",
    },
    {
        "question": "A shop sold 1,200 pens on Monday and 34 on Tuesday. How many in total?",
        "answer": "1200 + 34 = <<1200+34=1234>>1234\n#### 1,234",
    },
]
MATH_ROWS = [
    {
        "problem": "What is $\\frac{1}{2} + \\frac{1}{4}$?",
        "solution": "We have $\\frac{1}{2} + \\frac{1}{4} = \\boxed{\\frac{3}{4}}$.",
        "answer": "\\frac{3}{4}",
    },
    {  # original MATH: no answer column, the reference is the solution's last \boxed{}
        "problem": "Compute $\\sin 60^\\circ$.",
        "solution": "It is $\\boxed{\\frac{\\sqrt{3}}{2}}$.",
    },
]
AIME_ROWS = [
    {"problem": "Find the remainder when $2^{10}$ is divided by $1000$.", "answer": "024"},
    {"problem": "How many positive divisors does 12 have?", "answer": 6},
]
CHOICE_ROWS = [
    {
        "question": "A car travels 60 km in 1.5 hours. What is its average speed in km/h?",
        "options": ["A)30", "B)40", "C)45", "D)50", "E)90"],
        "rationale": "60 / 1.5 = 40",
        "correct": "B",
    },
    {
        "question": "Which number is prime?",
        "options": ["4", "6", "7", "9"],
        "correct": 2,
    },
]


def write_rows(path: Path, rows: list[dict[str, Any]]) -> Path:
    """Rows as .jsonl (one object per line), .json (a list) or .parquet, by suffix."""
    if path.suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(rows), path)
    elif path.suffix == ".json":
        path.write_text(json.dumps(rows))
    else:
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


@pytest.fixture
def benchmark_rows() -> dict[str, list[dict[str, Any]]]:
    """Rows of each format, by name: gsm8k, math, aime, choice."""
    return {"gsm8k": GSM8K_ROWS, "math": MATH_ROWS, "aime": AIME_ROWS, "choice": CHOICE_ROWS}


@pytest.fixture
def rows_file(tmp_path: Path) -> Callable[[str, list[dict[str, Any]]], str]:
    """``rows_file("gsm8k.jsonl", rows)`` -> path of a file holding ``rows``."""

    def build(name: str, rows: list[dict[str, Any]]) -> str:
        return str(write_rows(tmp_path / name, rows))

    return build
