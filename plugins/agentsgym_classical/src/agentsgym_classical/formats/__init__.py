"""Benchmark formats: GSM8K, MATH, AIME and multiple choice (AQuA style)."""

from agentsgym_classical.formats.aime import AIMEFormat
from agentsgym_classical.formats.base import BenchmarkFormat, RowReader
from agentsgym_classical.formats.choice import MultipleChoiceFormat
from agentsgym_classical.formats.gsm8k import GSM8KFormat
from agentsgym_classical.formats.hendrycks_math import MathFormat, last_boxed

__all__ = [
    "AIMEFormat",
    "BenchmarkFormat",
    "GSM8KFormat",
    "MathFormat",
    "MultipleChoiceFormat",
    "RowReader",
    "last_boxed",
]
