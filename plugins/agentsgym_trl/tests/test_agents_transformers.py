"""The transformers agent: token-in/token-out generation with a tiny random model."""

from __future__ import annotations

import threading
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import agentsgym
from agentsgym.errors import AgentError
from agentsgym.types import AgentAction
from agentsgym_trl.tiny_model import build_tiny_model
from agentsgym_trl.transformers_agent import TransformersAgent

TINY = "agentsgym/tiny-chatml"
GUESS = "agentsgym/GuessTheNumber-v0"


# Two torch threads contending with the runner's threads on 2 cores run 10-30x slower.
pytestmark = pytest.mark.usefixtures("torch_single_thread")


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return agentsgym.load_tokenizer(TINY)


@pytest.fixture(scope="module")
def model(tokenizer: Any) -> Any:
    return build_tiny_model(tokenizer, seed=0)


class Recorder:
    """Passes calls through to an agent and keeps every (prompt ids, action)."""

    def __init__(self, agent: Any) -> None:
        self.agent = agent
        self.wants_prompt_token_ids = getattr(agent, "wants_prompt_token_ids", False)
        self.calls: list[tuple[list[int] | None, AgentAction]] = []
        self.lock = threading.Lock()

    def get_action(self, messages: Any, state: Any, **kwargs: Any) -> Any:
        action, state = self.agent.get_action(messages, state, **kwargs)
        with self.lock:
            self.calls.append((kwargs.get("prompt_token_ids"), action))
        return action, state


def agent_tokens(segment: Any) -> list[list[int]]:
    """The runs of agent tokens of a segment, in order."""
    runs: list[list[int]] = []
    previous = 0
    for token, mask in zip(segment.token_ids, segment.agent_mask):
        if mask and not previous:
            runs.append([])
        if mask:
            runs[-1].append(int(token))
        previous = mask
    return runs


def test_sampled_ids_and_logprobs_go_into_the_trajectory_verbatim(
    model: Any, tokenizer: Any
) -> None:
    agent = Recorder(TransformersAgent(model, tokenizer=tokenizer, max_new_tokens=6, seed=1))
    env = agentsgym.make(GUESS, tokenizer=tokenizer, env_config={"max_steps_per_episode": 3})
    batch = env.run_trial([{"seed": 0}, {"seed": 1}], agent, num_rollouts=2)
    assert not batch.failed and len(batch) == 4
    replies: dict[tuple[int, ...], list[tuple[list[int], list[float]]]] = {}
    for prompt, action in agent.calls:
        replies.setdefault(tuple(prompt), []).append((action.token_ids, action.logprobs))
    for episode in batch.episodes:
        segment = episode.segments[0]
        ids, mask, logprobs = (
            segment.token_ids.tolist(),
            segment.agent_mask.tolist(),
            segment.logprobs.tolist(),
        )
        runs = agent_tokens(segment)
        assert len(runs) == episode.num_turns
        start = 0
        for run in runs:
            start = mask.index(1, start)
            # a reply generated from exactly the ids before it, kept token for token
            # (logprobs are stored as float32)
            candidates = replies[tuple(ids[:start])]
            match = next(r for r in candidates if r[0] == run)
            assert logprobs[start : start + len(run)] == pytest.approx(match[1], rel=1e-6)
            candidates.remove(match)
            start += len(run)
        assert episode.has_logprobs
        assert all(s.info["token_source"] == "sampled" for s in episode.steps)


def test_logprobs_are_those_of_the_sampling_distribution(model: Any, tokenizer: Any) -> None:
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Guess a number."}], add_generation_prompt=True
    )["input_ids"]
    for mode, temperature in (("sampling", 0.7), ("model", 0.7), ("sampling", 1.0)):
        agent = TransformersAgent(
            model,
            tokenizer=tokenizer,
            temperature=temperature,
            max_new_tokens=8,
            seed=3,
            logprobs=mode,
        )
        generation = agent.generate([prompt])[0]
        ids = torch.tensor([prompt + generation.token_ids])
        with torch.no_grad():
            logits = model(input_ids=ids).logits[0, len(prompt) - 1 : -1].float()
        scale = temperature if mode == "sampling" else 1.0
        expected = torch.log_softmax(logits / scale, -1).gather(
            1, torch.tensor(generation.token_ids)[:, None]
        )[:, 0]
        assert torch.allclose(torch.tensor(generation.logprobs), expected, atol=1e-4)
        agent.close()


def test_a_batch_generates_what_each_prompt_generates_alone(model: Any, tokenizer: Any) -> None:
    prompts = [
        tokenizer.apply_chat_template(
            [{"role": "user", "content": text}], add_generation_prompt=True
        )["input_ids"]
        for text in ("Hi.", "Guess a number between 1 and 100, please.", "Is it higher or lower?")
    ]
    assert len({len(p) for p in prompts}) == 3  # left padding matters
    batched = TransformersAgent(
        model,
        tokenizer=tokenizer,
        temperature=0,
        max_new_tokens=10,
        batch_size=3,
        batch_window_ms=5000,
    )
    together = batched.generate(prompts)
    assert batched.stats == {
        "requests": 3,
        "batches": 1,
        "generated_tokens": sum(len(g.token_ids) for g in together),
    }
    alone = TransformersAgent(
        model, tokenizer=tokenizer, temperature=0, max_new_tokens=10, batch_size=1
    )
    for prompt, generated in zip(prompts, together):
        single = alone.generate([prompt])[0]
        assert single.token_ids == generated.token_ids
        assert torch.allclose(
            torch.tensor(single.logprobs), torch.tensor(generated.logprobs), atol=1e-4
        )
    assert alone.stats["batches"] == 3
    batched.close()
    alone.close()


def test_concurrent_callers_share_batches(model: Any, tokenizer: Any) -> None:
    agent = TransformersAgent(
        model, tokenizer=tokenizer, max_new_tokens=4, batch_size=4, batch_window_ms=2000, seed=0
    )
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Go."}], add_generation_prompt=True
    )["input_ids"]
    results: list[Any] = []
    threads = [
        threading.Thread(
            target=lambda: results.append(agent.get_action([], None, prompt_token_ids=prompt))
        )
        for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 4
    # four requests, fewer generate calls: the window collected concurrent callers
    assert agent.stats["requests"] == 4 and agent.stats["batches"] < 4
    agent.close()


def test_a_reply_ends_with_the_stop_token_it_sampled_or_at_the_length_limit(tokenizer: Any) -> None:
    warm = build_tiny_model(tokenizer, warm_start="guess-number", high=3)
    agent = TransformersAgent(warm, tokenizer=tokenizer, max_new_tokens=12, seed=0)
    prompt = agent.render_messages(
        [{"role": "user", "content": "I am thinking of an integer between 1 and 3."}]
    )
    generations = agent.generate([prompt] * 6)
    eot = tokenizer.convert_tokens_to_ids("<|im_end|>")
    stopped = [g for g in generations if g.finish_reason == "stop"]
    assert stopped, "the warm-started model learned to stop"
    for generation in stopped:
        assert generation.token_ids[-1] == eot and eot not in generation.token_ids[:-1]
        action = agent.to_action(generation)
        assert action.text == tokenizer.decode(generation.token_ids[:-1])
        assert action.token_ids == generation.token_ids
        assert not action.truncated
    cut = TransformersAgent(warm, tokenizer=tokenizer, max_new_tokens=1, seed=0)
    short = cut.generate([prompt])[0]
    assert short.finish_reason == "length" and len(short.token_ids) == 1
    assert cut.to_action(short).truncated  # flagged for the step, the env and the trainers
    cut.close()
    assert eot in agent.stop_token_ids
    agent.close()


def test_a_seed_makes_sampling_reproducible_without_touching_the_global_rng(
    model: Any, tokenizer: Any
) -> None:
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Go."}], add_generation_prompt=True
    )["input_ids"]
    runs = []
    for _ in range(2):
        agent = TransformersAgent(model, tokenizer=tokenizer, max_new_tokens=8, seed=11)
        torch.manual_seed(0)
        before = torch.rand(1)
        runs.append(agent.generate([prompt])[0].token_ids)
        torch.manual_seed(0)
        assert torch.equal(torch.rand(1), before)
        agent.close()
    assert runs[0] == runs[1]
    other = TransformersAgent(model, tokenizer=tokenizer, max_new_tokens=8, seed=12)
    assert other.generate([prompt])[0].token_ids != runs[0]


def test_without_prompt_ids_the_messages_are_rendered_with_the_chat_template(
    model: Any, tokenizer: Any
) -> None:
    agent = TransformersAgent(model, tokenizer=tokenizer, temperature=0, max_new_tokens=5)
    messages = [{"role": "user", "content": "Is it an animal?"}]
    rendered = tokenizer.apply_chat_template(messages, add_generation_prompt=True)["input_ids"]
    from_messages, _ = agent.get_action(messages, None)
    from_ids, _ = agent.get_action(messages, None, prompt_token_ids=rendered)
    assert from_messages.token_ids == from_ids.token_ids
    agent.close()


def test_registered_agent_and_clear_errors(tokenizer: Any) -> None:
    agent = agentsgym.make_agent("transformers", model="tiny", max_new_tokens=3, temperature=0.5)
    assert isinstance(agent, TransformersAgent) and agent.wants_prompt_token_ids
    with pytest.raises(AgentError, match="outside the model's vocabulary"):
        agent.get_action([], None, prompt_token_ids=[5, 5000])
    with pytest.raises(AgentError, match="needs a model"):
        TransformersAgent()
    with pytest.raises(AgentError, match="could not load model"):
        TransformersAgent("/nonexistent/model/folder")
    with pytest.raises(AgentError, match="temperature"):
        TransformersAgent("tiny", temperature=-1)
    agent.close()


def test_a_token_in_agent_plays_an_env_without_a_tokenizer(model: Any, tokenizer: Any) -> None:
    agent = Recorder(TransformersAgent(model, tokenizer=tokenizer, temperature=0, max_new_tokens=4))
    env = agentsgym.make("agentsgym/GuessTheNumber-v0", env_config={"max_steps_per_episode": 2})
    batch = env.run_trial([{"seed": 1}], agent)
    assert not batch.failed and batch.episodes[0].num_turns == 2
    assert [ids for ids, _ in agent.calls] == [None, None]  # it rendered the messages itself
    agent.agent.close()


def test_close_refuses_the_requests_still_waiting(
    model: Any, tokenizer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Ctrl-C closes the agent with episodes' requests queued: generating them all could
    # outlast close()'s join and leave torch running at exit (SIGABRT, not exit 130).
    agent = TransformersAgent(model, tokenizer=tokenizer, max_new_tokens=2, batch_size=1)
    generating, release = threading.Event(), threading.Event()
    generate = agent._generate_batch
    batches: list[int] = []

    def held(prompts: list[list[int]]) -> Any:
        batches.append(len(prompts))
        generating.set()
        release.wait(timeout=60)
        return generate(prompts)

    monkeypatch.setattr(agent, "_generate_batch", held)
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Go."}], add_generation_prompt=True
    )["input_ids"]
    outcomes: list[Any] = []

    def ask() -> None:
        try:
            outcomes.append(agent.get_action([], None, prompt_token_ids=prompt)[0])
        except AgentError as exc:
            outcomes.append(exc)

    first = threading.Thread(target=ask)
    first.start()
    assert generating.wait(timeout=60)
    waiting = [threading.Thread(target=ask) for _ in range(3)]
    for thread in waiting:
        thread.start()
    wait_until(lambda: agent._queue.qsize() == 3)  # three requests wait their turn
    closing = threading.Thread(target=agent.close)
    closing.start()
    wait_until(lambda: agent._queue.qsize() == 1)  # refused; only the stop is left
    release.set()
    for thread in [first, *waiting, closing]:
        thread.join(timeout=60)
    assert batches == [1]  # only the batch being generated, none of the waiting ones
    refused = [o for o in outcomes if isinstance(o, AgentError)]
    assert len(refused) == 3 and "closed before it generated" in str(refused[0])
    assert sum(isinstance(o, AgentAction) for o in outcomes) == 1


def wait_until(condition: Any) -> None:
    """Poll ``condition`` (another thread makes it true) for up to a minute."""
    done = threading.Event()
    for _ in range(6000):
        if condition():
            return
        done.wait(0.01)
    raise AssertionError("the condition never held")
