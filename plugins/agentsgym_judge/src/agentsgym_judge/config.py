"""Where a judge is and how hard it is tried: :class:`JudgeConfig`.

An env keeps one in its ``env_config`` (``judge``), so a user points a judged env at
their own server: ``--env-config judge='{"base_url": "http://localhost:8001/v1"}'``.
It holds no secret: the API key is read from an environment variable (``api_key_env``)
or the URL's userinfo, so dataset rows and run manifests never carry it.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator


class JudgeConfig(BaseModel):
    """The judge's server, sampling and limits (every field has a default)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str = Field(
        default="http://localhost:8000/v1",
        description="the OpenAI-compatible API root of the judge's server, with /v1",
    )
    model: str | None = Field(
        default=None, description="the served model name (default: the server's only model)"
    )
    api_key_env: str | None = Field(
        default=None,
        description="the environment variable holding the server's API key (default: the "
        "URL's userinfo, else $OPENAI_API_KEY)",
    )
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    max_tokens: int = Field(default=256, ge=1, description="the longest reply of the judge")
    extra_body: dict[str, Any] = Field(
        default_factory=dict, description="extra JSON fields of every request (vLLM's top_k...)"
    )
    timeout_seconds: float = Field(default=30.0, gt=0.0, description="one request attempt")
    max_retries: int = Field(
        default=2, ge=0, description="retries of a request that failed transiently (5xx, timeout)"
    )
    retry_backoff_seconds: float = Field(
        default=0.5, ge=0.0, description="the wait before the first retry, doubling up to 8 s"
    )
    deadline_seconds: float = Field(
        default=120.0,
        gt=0.0,
        description="one judgement, waits for a free slot and retries included; keep it "
        "under the env's hook_timeout_seconds",
    )
    max_concurrency: int = Field(default=8, ge=1, description="requests in flight at most")
    cache_size: int = Field(
        default=10_000, ge=0, description="judgements kept by prompt (0: ask every time)"
    )

    @model_validator(mode="after")
    def _room_for_one_attempt(self) -> JudgeConfig:
        if self.deadline_seconds < self.timeout_seconds:
            raise ValueError(
                f"deadline_seconds ({self.deadline_seconds:g}) leaves no room for one request "
                f"of timeout_seconds ({self.timeout_seconds:g}); raise it or lower "
                "timeout_seconds"
            )
        return self
