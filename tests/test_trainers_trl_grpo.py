"""trl-grpo: rollouts become TRL completions, and env tokens carry no gradient."""

from __future__ import annotations

import math
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

import agentsgym
from agentsgym.tiny_model import build_tiny_model
from agentsgym.trainers import RolloutSource, TrainerAdapter, TRLGRPOAdapter
from agentsgym.trainers.trl_grpo import REWARD_FIELD, episode_completion, rollouts_to_trl

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


def test_each_rollout_becomes_prompt_plus_completion_with_an_env_mask(
    tokenizer: Any, rows: Any
) -> None:
    def policy(messages: Any, state: Any) -> Any:
        if "integer between 1 and 3" in messages[0]["content"] and len(messages) > 1:
            raise RuntimeError("this agent gives up on turn 2")
        return "[2]", state

    source = RolloutSource(rows, tokenizer=tokenizer)
    batch = source.play(
        [rows[0], rows[1], rows[0]], agentsgym.FunctionAgent(policy), num_rollouts=1
    )
    output = rollouts_to_trl(batch, pad_token_id=tokenizer.pad_token_id)
    assert (
        len(output["prompt_ids"]) == len(output["completion_ids"]) == len(output["env_mask"]) == 3
    )
    assert output["logprobs"] is None  # a text agent has none: TRL is told so
    for index, group in enumerate(batch.groups):
        episode = group.trials[0][-1]
        reward = output[REWARD_FIELD][index]
        if not episode.ok:  # a failed episode: one masked token, no reward
            assert output["completion_ids"][index] == [tokenizer.pad_token_id]
            assert output["env_mask"][index] == [0] and reward is None
            continue
        segment = episode.segments[0]
        prompt, completion = output["prompt_ids"][index], output["completion_ids"][index]
        mask = output["env_mask"][index]
        ids, agent_mask = segment.token_ids.tolist(), segment.agent_mask.tolist()
        last = len(agent_mask) - 1 - agent_mask[::-1].index(1)
        assert prompt + completion == ids[: last + 1]
        assert [0] * len(prompt) + mask == agent_mask[: last + 1]
        assert mask[0] == 1 and mask[-1] == 1  # starts at the first reply, ends at the last
        assert reward == episode.final_reward
    assert any(not g.trials[0][-1].ok for g in batch.groups), "the scripted failure happened"
    assert episode_completion(batch.groups[0].trials[0][-1])[0] == output["prompt_ids"][0]


@pytest.mark.parametrize("beta", [0.0, 0.04])
def test_environment_tokens_carry_no_gradient_in_the_grpo_loss(
    tokenizer: Any, rows: Any, beta: float, tmp_path: Any
) -> None:
    model = build_tiny_model(tokenizer, warm_start="guess-number", high=3, seed=0)
    source = RolloutSource(rows, tokenizer=tokenizer, num_rollouts=4, tasks_per_step=2)
    adapter = TRLGRPOAdapter(
        model, tokenizer=tokenizer, output_dir=tmp_path, max_new_tokens=8, beta=beta
    )
    assert isinstance(adapter, TrainerAdapter)
    trainer = adapter.build(source, max_steps=1)
    prompts = list(trainer.train_dataset["prompt"][:2])
    inputs = [{"prompt": p} for p in prompts for _ in range(4)]
    trainer.model.train()
    scored = trainer._generate_and_score_completions(inputs)
    advantages = scored["advantages"]
    assert advantages.abs().sum() > 0, "the rollouts must differ in reward for a gradient"

    captured: dict[str, Any] = {}

    def keep_hidden(module: Any, args: Any, output: Any) -> None:
        output.last_hidden_state.retain_grad()
        captured["hidden"] = output.last_hidden_state

    trainer.current_gradient_accumulation_steps = 1  # what trainer.train() sets for a step
    handle = trainer.model.model.register_forward_hook(keep_hidden)
    try:
        loss = trainer.compute_loss(trainer.model, scored)
        loss.backward()
    finally:
        handle.remove()
    assert math.isfinite(loss.item())
    # the hidden state at position t only feeds the logits that predict token t + 1
    grad = captured["hidden"].grad.norm(dim=-1)  # (B, P + C)
    width = scored["prompt_ids"].shape[1]
    loss_mask = scored["completion_mask"] * scored["tool_mask"]
    batch = adapter.last_batch
    assert batch is not None
    for row in range(grad.shape[0]):
        predicting = grad[row, width - 1 : -1]  # predicts completion token j
        assert torch.all(grad[row, : width - 1] == 0), "prompt tokens got gradient"
        assert torch.all(predicting[loss_mask[row] == 0] == 0), "env or pad tokens got gradient"
        # the mask TRL used is the episode's own agent mask
        episode = batch.groups[row].trials[0][-1]
        _, completion, env_mask, _ = episode_completion(episode)
        assert scored["tool_mask"][row, : len(completion)].tolist() == env_mask
        if advantages[row] != 0:
            assert torch.all(predicting[loss_mask[row] == 1] > 0), "an agent token got no gradient"
    assert (loss_mask == 0).any() and (scored["completion_mask"] == 1).logical_and(
        loss_mask == 0
    ).any(), "the completions hold env tokens for the test to mean anything"


def test_training_steps_change_the_weights(tokenizer: Any, rows: Any, tmp_path: Any) -> None:
    model = build_tiny_model(tokenizer, warm_start="guess-number", high=3, seed=0)
    before = {k: v.detach().clone() for k, v in model.state_dict().items()}
    source = RolloutSource(rows, tokenizer=tokenizer, num_rollouts=4, tasks_per_step=2)
    adapter = agentsgym.make_trainer(
        "trl-grpo",
        model=model,
        tokenizer=tokenizer,
        output_dir=str(tmp_path / "out"),
        learning_rate=1e-3,
        max_new_tokens=8,
    )
    seen: list[Any] = []
    result = adapter.train(source, max_steps=2, on_step=seen.append)
    assert [s.step for s in result.steps] == [1, 2] and seen == result.steps
    assert all(s.loss is not None and math.isfinite(s.loss) for s in result.steps)
    assert all(s.num_rollouts == 8 and s.mean_reward is not None for s in result.steps)
    changed = [k for k, v in model.state_dict().items() if not torch.equal(v, before[k])]
    assert changed, "two optimizer steps left every weight as it was"
    assert (tmp_path / "out" / "model.safetensors").exists()
    reloaded = __import__("transformers").AutoModelForCausalLM.from_pretrained(tmp_path / "out")
    key = "model.embed_tokens.weight"
    assert torch.equal(reloaded.state_dict()[key], model.state_dict()[key])
