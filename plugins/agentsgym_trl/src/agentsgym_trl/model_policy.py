"""ModelPolicy: a local causal LM answering an OpenAI-compatible loopback server.

agentsgym-serve's ``OpenAICompatServer`` (``agentsgym_serve.model_server``) answers
with a *policy*; this one generates with a transformers model through
:class:`~agentsgym_trl.TransformersAgent`, so tests and offline demos can play the
server path (the ``openai`` agent against a vLLM-like server) with the tiny model or
a real one::

    from agentsgym_serve.model_server import OpenAICompatServer
    from agentsgym_trl import ModelPolicy

    with OpenAICompatServer(ModelPolicy("tiny"), models=["tiny"]) as server:
        ...
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from agentsgym import Messages
from agentsgym_trl.transformers_agent import TransformersAgent, load_model


@dataclass
class PolicyReply:
    """What the server turns into a completion (the fields of its ``Reply``)."""

    text: str
    token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    prompt_token_ids: list[int] | None = None
    finish_reason: str = "stop"


class ModelPolicy:
    """A local causal LM behind the API (default: the tiny random model).

    Chat requests are rendered with the tokenizer's chat template; completion
    requests with a token-id prompt generate from those ids. Sampling follows the
    request's ``temperature``, ``top_p`` and ``max_tokens``.
    """

    def __init__(self, model: Any = "tiny", tokenizer: Any = None, *, seed: int | None = 0) -> None:
        self.model, self.tokenizer = load_model(model, tokenizer)
        self.seed = seed
        self._agents: dict[tuple[float, float, int], Any] = {}
        self._lock = threading.Lock()

    def _agent(self, params: dict[str, Any]) -> Any:
        key = (
            float(params.get("temperature", 1.0) if params.get("temperature") is not None else 1.0),
            float(params.get("top_p") or 1.0),
            int(params.get("max_tokens") or params.get("max_completion_tokens") or 16),
        )
        with self._lock:
            if key not in self._agents:
                self._agents[key] = TransformersAgent(
                    self.model,
                    tokenizer=self.tokenizer,
                    temperature=key[0],
                    top_p=key[1],
                    max_new_tokens=key[2],
                    seed=self.seed,
                )
            return self._agents[key]

    def chat(self, messages: Messages, params: dict[str, Any]) -> PolicyReply:
        agent = self._agent(params)
        prompt = agent.render_messages(messages, params.get("tools"))
        return self._reply(agent, prompt)

    def complete(self, prompt: str | list[int], params: dict[str, Any]) -> PolicyReply:
        agent = self._agent(params)
        ids = (
            prompt
            if isinstance(prompt, list)
            else list(self.tokenizer(prompt, add_special_tokens=False)["input_ids"])
        )
        return self._reply(agent, list(ids))

    @staticmethod
    def _reply(agent: Any, prompt: list[int]) -> PolicyReply:
        generation = agent.generate([prompt])[0]
        action = agent.to_action(generation)
        return PolicyReply(
            action.text,
            generation.token_ids,
            generation.logprobs,
            prompt,
            generation.finish_reason,
        )

    def close(self) -> None:
        for agent in self._agents.values():
            agent.close()
