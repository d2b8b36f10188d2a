"""CallRecord: what the gateway keeps of one call of an agent program."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Endpoint = Literal["chat", "completions", "responses"]
"""The route a program called (a Responses API call is served as a chat call)."""
TokenSource = Literal["server", "retokenized"]
"""``server``: the backend reported the prompt ids it conditioned on and the ids it
sampled; ``retokenized``: text only (a backend without ``return_token_ids``), so the
episode's tokens are the env tokenizer's rendering of the text."""


@dataclass
class CallRecord:
    """One call: the program's request as sent (never its headers), the exact ids the
    backend conditioned on and sampled, and what it answered.

    ``index`` orders a session's calls by the time their answers arrived; parallel
    calls are told apart by it, never by their content.
    """

    index: int
    endpoint: Endpoint
    messages: list[dict[str, Any]] = field(default_factory=list)
    prompt: str | list[int] | None = None
    tools: list[dict[str, Any]] | None = None
    text: str = ""
    tool_calls: list[dict[str, Any]] | None = None
    finish_reason: str | None = None
    prompt_token_ids: list[int] | None = None
    completion_token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    policy_version: int | None = None
    """The version of the weights that answered (the backend's top-level
    ``policy_version``, as agentsgym's loopback server and an agent backend send it; the
    oldest one when its tokens had several); ``None`` when the backend did not say."""
    policy_versions: list[int] | None = None
    """One version per completion id, for a streamed answer whose chunks came from
    different weights (an engine updated in place mid-answer); ``None`` otherwise."""
    status: int = 200
    error: str | None = None

    @property
    def token_source(self) -> TokenSource:
        has_ids = self.prompt_token_ids is not None and self.completion_token_ids is not None
        return "server" if has_ids else "retokenized"

    @property
    def ok(self) -> bool:
        return self.status == 200 and self.error is None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-friendly copy, with ``token_source``."""
        return {**asdict(self), "token_source": self.token_source}
