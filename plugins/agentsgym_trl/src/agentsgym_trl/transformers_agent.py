"""A local causal LM as an agent: token-in/token-out, micro-batched across episodes.

The runner plays episodes in worker threads and calls ``get_action`` from each of
them with the episode's exact token ids (``prompt_token_ids``). Requests go to one
generation thread, which collects what arrives within ``batch_window_ms`` (up to
``batch_size``), left-pads the prompts, calls ``model.generate`` once, and hands each
caller its own sampled ids and their log-probabilities. The ids go into the
trajectory verbatim, including the stop token the model sampled, so nothing is ever
decoded and re-encoded.

Log-probabilities (``logprobs="sampling"``, the default) are those of the
distribution the token was actually drawn from: the model's logits after the
temperature / top-k / top-p processing of this agent. ``logprobs="model"`` gives
them under the raw model distribution (temperature 1, no truncation) instead, which
is what vLLM reports by default.

Without ``prompt_token_ids`` (an env that calls an agent itself, e.g. as a game
master) the messages are rendered with the tokenizer's chat template.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Literal

from agentsgym import AgentAction, Messages
from agentsgym.errors import AgentError

logger = logging.getLogger(__name__)

LogprobsMode = Literal["sampling", "model"]


@dataclass
class Generation:
    """What one prompt produced: sampled ids (with the stop token), their logprobs."""

    token_ids: list[int]
    logprobs: list[float]
    finish_reason: Literal["stop", "length"]


@dataclass
class _Request:
    prompt_ids: list[int]
    future: Future = field(default_factory=Future)


_STOP = object()


class TransformersAgent:
    """A Hugging Face causal LM that generates from the episode's own token ids.

    :param model: a local model folder, a registered model name (``"smollm2"``,
        ``agentsgym list-models``), a loaded ``PreTrainedModel`` (e.g. the model
        a trainer is updating, shared without a copy), or ``"tiny"`` for a tiny
        random model on the bundled tokenizer (tests, demos).
    :param tokenizer: a tokenizer or its path; default: the model folder's (the
        bundled one for ``"tiny"``). It must be the env's tokenizer.
    :param temperature: sampling temperature; ``0`` means greedy decoding.
    :param top_p: nucleus sampling threshold (1.0: off).
    :param top_k: keep only the k most likely tokens (0: off).
    :param max_new_tokens: generation limit per reply.
    :param seed: makes sampling reproducible for a given batch composition (each
        generated batch draws from its own generator state, so the process-wide
        torch RNG is left alone). ``None`` samples from the global RNG.
    :param batch_size: most prompts generated together.
    :param batch_window_ms: how long the generation thread waits for more prompts
        after the first one arrives.
    :param stop_token_ids: ids that end a reply; default: the model's and
        tokenizer's EOS ids plus the chat template's end-of-turn token.
    :param logprobs: ``"sampling"`` or ``"model"`` (see the module docstring).
    :param device: where to load a model given by path (default: CUDA when
        available, else CPU).
    :param dtype: torch dtype name for loading a model by path (``"bfloat16"``).
    :param generation_kwargs: extra keyword arguments for ``model.generate``.
    """

    wants_prompt_token_ids = True

    def __init__(
        self,
        model: Any = None,
        *,
        tokenizer: Any = None,
        temperature: float = 1.0,
        top_p: float = 1.0,
        top_k: int = 0,
        max_new_tokens: int = 256,
        seed: int | None = None,
        batch_size: int = 8,
        batch_window_ms: float = 5.0,
        stop_token_ids: Sequence[int] | None = None,
        logprobs: LogprobsMode = "sampling",
        device: str | None = None,
        dtype: str | None = None,
        generation_kwargs: dict[str, Any] | None = None,
    ) -> None:
        if model is None:
            raise AgentError(
                "the transformers agent needs a model: a local folder (model=PATH), a loaded "
                "PreTrainedModel, or 'tiny' for a tiny random model"
            )
        if temperature < 0:
            raise AgentError(f"temperature must be >= 0, got {temperature}")
        if not 0 < top_p <= 1:
            raise AgentError(f"top_p must be in (0, 1], got {top_p}")
        if max_new_tokens < 1 or batch_size < 1:
            raise AgentError("max_new_tokens and batch_size must be at least 1")
        if logprobs not in ("sampling", "model"):
            raise AgentError(f"logprobs must be 'sampling' or 'model', got {logprobs!r}")
        self.model, self.tokenizer = load_model(model, tokenizer, device=device, dtype=dtype)
        self.temperature = float(temperature)
        self.top_p = float(top_p)
        self.top_k = int(top_k)
        self.max_new_tokens = int(max_new_tokens)
        self.seed = seed
        self.batch_size = int(batch_size)
        self.batch_window = float(batch_window_ms) / 1000.0
        self.logprobs_mode: LogprobsMode = logprobs
        self.generation_kwargs = dict(generation_kwargs or {})
        self.stop_token_ids = (
            sorted({int(i) for i in stop_token_ids})
            if stop_token_ids is not None
            else _default_stop_ids(self.model, self.tokenizer)
        )
        if not self.stop_token_ids:
            raise AgentError(
                "no stop token: the model and tokenizer define no EOS id; pass stop_token_ids=[...]"
            )
        pad = self.tokenizer.pad_token_id
        self.pad_token_id = int(pad if pad is not None else self.stop_token_ids[0])
        self.vocab_size = int(self.model.get_input_embeddings().weight.shape[0])
        self._queue: queue.Queue[Any] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._thread_lock = threading.Lock()
        self._batches = 0
        self._chat: Any = None
        self.stats = {"requests": 0, "batches": 0, "generated_tokens": 0}

    # ------------------------------------------------------------------ agent API
    def get_action(
        self,
        messages: Messages,
        agent_state: Any,
        *,
        prompt_token_ids: list[int] | None = None,
    ) -> tuple[AgentAction, Any]:
        """Generate a reply to the episode so far; returns the sampled ids verbatim."""
        if prompt_token_ids is None:
            prompt_token_ids = self.render_messages(messages)
        generation = self.generate([list(prompt_token_ids)])[0]
        return self.to_action(generation), agent_state

    def generate(self, prompts: Sequence[Sequence[int]]) -> list[Generation]:
        """Generate for several prompts through the batching thread (thread-safe)."""
        for prompt in prompts:
            self._check_prompt(prompt)
        self._ensure_thread()
        requests = [_Request(list(p)) for p in prompts]
        for request in requests:
            self._queue.put(request)
        return [r.future.result() for r in requests]

    def close(self) -> None:
        """Stop the generation thread (it restarts on the next call). Requests still
        waiting are refused, not generated: after an interrupt nobody awaits them, and
        generating them all could outlast the join, leaving torch running at exit."""
        with self._thread_lock:
            thread, self._thread = self._thread, None
            if thread is not None:
                self._refuse_waiting()
                self._queue.put(_STOP)
        if thread is not None:
            thread.join(timeout=30)

    def _refuse_waiting(self) -> None:
        while True:
            try:
                request = self._queue.get_nowait()
            except queue.Empty:
                return
            if request is not _STOP:
                request.future.set_exception(
                    AgentError("the agent was closed before it generated this reply")
                )

    def __enter__(self) -> TransformersAgent:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ internals
    def render_messages(
        self, messages: Messages, tools: Sequence[dict[str, Any]] | None = None
    ) -> list[int]:
        """The prompt ids of ``messages`` under the tokenizer's chat template, declaring
        ``tools`` when given."""
        from agentsgym import ChatTokenizer

        if self._chat is None:
            self._chat = ChatTokenizer(self.tokenizer)
        chat = self._chat.with_tools(tools) if tools else self._chat
        return chat.encode_prompt(messages)  # type: ignore[no-any-return]

    def _check_prompt(self, prompt: Sequence[int]) -> None:
        if not prompt:
            raise AgentError("cannot generate from an empty prompt")
        top = max(prompt)
        if top >= self.vocab_size or min(prompt) < 0:
            raise AgentError(
                f"prompt token id {top} is outside the model's vocabulary of {self.vocab_size}: "
                "the env was built with a different tokenizer than the model's. Build the env "
                "with the model's tokenizer."
            )

    def to_action(self, generation: Generation) -> AgentAction:
        """The reply of a generation: decoded text (without the stop token), ids verbatim."""
        ids = generation.token_ids
        body = ids[:-1] if ids and ids[-1] in self.stop_token_ids else ids
        text = self.tokenizer.decode(body, skip_special_tokens=True)
        return AgentAction(
            text=text,
            token_ids=list(ids),
            logprobs=list(generation.logprobs),
            info={"token_source": "sampled", "finish_reason": generation.finish_reason},
            # Cut at max_new_tokens without a stop token: trainers mask such replies
            # (they did not end the turn) and envs see it as reply.truncated.
            truncated=generation.finish_reason == "length",
        )

    def _ensure_thread(self) -> None:
        with self._thread_lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=_serve,
                    args=(weakref.ref(self), self._queue),
                    name="agentsgym-transformers-agent",
                    daemon=True,
                )
                self._thread.start()
                # The thread holds only a weak reference, so a dropped agent is
                # collected; this then tells the thread to exit.
                weakref.finalize(self, self._queue.put, _STOP)

    def _collect(self, first: _Request) -> tuple[list[_Request], bool]:
        """The first request plus whatever arrives within the window (up to batch_size)."""
        batch = [first]
        deadline = time.monotonic() + self.batch_window
        while len(batch) < self.batch_size:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                wait = deadline - time.monotonic()
                if wait <= 0:
                    break
                try:
                    item = self._queue.get(timeout=wait)
                except queue.Empty:
                    break
            if item is _STOP:
                return batch, True
            batch.append(item)
        return batch, False

    def _run(self, batch: list[_Request]) -> None:
        try:
            results = self._generate_batch([r.prompt_ids for r in batch])
        except Exception as exc:  # every caller of this batch gets the error
            logger.exception("generation failed for a batch of %d prompts", len(batch))
            for request in batch:
                request.future.set_exception(
                    AgentError(f"generation failed: {type(exc).__name__}: {exc}")
                )
        else:
            for request, result in zip(batch, results):
                request.future.set_result(result)

    @contextlib.contextmanager
    def _rng(self) -> Iterator[None]:
        if self.seed is None:
            yield
            return
        import torch

        device = self.model.device
        devices = [device.index or 0] if device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices):
            torch.manual_seed(self.seed + self._batches)
            yield

    def _generate_batch(self, prompts: list[list[int]]) -> list[Generation]:
        import torch

        width = max(len(p) for p in prompts)
        device = self.model.device
        input_ids = torch.tensor(
            [[self.pad_token_id] * (width - len(p)) + p for p in prompts], device=device
        )
        attention_mask = torch.tensor(
            [[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=device
        )
        sampling = self.temperature > 0
        kwargs: dict[str, Any] = {
            "max_new_tokens": self.max_new_tokens,
            "do_sample": sampling,
            "eos_token_id": self.stop_token_ids,
            "pad_token_id": self.pad_token_id,
            "return_dict_in_generate": True,
            "output_scores": self.logprobs_mode == "sampling",
            "output_logits": self.logprobs_mode == "model",
        }
        if sampling:
            kwargs.update(temperature=self.temperature, top_p=self.top_p, top_k=self.top_k)
        else:
            kwargs.update(temperature=None, top_p=None, top_k=None)
        kwargs.update(self.generation_kwargs)
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.inference_mode(), self._rng():
                out = self.model.generate(
                    input_ids=input_ids, attention_mask=attention_mask, **kwargs
                )
        finally:
            self.model.train(was_training)
            self._batches += 1
        generated = out.sequences[:, width:]
        steps = out.scores if self.logprobs_mode == "sampling" else out.logits
        token_logprobs = torch.stack(
            [
                torch.log_softmax(step.float(), dim=-1)
                .gather(1, generated[:, t : t + 1])
                .squeeze(1)
                for t, step in enumerate(steps)
            ],
            dim=1,
        ).cpu()
        stop = set(self.stop_token_ids)
        results = []
        for row, ids in enumerate(generated.cpu().tolist()):
            end = next((i + 1 for i, tok in enumerate(ids) if tok in stop), None)
            finish = "stop" if end is not None else "length"
            ids = ids[:end] if end is not None else ids
            results.append(Generation(ids, token_logprobs[row, : len(ids)].tolist(), finish))
        self.stats["requests"] += len(prompts)
        self.stats["batches"] += 1
        self.stats["generated_tokens"] += sum(len(r.token_ids) for r in results)
        return results


def _serve(agent_ref: weakref.ref[TransformersAgent], requests: queue.Queue[Any]) -> None:
    """The generation thread: batch what is waiting, generate, hand out results."""
    while True:
        first = requests.get()
        if first is _STOP:
            return
        agent = agent_ref()
        if agent is None:
            first.future.set_exception(AgentError("the agent was closed"))
            return
        batch, stop = agent._collect(first)
        agent._run(batch)
        del agent
        if stop:
            return


def _default_stop_ids(model: Any, tokenizer: Any) -> list[int]:
    ids: set[int] = set()
    for source in (getattr(model, "generation_config", None), getattr(model, "config", None)):
        eos = getattr(source, "eos_token_id", None)
        if isinstance(eos, int):
            ids.add(eos)
        elif isinstance(eos, (list, tuple)):
            ids.update(int(i) for i in eos)
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    if getattr(tokenizer, "chat_template", None):
        from agentsgym import ChatTokenizer

        with contextlib.suppress(Exception):
            eot = ChatTokenizer(tokenizer).eot_ids
            if len(eot) == 1:
                ids.add(int(eot[0]))
    return sorted(ids)


def load_model(
    model: Any, tokenizer: Any = None, *, device: str | None = None, dtype: str | None = None
) -> tuple[Any, Any]:
    """(model, tokenizer) from a folder, a registered model name (``"smollm2"``), a
    loaded model, or ``"tiny"``.

    A loaded model is returned as is (not moved or copied), so a trainer and its
    agent share one set of weights.
    """
    from agentsgym import load_tokenizer

    if isinstance(model, str):
        from agentsgym_trl.tiny_model import TINY_MODEL, build_tiny_model

        if model == TINY_MODEL:
            tokenizer = load_tokenizer(tokenizer) if tokenizer is not None else None
            built = build_tiny_model(tokenizer)
            return _place(built, device), tokenizer or _bundled_tokenizer()
        from agentsgym import model_folder

        folder = model_folder(model)  # a registered model name (smollm2) -> its folder
        if folder is not None:
            model, tokenizer = folder, folder if tokenizer is None else tokenizer
        try:
            import torch
            from transformers import AutoModelForCausalLM
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise AgentError(
                "the transformers agent needs torch: pip install torch (agentsgym-trl needs it)"
            ) from exc
        try:
            loaded = AutoModelForCausalLM.from_pretrained(
                model, dtype=getattr(torch, dtype) if dtype else "auto"
            )
        except Exception as exc:
            raise AgentError(
                f"could not load model {model!r}: {exc}. Give a local folder holding "
                "config.json and the weights (e.g. one written by save_pretrained or "
                "python -m agentsgym_trl.tiny_model PATH)."
            ) from exc
        loaded.eval()
        model_obj = _place(loaded, device)
        return model_obj, load_tokenizer(tokenizer if tokenizer is not None else model)
    if tokenizer is None:
        path = getattr(model, "name_or_path", "") or ""
        if not path:
            raise AgentError("a model object needs tokenizer=... (the env's tokenizer)")
        tokenizer = path
    return model, load_tokenizer(tokenizer)


def _place(model: Any, device: str | None) -> Any:
    import torch

    target = device or ("cuda" if torch.cuda.is_available() else "cpu")
    return model.to(target)


def _bundled_tokenizer() -> Any:
    from agentsgym import DEFAULT_TOKENIZER, load_tokenizer

    return load_tokenizer(DEFAULT_TOKENIZER)
