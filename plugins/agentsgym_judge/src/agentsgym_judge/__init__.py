"""agentsgym-judge: rewards from a judge model behind an OpenAI-compatible server.

::

    from agentsgym_judge import Judge, JudgeConfig

    judge = Judge(JudgeConfig(base_url="http://localhost:8001/v1"))
    verdict = await judge.ascore(question=q, answer=action, reference=ref)

See :mod:`agentsgym_judge.judge` and docs/plugin-authors.md ("Rewards from a judge model").
"""

from __future__ import annotations

from agentsgym_judge.config import JudgeConfig
from agentsgym_judge.errors import JudgeTemplateError
from agentsgym_judge.judge import INFO_KEY, Judge, JudgeStats, Verdict
from agentsgym_judge.parsers import Parser, number, yes_no
from agentsgym_judge.templates import CORRECTNESS_TEMPLATE, SCORE_TEMPLATE, PromptTemplate

__all__ = [
    "CORRECTNESS_TEMPLATE",
    "INFO_KEY",
    "SCORE_TEMPLATE",
    "Judge",
    "JudgeConfig",
    "JudgeStats",
    "JudgeTemplateError",
    "Parser",
    "PromptTemplate",
    "Verdict",
    "number",
    "yes_no",
]
