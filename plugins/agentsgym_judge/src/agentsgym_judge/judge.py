"""Judge: a score for an answer, asked of a model behind an OpenAI-compatible server.

::

    judge = Judge(JudgeConfig(base_url="http://localhost:8001/v1"))
    verdict = judge.score(question=q, answer=action, reference=ref)   # plain hooks
    verdict = await judge.ascore(question=q, answer=action, reference=ref)  # async hooks
    verdict.score, verdict.record()   # the reward, and what the step info keeps

The prompt is a :class:`~agentsgym_judge.templates.PromptTemplate` filled with the
call's keyword arguments; the reply becomes a score by a parser
(:mod:`agentsgym_judge.parsers`). The request goes through the core's ``openai`` agent
(its HTTP client, and its retries of transient failures by the core's retry policy).
Under load:

* **bounded**: at most ``max_concurrency`` requests in flight per judge, from any
  thread or event loop (:mod:`agentsgym_judge.limit`);
* **cached**: the same prompt is answered once; a prompt asked again, or asked while
  its first request is in flight, gets that answer (:mod:`agentsgym_judge.cache`);
* **failing loudly**: a server that keeps failing, a judgement past
  ``deadline_seconds`` or a reply the parser cannot read raises
  :class:`~agentsgym.errors.RewardUnavailableError`. Raised from an env hook, it
  fails the episode as unscored: trainers leave it out, run summaries count it, and
  it is never a silent 0.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import threading
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from agentsgym import RewardTerm, make_agent
from agentsgym.errors import AgentError, RewardUnavailableError
from agentsgym.runtime import run_sync
from agentsgym_judge.cache import SharedAnswers
from agentsgym_judge.config import JudgeConfig
from agentsgym_judge.limit import InFlightLimit
from agentsgym_judge.parsers import Parser, parser_name, yes_no
from agentsgym_judge.templates import CORRECTNESS_TEMPLATE, PromptTemplate

INFO_KEY = "judge"
"""The step info key of a judgement's record (``agentsgym view`` shows it)."""


@dataclass(frozen=True)
class Verdict:
    """One judgement: the score, and what it was given and answered.

    ``reused``: the answer of an earlier (or concurrent) request with the same prompt.
    """

    score: float
    prompt: str
    reply: str
    model: str | None
    reused: bool = False

    def record(self) -> dict[str, Any]:
        """The judgement as the step info keeps it, under :data:`INFO_KEY`."""
        return asdict(self)

    def term(self, name: str = INFO_KEY) -> RewardTerm:
        """The score as a ``reward_shaping`` term."""
        return RewardTerm(name, self.score)


@dataclass
class JudgeStats:
    """What a judge did so far: requests sent (``asked``; retries not counted),
    judgements answered from the cache or a request in flight (``reused``), judgements
    that failed; and now: requests in flight, judgements waiting for a free slot."""

    asked: int = 0
    reused: int = 0
    failed: int = 0
    in_flight: int = 0
    waiting: int = 0


class Judge:
    """Scores answers with a judge model (see the module docstring).

    :param config: the server, sampling and limits (a :class:`JudgeConfig` or its
        fields as a dict; default: every default).
    :param template: the prompt, a template string or a :class:`PromptTemplate`;
        default: is ``{answer}`` correct, given ``{question}`` and ``{reference}``.
    :param parser: the reply as a score (default: :func:`~agentsgym_judge.parsers.yes_no`).
    """

    def __init__(
        self,
        config: JudgeConfig | Mapping[str, Any] | None = None,
        *,
        template: str | PromptTemplate = CORRECTNESS_TEMPLATE,
        parser: Parser = yes_no,
    ) -> None:
        self.config = (
            config if isinstance(config, JudgeConfig) else JudgeConfig.model_validate(config or {})
        )
        self.template = (
            template if isinstance(template, PromptTemplate) else PromptTemplate(template)
        )
        self.parser = parser
        config = self.config
        self._agent = make_agent(
            "openai",
            base_url=config.base_url,
            model=config.model,
            api_key=_api_key(config.api_key_env),
            temperature=config.temperature,
            max_tokens=config.max_tokens,
            timeout=config.timeout_seconds,
            max_retries=config.max_retries,
            backoff=config.retry_backoff_seconds,
            max_concurrency=config.max_concurrency,
            extra_body=config.extra_body,
            token_ids=False,
        )
        self._limit = InFlightLimit(config.max_concurrency)
        self._answers: SharedAnswers[tuple[str, float]] = SharedAnswers(config.cache_size)
        self._stats_lock = threading.Lock()
        self._stats = JudgeStats()

    @property
    def base_url(self) -> str:
        """The server's API root (without credentials)."""
        return str(self._agent.base_url)

    @property
    def stats(self) -> JudgeStats:
        """The counts so far, and the requests in flight and waiting now."""
        with self._stats_lock:
            counts = asdict(self._stats)
        counts.update(in_flight=self._limit.in_flight, waiting=self._limit.waiting)
        return JudgeStats(**counts)

    def score(self, **values: Any) -> Verdict:
        """:meth:`ascore` from plain code (a plain hook, in its worker thread)."""
        return run_sync(self.ascore(**values))

    async def ascore(self, **values: Any) -> Verdict:
        """The verdict on ``values`` (the template's fields).

        :raises RewardUnavailableError: the server kept failing, no verdict came within
            ``deadline_seconds``, or the reply holds no score.
        :raises JudgeTemplateError: a field of the template is missing from ``values``.
        """
        messages = self.template.render(values)
        key = json.dumps(messages, ensure_ascii=False)
        try:
            (reply, score), reused = await asyncio.wait_for(
                self._answers.get(key, lambda: self._ask(messages)), self.config.deadline_seconds
            )
        except asyncio.TimeoutError:
            self._count("failed")
            raise RewardUnavailableError(
                f"the judge at {self.base_url} gave no verdict within deadline_seconds="
                f"{self.config.deadline_seconds:g} ({self._limit.in_flight} of "
                f"{self._limit.limit} requests in flight); raise the judge's "
                "deadline_seconds or max_concurrency, or give it a faster server"
            ) from None
        except RewardUnavailableError:
            self._count("failed")
            raise
        if reused:
            self._count("reused")
        return Verdict(score, str(messages[-1]["content"]), reply, self._agent.model, reused)

    async def _ask(self, messages: list[Any]) -> tuple[str, float]:
        """One request to the server (within the in-flight limit), its reply read."""
        async with self._limit:
            self._count("asked")
            try:
                action, _ = await self._agent.get_action(messages, None)
            except AgentError as exc:
                raise RewardUnavailableError(f"the judge failed: {exc}") from None
        return action.text, self._read(action.text, action.truncated)

    def _read(self, reply: str, truncated: bool) -> float:
        try:
            score = self.parser(reply)
        except (ValueError, TypeError) as exc:
            reason = str(exc)
        else:
            if isinstance(score, (int, float)) and math.isfinite(score):
                return float(score)
            reason = f"it returned {score!r}, not a finite number"
        cut = (
            f" The reply was cut at max_tokens={self.config.max_tokens}: raise it."
            if truncated
            else " Make the template ask for the form the parser reads."
        )
        raise RewardUnavailableError(
            f"the judge's reply holds no score for {parser_name(self.parser)} ({reason}): "
            f"{reply[:300]!r}.{cut}"
        )

    def _count(self, what: str) -> None:
        with self._stats_lock:
            setattr(self._stats, what, getattr(self._stats, what) + 1)

    async def aclose(self) -> None:
        """Close the judge's connections of the current event loop."""
        await self._agent.aclose()

    def close(self) -> None:
        """Close every connection the judge opened (from plain code)."""
        self._agent.close()


def _api_key(variable: str | None) -> str | None:
    """The key in ``variable`` (``None``: the openai agent's own default)."""
    if variable is None:
        return None
    key = os.environ.get(variable)
    if not key:
        raise AgentError(
            f"the judge's api_key_env names ${variable}, which is not set: export the judge "
            "server's API key there, or leave api_key_env unset for a server without one"
        )
    return key
