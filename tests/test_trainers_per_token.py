"""per-token-grpo: group-normalised per-token advantages, agent mask in the loss."""

from __future__ import annotations

import math
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import agentsgym
from agentsgym.tiny_model import build_tiny_model
from agentsgym.trainers import PerTokenGRPOTrainer, RolloutSource, TrainerAdapter
from agentsgym.trainers.per_token import (
    group_normalized_advantages,
    per_token_policy_loss,
)

TINY = "agentsgym/tiny-chatml"
GUESS = "agentsgym/GuessTheNumber-v0"
CONFIG = {"high": 3, "max_steps_per_episode": 2}


# Two torch threads contending with the runner's threads on 2 cores run 10-30x slower.
pytestmark = pytest.mark.usefixtures("torch_single_thread")


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return agentsgym.load_tokenizer(TINY)


@pytest.fixture(scope="module")
def rows(tokenizer: Any) -> list[dict[str, Any]]:
    env = agentsgym.make(GUESS, tokenizer=tokenizer, env_config=CONFIG)
    return list(env.get_train_dataset(size=4))


def test_advantages_are_rewards_normalised_over_each_groups_agent_tokens() -> None:
    rewards = torch.tensor([[0.0, 0.5, 0.5, 0.0], [0.0, 0.0, 0.0, 9.0], [0.0, 2.0, 0.0, 0.0]])
    mask = torch.tensor([[0, 1, 1, 0], [0, 1, 1, 0], [0, 1, 1, 0]])
    groups = torch.tensor([0, 0, 1])
    advantages = group_normalized_advantages(rewards, mask, groups, eps=0.0)
    # group 0's agent-token rewards are 0.5, 0.5, 0, 0: mean 0.25, std 0.25
    assert advantages[:2].tolist() == [[0.0, 1.0, 1.0, 0.0], [0.0, -1.0, -1.0, 0.0]]
    # group 1 is one row: rewards 2 and 0 -> +1, -1; the 9.0 sits on an env token
    assert advantages[2].tolist() == [0.0, 1.0, -1.0, 0.0]
    raw = group_normalized_advantages(rewards, mask, groups, normalization="none")
    assert raw.tolist() == [[0.0, 0.5, 0.5, 0.0], [0.0, 0.0, 0.0, 0.0], [0.0, 2.0, 0.0, 0.0]]
    equal = group_normalized_advantages(torch.ones(2, 3), torch.ones(2, 3), torch.tensor([0, 0]))
    assert torch.all(equal == 0)  # no signal without differences


def test_masked_positions_add_nothing_even_when_their_values_are_not_finite() -> None:
    logps = torch.tensor([[-1.0, float("-inf"), -2.0]], requires_grad=True)
    advantages = torch.tensor([[1.0, float("nan"), -1.0]])
    mask = torch.tensor([[1, 0, 1]])
    loss = per_token_policy_loss(logps, logps.detach(), advantages, mask)
    loss.backward()
    assert math.isfinite(loss.item())
    assert logps.grad.tolist() == [[-0.5, 0.0, 0.5]]


def test_environment_tokens_carry_no_gradient_in_the_per_token_loss(
    tokenizer: Any, rows: Any
) -> None:
    model = build_tiny_model(tokenizer, warm_start="guess-number", high=3, seed=0)
    trainer = PerTokenGRPOTrainer(model, tokenizer=tokenizer, output_dir=None, max_new_tokens=8)
    assert isinstance(trainer, TrainerAdapter)
    source = RolloutSource(rows, tokenizer=tokenizer, num_rollouts=4, tasks_per_step=2)
    batch = source.play(source.next_rows(), trainer.policy())
    tensors = trainer.prepare(batch)
    agent_mask = tensors["agent_token_mask"]
    assert (tensors["advantages"][agent_mask == 1] != 0).any(), "rewards must differ for a gradient"
    assert (agent_mask == 0).logical_and(tensors["attention_mask"] == 1).any()

    captured: dict[str, Any] = {}

    def keep_hidden(module: Any, args: Any, output: Any) -> None:
        output.last_hidden_state.retain_grad()
        captured["hidden"] = output.last_hidden_state

    model.train()
    handle = model.model.register_forward_hook(keep_hidden)
    try:
        loss = trainer.loss(tensors)
        loss.backward()
    finally:
        handle.remove()
    assert math.isfinite(loss.item())
    # the hidden state at position t only feeds the logits that predict token t + 1
    predicting = captured["hidden"].grad.norm(dim=-1)[:, :-1]
    target_mask = agent_mask[:, 1:]
    target_advantage = tensors["advantages"][:, 1:]
    assert torch.all(predicting[target_mask == 0] == 0), "env or pad tokens got gradient"
    assert torch.all(captured["hidden"].grad[:, -1] == 0)
    assert torch.all(predicting[(target_mask == 1) & (target_advantage != 0)] > 0)
    # the mask in the loss is the episodes' own agent mask
    for row, (episode, segment) in enumerate(r for g in batch.groups for r in g.rows):
        n = len(episode.segments[segment])
        assert agent_mask[row, :n].tolist() == episode.segments[segment].agent_mask.tolist()


def test_training_steps_change_the_weights_and_save_the_model(
    tokenizer: Any, rows: Any, tmp_path: Any
) -> None:
    model = build_tiny_model(tokenizer, warm_start="guess-number", high=3, seed=1)
    before = {k: v.detach().clone() for k, v in model.state_dict().items()}
    trainer = agentsgym.make_trainer(
        "per-token-grpo",
        model=model,
        tokenizer=tokenizer,
        output_dir=str(tmp_path),
        learning_rate=1e-3,
        max_new_tokens=8,
        num_iterations=2,
        micro_batch_size=3,
    )
    source = RolloutSource(rows, tokenizer=tokenizer, num_rollouts=4, tasks_per_step=2)
    result = trainer.train(source, max_steps=2)
    assert result.num_steps == 2
    for step in result.steps:
        assert step.loss is not None and math.isfinite(step.loss)
        assert step.extra["grad_norm"] > 0 and step.num_rollouts == 8
    changed = [k for k, v in model.state_dict().items() if not torch.equal(v, before[k])]
    assert changed, "two steps left every weight as it was"
    from transformers import AutoModelForCausalLM

    reloaded = AutoModelForCausalLM.from_pretrained(tmp_path)
    key = "model.embed_tokens.weight"
    assert torch.equal(reloaded.state_dict()[key], model.state_dict()[key])
    assert result.artifacts["model"] == str(tmp_path)


def test_micro_batches_add_up_to_the_full_batch_gradient(tokenizer: Any, rows: Any) -> None:
    model = build_tiny_model(tokenizer, warm_start="guess-number", high=3, seed=2)
    trainer = PerTokenGRPOTrainer(model, tokenizer=tokenizer, output_dir=None, max_new_tokens=8)
    source = RolloutSource(rows, tokenizer=tokenizer, num_rollouts=4, tasks_per_step=2)
    tensors = trainer.prepare(source.play(source.next_rows(), trainer.policy()))
    weight = model.model.embed_tokens.weight
    model.zero_grad()
    trainer.loss(tensors).backward()
    full = weight.grad.clone()
    model.zero_grad()
    total = tensors["agent_token_mask"].sum()
    for chunk in (slice(0, 3), slice(3, None)):
        trainer.loss({k: v[chunk] for k, v in tensors.items()}, normalizer=total).backward()
    assert torch.allclose(weight.grad, full, atol=1e-6)
