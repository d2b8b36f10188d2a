"""Trainers on tool episodes: the call tokens are trained, the tool results are masked,
and per-turn credit reaches the calls through the steps they are."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("agentsgym_tools")

import agentsgym
from agentsgym.trainers import RolloutSource
from agentsgym_tools.calculator import calculator_solver
from agentsgym_trl import PerTokenGRPOTrainer
from agentsgym_trl.tiny_model import build_tiny_model
from agentsgym_trl.trl_rollouts import rollouts_to_trl

pytestmark = pytest.mark.usefixtures("torch_single_thread")
CALCULATOR = "tools/Calculator-v0"


def _wrong_then_right(tokenizer: Any) -> Any:
    """The solver, except that rollout 0 of every task boxes a wrong number."""
    solver = calculator_solver(tokenizer, token_out=True)

    def get_action(messages: Any, agent_state: Any, **kwargs: Any) -> Any:
        action, state = solver.get_action(messages, agent_state)
        if "boxed" in action.text and kwargs["context"].rollout_index == 0:
            return "The result is \\boxed{0}.", state
        return action, state

    agent = type("Agent", (), {})()
    agent.get_action = lambda messages, agent_state, context=None: get_action(  # type: ignore[attr-defined]
        messages, agent_state, context=context
    )
    return agent


@pytest.fixture(scope="module")
def batch() -> Any:
    tokenizer = agentsgym.load_tokenizer(agentsgym.DEFAULT_TOKENIZER)
    env = agentsgym.make(CALCULATOR, tokenizer=tokenizer)
    rows = list(env.get_train_dataset(size=2))
    source = RolloutSource(rows, tokenizer=tokenizer, num_rollouts=2, tasks_per_step=2)
    return tokenizer, source.play(source.next_rows(), calculator_solver(tokenizer, token_out=True))


def _tool_spans(episode: Any, tokenizer: Any) -> list[tuple[int, int]]:
    """Where each tool result's content lies in the token stream (by decoding)."""
    ids = episode.segments[0].token_ids.tolist()
    text_at = [len(tokenizer.decode(ids[:i])) for i in range(len(ids) + 1)]
    whole = tokenizer.decode(ids)
    spans = []
    for message in (m for m in episode.messages if m["role"] == "tool"):
        start = whole.index("<|im_start|>tool\n" + message["content"])
        spans.append(
            (
                text_at.index(start),
                text_at.index(start + len("<|im_start|>tool\n" + message["content"])),
            )
        )
    return spans


def test_calls_are_trained_and_results_are_masked(batch: Any) -> None:
    tokenizer, played = batch
    trainer = PerTokenGRPOTrainer(
        build_tiny_model(tokenizer, seed=0), tokenizer=tokenizer, output_dir=None
    )
    tensors = trainer.prepare(played)
    rows = [row for group in played.groups for row in group.rows]
    assert len(rows) == 4
    for index, (episode, segment) in enumerate(rows):
        assert episode.ok and [s.info.get("tool_calls") for s in episode.steps] == [1, 1, None]
        mask = tensors["agent_token_mask"][index]
        for start, end in _tool_spans(episode, tokenizer):
            assert not mask[start:end].any(), "a tool result's tokens are trained"
        n_calls = sum(s.num_agent_tokens for s in episode.steps[:2])
        assert n_calls > 0 and int(mask.sum()) == episode.num_agent_tokens
    # trl-grpo hands TRL the same mask: the calls trained, the results not
    trl_rows, _ = rollouts_to_trl(played, pad_token_id=tokenizer.pad_token_id)
    for index, group in enumerate(played.groups):  # TRL takes each group's first trial
        episode = group.trials[0][-1]
        prompt, mask = trl_rows["prompt_ids"][index], trl_rows["env_mask"][index]
        agent_mask = episode.segments[0].agent_mask.tolist()
        assert [0] * len(prompt) + mask == agent_mask[: len(prompt) + len(mask)]


def test_credit_reaches_the_calls_of_the_rollout_that_answered_right() -> None:
    tokenizer = agentsgym.load_tokenizer(agentsgym.DEFAULT_TOKENIZER)
    env = agentsgym.make(CALCULATOR, tokenizer=tokenizer)
    source = RolloutSource(
        list(env.get_train_dataset(size=1)), tokenizer=tokenizer, num_rollouts=2, tasks_per_step=1
    )
    played = source.play(source.next_rows(), _wrong_then_right(tokenizer))
    trainer = PerTokenGRPOTrainer(
        build_tiny_model(tokenizer, seed=0), tokenizer=tokenizer, output_dir=None
    )
    tensors = trainer.prepare(played)
    out = tensors["advantages"]
    rewards = [episode.final_reward for episode, _ in played.groups[0].rows]
    assert sorted(rewards) == [0.0, 1.0]
    for index, (episode, _) in enumerate(played.groups[0].rows):
        mask = tensors["agent_token_mask"][index] == 1
        signs = torch.sign(out[index][mask]).unique().tolist()
        # every agent token of a rollout, its calls too, carries that rollout's advantage
        assert signs == [1.0 if episode.final_reward == 1.0 else -1.0]


def test_the_transformers_agent_is_conditioned_on_the_tools_block() -> None:
    from agentsgym_trl import TransformersAgent

    tokenizer = agentsgym.load_tokenizer(agentsgym.DEFAULT_TOKENIZER)
    env = agentsgym.make(CALCULATOR, tokenizer=tokenizer, env_config={"max_steps_per_episode": 2})
    prompts: list[list[int]] = []
    agent = TransformersAgent(
        build_tiny_model(tokenizer, seed=0), tokenizer=tokenizer, max_new_tokens=6, seed=0
    )
    original = agent.get_action

    def recording(messages: Any, agent_state: Any, **kwargs: Any) -> Any:
        prompts.append(list(kwargs["prompt_token_ids"]))
        return original(messages, agent_state, **kwargs)

    agent.get_action = recording  # type: ignore[method-assign]
    batch = env.run_trial([{"seed": 1}, {"seed": 2}], agent, num_rollouts=1)
    for episode in batch.episodes:
        assert episode.ok, episode.error
        episode.check()  # the sampled ids, verbatim, after the prompt it was given
        assert {s.info["token_source"] for s in episode.steps} == {"sampled"}
    assert prompts and all('"name": "multiply"' in tokenizer.decode(p) for p in prompts)
