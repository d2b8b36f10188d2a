"""per-token-grpo: group-normalised per-token advantages, agent mask in the loss."""

from __future__ import annotations

import math
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import numpy as np

import agentsgym
from agentsgym.errors import TrainerOptionError
from agentsgym.trainers import RolloutSource
from agentsgym.trajectory import Episode, StepRecord, TokenSegment
from agentsgym_trl import PerTokenGRPOTrainer
from agentsgym_trl.credit import advantages, agent_token_steps
from agentsgym_trl.importance import importance_weights
from agentsgym_trl.per_token_loss import per_token_policy_loss
from agentsgym_trl.screening import RolloutScreen
from agentsgym_trl.tiny_model import build_tiny_model
from trainer_agents import THINK_STRIPPING_TEMPLATE, ThinkingAgent, has_signal, with_template

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


def episode(session: str, replies: list[tuple[int, float]], split_after: int = 0) -> Episode:
    """An episode of ``replies`` (tokens, reward) laid out as [env, reply, env, reply, ...];
    ``split_after`` > 0 starts a second segment after that many replies."""
    layouts: list[list[int]] = [[]]
    for index, (tokens, _reward) in enumerate(replies):
        if split_after and index == split_after:
            layouts.append([0] * sum(2 + n for n, _ in replies[:index]))  # re-rendered history
        layouts[-1] += [0, 0] + [1] * tokens
    steps = [StepRecord(action="x", reward=r, done=False, num_agent_tokens=n) for n, r in replies]
    segments = [TokenSegment.from_lists(list(range(len(m))), m) for m in layouts]
    return Episode(
        session_id=session,
        env_id="test",
        task_data={},
        steps=steps,
        final_reward=sum(r for _, r in replies),
        segments=segments,
        segment_rewards=[np.zeros(len(m), dtype=np.float32) for m in layouts],
        tokenized=True,
    )


def padded(episodes: list[tuple[Episode, int]], groups: list[int]) -> dict[str, Any]:
    width = max(len(e.segments[s]) for e, s in episodes)
    mask = np.zeros((len(episodes), width), dtype=np.int64)
    for row, (e, s) in enumerate(episodes):
        mask[row, : len(e.segments[s])] = e.segments[s].agent_mask
    return {
        "rows": episodes,
        "group_indices": np.asarray(groups),
        "agent_mask": mask,
        "per_token_rewards": np.zeros(mask.shape, dtype=np.float32),
    }


def agent_values(values: np.ndarray, mask: np.ndarray) -> list[float]:
    return [round(float(v), 4) for v in values[mask.astype(bool)]]


def test_return_to_go_credits_a_winning_first_turn_with_the_win() -> None:
    """The issue's case: a winning 2-turn episode (rewards 0, 1) against a losing one
    (0, 0). Crediting each turn with its own reward puts the winner's first turn at the
    losers' level; the return-to-go gives it the win."""
    win, lose = episode("win", [(2, 0.0), (3, 1.0)]), episode("lose", [(2, 0.0), (2, 0.0)])
    batch = padded([(win, 0), (lose, 0)], [0, 0])

    def credit(how: str, gamma: float = 1.0) -> list[list[float]]:
        out = advantages(
            batch["rows"],
            batch["group_indices"],
            batch["agent_mask"],
            batch["per_token_rewards"],
            credit=how,  # type: ignore[arg-type]
            gamma=gamma,
            eps=0.0,
        )
        return [agent_values(out[i], batch["agent_mask"][i]) for i in range(2)]

    # returns 1, 1 | 0, 0: mean 0.5, std 0.5 over the four turns
    assert credit("return_to_go") == [[1.0] * 5, [-1.0] * 4]
    # rewards 0, 1 | 0, 0: mean 0.25, std 0.433; the winner's first turn = a loser's turn
    first, loser = -0.25 / np.sqrt(0.1875), 0.75 / np.sqrt(0.1875)
    assert credit("turn") == [[round(first, 4)] * 2 + [round(loser, 4)] * 3, [round(first, 4)] * 4]
    # gamma 0.5: returns 0.5, 1 | 0, 0 -> mean 0.375, std sqrt(0.171875)
    std = np.sqrt(((0.5 - 0.375) ** 2 + (1 - 0.375) ** 2 + 2 * 0.375**2) / 4)
    assert credit("return_to_go", 0.5) == [
        [round(0.125 / std, 4)] * 2 + [round(0.625 / std, 4)] * 3,
        [round(-0.375 / std, 4)] * 4,
    ]
    assert credit("episode") == [[1.0] * 5, [-1.0] * 4]  # episodes are the units


def test_a_truncated_episode_counts_as_a_failure() -> None:
    """An episode masked for a truncated reply gets no gradient, and for the baseline
    it scores the lowest score seen: a policy that runs to the length limit while
    the env still pays must not look as good as one that ends its turns, and a group's
    honest failures must not look better than a cut one."""
    clean, lost, cut = episode("w", [(3, 1.0)]), episode("l", [(3, 0.0)]), episode("c", [(8, 1.0)])
    batch = padded([(clean, 0), (lost, 0), (cut, 0)], [0, 0, 0])
    out = advantages(
        batch["rows"],
        batch["group_indices"],
        batch["agent_mask"],
        batch["per_token_rewards"],
        normalization="mean",
        failed={id(cut)},
    )
    # scores 1, 0 and (the floor) 0: mean 1/3
    assert agent_values(out[0], batch["agent_mask"][0]) == [round(2 / 3, 4)] * 3
    assert agent_values(out[2], batch["agent_mask"][2]) == [round(-1 / 3, 4)] * 8
    honest = advantages(
        batch["rows"],
        batch["group_indices"],
        batch["agent_mask"],
        batch["per_token_rewards"],
        normalization="mean",
    )
    assert agent_values(honest[0], batch["agent_mask"][0]) == [round(1 / 3, 4)] * 3
    # a group of winners, one of them cut, next to a group that failed: the cut winner
    # scores the batch's failure (0), so the others' ending their turns is credited
    wins = [episode(f"w{i}", [(3, 1.0)]) for i in range(3)]
    cut_win = episode("cw", [(8, 1.0)])
    losers = [episode(f"l{i}", [(3, 0.0)]) for i in range(2)]
    cut_loss = episode("cl", [(8, 0.0)])
    rows = [(e, 0) for e in [*wins, cut_win, *losers, cut_loss]]
    batch = padded(rows, [0, 0, 0, 0, 1, 1, 1])
    out = advantages(
        batch["rows"],
        batch["group_indices"],
        batch["agent_mask"],
        batch["per_token_rewards"],
        normalization="mean",
        failed={id(cut_win), id(cut_loss)},
    )
    assert agent_values(out[0], batch["agent_mask"][0]) == [0.25] * 3  # 1 - mean(1, 1, 1, 0)
    assert all(v == 0 for v in out[4:].flatten())  # failures level with a cut failure
    # a batch where everyone won: the cut winner takes the lowest score of the run
    screen = RolloutScreen()
    screen.failure_score([0.0])  # an earlier batch held a failure
    winners = padded([(e, 0) for e in [*wins, cut_win]], [0, 0, 0, 0])
    out = advantages(
        winners["rows"],
        winners["group_indices"],
        winners["agent_mask"],
        winners["per_token_rewards"],
        normalization="mean",
        failed={id(cut_win)},
        failure_score=screen.failure_score,
    )
    assert agent_values(out[0], winners["agent_mask"][0]) == [0.25] * 3


def test_a_turns_tokens_share_its_full_advantage_whatever_its_length() -> None:
    """No length bias: two winning replies of 6 and 7 tokens get the same per-token
    advantage; the env's ``spread`` per-token rewards (reward / length) do not."""
    short, long_, lost = (
        episode("a", [(6, 1.0)]),
        episode("b", [(7, 1.0)]),
        episode("c", [(6, 0.0)]),
    )
    batch = padded([(short, 0), (long_, 0), (lost, 0)], [0, 0, 0])
    for row, e in enumerate((short, long_, lost)):
        n = e.steps[0].num_agent_tokens
        batch["per_token_rewards"][row, 2 : 2 + n] = e.steps[0].reward / n  # spread
    turn = advantages(
        batch["rows"], batch["group_indices"], batch["agent_mask"], batch["per_token_rewards"]
    )
    assert len({round(float(v), 6) for v in turn[0, 2:8]} | {round(float(turn[1, 2]), 6)}) == 1
    spread = advantages(
        batch["rows"],
        batch["group_indices"],
        batch["agent_mask"],
        batch["per_token_rewards"],
        credit="token_rewards",
    )
    assert spread[0, 2] > spread[1, 2] > 0  # the shorter reply is preferred


def test_credit_follows_the_steps_across_the_views_of_a_split_episode() -> None:
    split = episode("s", [(2, 0.0), (3, 0.0), (1, 1.0)], split_after=2)
    assert len(split.segments) == 2
    assert agent_token_steps(split, 0).tolist() == [0, 0, 1, 1, 1]
    assert agent_token_steps(split, 1).tolist() == [2]
    other = episode("o", [(4, 0.0)])
    batch = padded([(split, 0), (split, 1), (other, 0)], [0, 0, 0])
    out = advantages(
        batch["rows"],
        batch["group_indices"],
        batch["agent_mask"],
        batch["per_token_rewards"],
        credit="return_to_go",
        gamma=0.5,
        normalization="none",
    )
    # returns of the split episode's turns: 0.25, 0.5, 1.0 (in two views)
    assert agent_values(out[0], batch["agent_mask"][0]) == [0.25] * 2 + [0.5] * 3
    assert agent_values(out[1], batch["agent_mask"][1]) == [1.0]
    with pytest.raises(TrainerOptionError, match="credit_assignment"):
        advantages(
            batch["rows"],
            batch["group_indices"],
            batch["agent_mask"],
            batch["per_token_rewards"],
            credit="spread",  # type: ignore[arg-type]
        )


def test_importance_weights_are_truncated_ratios_and_one_where_unknown() -> None:
    old = torch.tensor([[-1.0, -1.0, -2.0, -1.0]])
    sampled = torch.tensor([[-1.5, -3.0, float("nan"), 0.0]])
    mask = torch.tensor([[1, 1, 1, 0]])
    weights, stats = importance_weights(old, sampled, mask, level="token", cap=3.0)
    assert weights is not None
    expected = [np.exp(0.5), 3.0, 1.0, 1.0]  # exp(2) capped; NaN and env tokens: 1
    assert weights[0].tolist() == pytest.approx(expected, rel=1e-6)
    assert sorted(stats["gaps"].tolist()) == pytest.approx([0.5, 2.0])
    weights, stats = importance_weights(old, sampled, mask, level="sequence", cap=20.0)
    assert weights is not None and weights.shape == (1, 1)
    assert float(weights) == pytest.approx(np.exp(2.5), rel=1e-6)  # one ratio per row
    capped, _ = importance_weights(old, sampled, mask, level="sequence", cap=10.0)
    assert capped is not None and float(capped) == 10.0
    assert importance_weights(old, sampled, mask, level="none")[0] is None
    nothing = torch.full_like(sampled, float("nan"))
    assert importance_weights(old, nothing, mask)[0] is None  # no logprobs: no correction


def test_masked_positions_add_nothing_even_when_their_values_are_not_finite() -> None:
    logps = torch.tensor([[-1.0, float("-inf"), -2.0]], requires_grad=True)
    advantages = torch.tensor([[1.0, float("nan"), -1.0]])
    mask = torch.tensor([[1, 0, 1]])
    loss, _ = per_token_policy_loss(logps, logps.detach(), advantages, mask)
    loss.backward()
    assert math.isfinite(loss.item())
    assert logps.grad.tolist() == [[-0.5, 0.0, 0.5]]


def test_environment_tokens_carry_no_gradient_in_the_per_token_loss(
    tokenizer: Any, rows: Any
) -> None:
    model = build_tiny_model(tokenizer, warm_start="guess-number", high=3, seed=0)
    trainer = PerTokenGRPOTrainer(model, tokenizer=tokenizer, output_dir=None, max_new_tokens=8)
    source = RolloutSource(rows, tokenizer=tokenizer, num_rollouts=4, tasks_per_step=2)
    # Scripted rollouts whose rewards differ in every group: sampled ones can all tie.
    batch = source.play(source.next_rows(), ThinkingAgent(tokenizer, logprobs=False))
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
    trainer = agentsgym.runtime.make_trainer(
        "per-token-grpo",
        model=model,
        tokenizer=tokenizer,
        output_dir=str(tmp_path),
        learning_rate=1e-3,
        max_new_tokens=8,
        num_iterations=2,
        micro_batch_size=3,
    )
    # A scripted token-in agent whose rollouts guess differently: every group has
    # rewards that differ, so every step has signal whatever sampling would have done.
    source = RolloutSource(rows, tokenizer=tokenizer, num_rollouts=4, tasks_per_step=2)
    result = trainer.train(source, max_steps=2, agent=ThinkingAgent(tokenizer, logprobs=False))
    assert result.num_steps == 2
    for step in result.steps:
        assert step.loss is not None and math.isfinite(step.loss)
        assert step.extra["reward_std"] > 0, "the scripted rollouts should differ in reward"
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
    tensors = trainer.prepare(source.play(source.next_rows(), ThinkingAgent(tokenizer)))
    assert (tensors["advantages"] != 0).any(), "a zero gradient would add up trivially"
    weight = model.model.embed_tokens.weight
    model.zero_grad()
    trainer.loss(tensors).backward()
    full = weight.grad.clone()
    model.zero_grad()
    total = tensors["loss_mask"].sum()
    for chunk in (slice(0, 3), slice(3, None)):
        trainer.loss({k: v[chunk] for k, v in tensors.items()}, normalizer=total).backward()
    assert torch.allclose(weight.grad, full, atol=1e-6)


def test_kl_to_the_initial_model_and_a_loss_that_means_something(tokenizer: Any, rows: Any) -> None:
    """beta > 0 keeps a frozen copy of the initial model: the KL is 0 before the first
    update and grows after it. The logged loss is what was backpropagated: the policy
    term -sum(A * w) / tokens (ratio 1 on one iteration, w the importance weights)
    plus beta * KL, which is not 0 by construction."""
    model = build_tiny_model(tokenizer, warm_start="guess-number", high=3, seed=3)
    trainer = PerTokenGRPOTrainer(
        model,
        tokenizer=tokenizer,
        output_dir=None,
        max_new_tokens=8,
        learning_rate=3e-3,
        beta=0.04,
        mask_truncated_completions=False,
    )
    reference = {k: v.clone() for k, v in trainer.ref_model.state_dict().items()}
    source = RolloutSource(rows, tokenizer=tokenizer, num_rollouts=4, tasks_per_step=2)
    # The first update must move the policy whatever sampling does: a scripted batch
    # whose rollouts differ in reward (a sampled one can have zero advantage).
    first = trainer.consume(source.play(source.next_rows(), ThinkingAgent(tokenizer)))
    assert first["kl"] == pytest.approx(0.0, abs=1e-7)  # the policy is the reference
    batch = source.play(source.next_rows(), trainer.policy())
    tensors = trainer.prepare(batch)
    mask = tensors["loss_mask"].bool()
    with torch.no_grad():
        from agentsgym_trl.per_token_loss import token_logprobs

        logps = token_logprobs(model, tensors["input_ids"], tensors["attention_mask"])[0]
        ref = token_logprobs(trainer.ref_model, tensors["input_ids"], tensors["attention_mask"])[0]
    delta = (ref - logps)[mask]
    kl = (torch.exp(delta) - delta - 1).sum()
    weights = torch.exp(logps - tensors["sampled_logprobs"]).clamp(max=3.0)[mask]
    policy = -(tensors["advantages"][mask] * weights).sum()
    tokens = mask.sum()
    second = trainer.consume(batch)
    assert second["kl"] == pytest.approx(float(kl / tokens), rel=1e-4)
    assert second["kl"] > 0, "one update moved the policy away from the reference"
    expected = float((policy + 0.04 * kl) / tokens)
    assert expected != 0
    assert second["loss"] == pytest.approx(expected, rel=1e-4, abs=1e-7)
    assert second["policy_loss"] == pytest.approx(float(policy / tokens), rel=1e-4, abs=1e-7)
    assert all(torch.equal(v, reference[k]) for k, v in trainer.ref_model.state_dict().items())


def test_the_step_log_says_how_training_goes(tokenizer: Any, rows: Any) -> None:
    trainer = PerTokenGRPOTrainer(
        build_tiny_model(tokenizer, warm_start="guess-number", high=3, seed=4),
        tokenizer=tokenizer,
        output_dir=None,
        max_new_tokens=8,
        learning_rate=3e-3,
        num_iterations=2,
    )
    played: list[Any] = []
    source = RolloutSource(
        rows, tokenizer=tokenizer, num_rollouts=4, tasks_per_step=2, on_episode=played.append
    )
    step = trainer.train(source, max_steps=1).steps[0].to_dict()
    assert 0 < step["entropy"] < np.log(len(tokenizer))
    assert 0 <= step["clip_fraction"] <= 1
    assert step["ratio_min"] <= 1 <= step["ratio_max"]  # iteration 1 is at ratio 1
    # the policy agent samples from this very model: its logprobs agree with the loss's
    assert step["sampling_logp_diff_max"] < 1e-3
    assert step["is_ratio_mean"] == pytest.approx(1.0, abs=1e-3)
    if has_signal(played):  # sampling decides whether the rollouts of a task differ
        assert step["advantage_std"] > 0 and step["advantage_min"] < 0 < step["advantage_max"]
    else:
        assert step["advantage_std"] == 0
    assert step["token_source/sampled"] == 1.0 and 0 <= step["truncated_replies"] <= 1


def test_the_step_log_has_the_importance_ratios_raw_and_as_applied(
    tokenizer: Any, rows: Any
) -> None:
    """``is_ratio_*`` are the ratios pi_old / pi_sample before the cap, ``is_weight_*``
    the weights the loss applied: a sampler far less sure than the model gives raw
    ratios above the cap and weights at it."""
    trainer = PerTokenGRPOTrainer(
        build_tiny_model(tokenizer, warm_start="guess-number", high=3, seed=4),
        tokenizer=tokenizer,
        output_dir=None,
        importance_sampling_cap=3.0,
    )
    source = RolloutSource(rows, tokenizer=tokenizer, num_rollouts=2, tasks_per_step=2)
    trainer.source = source
    doubtful = ThinkingAgent(tokenizer, base_logprob=-40.0, nan_at=1)
    step = trainer.consume(source.play(source.next_rows(), doubtful))
    assert step["is_ratio_min"] > 3.0  # the unknown logprob (NaN) has no ratio
    assert step["is_weight_min"] == step["is_weight_max"] == pytest.approx(3.0)
    assert step["is_ratio_mean"] > step["is_weight_mean"]


def test_every_view_of_a_split_episode_is_trained(tokenizer: Any, rows: Any) -> None:
    splitting = with_template(tokenizer, THINK_STRIPPING_TEMPLATE)
    trainer = PerTokenGRPOTrainer(
        build_tiny_model(splitting, seed=5), tokenizer=splitting, output_dir=None
    )
    source = RolloutSource(rows, tokenizer=splitting, num_rollouts=4, tasks_per_step=2)
    batch = source.play(source.next_rows(), ThinkingAgent(splitting))
    episodes = {id(e): e for e in batch.episodes}.values()
    assert any(len(e.segments) > 1 for e in episodes)
    tensors = trainer.prepare(batch)
    assert int(tensors["loss_mask"].sum()) == sum(e.num_agent_tokens for e in episodes)
    assert tensors["input_ids"].shape[0] == sum(len(e.segments) for e in episodes)
    metrics = trainer.consume(batch)
    assert math.isfinite(metrics["loss"]) and metrics["grad_norm"] > 0


def test_truncated_replies_are_masked_and_retokenized_data_follows_the_policy(
    tokenizer: Any, rows: Any
) -> None:
    model = build_tiny_model(tokenizer, seed=6)
    source = RolloutSource(rows, tokenizer=tokenizer, num_rollouts=2, tasks_per_step=2)
    trainer = PerTokenGRPOTrainer(model, tokenizer=tokenizer, output_dir=None)
    trainer.source = source
    batch = source.play(source.next_rows(), ThinkingAgent(tokenizer, truncate_turn=1))
    tensors = trainer.prepare(batch)
    for row, episode in enumerate(batch.episodes):
        cut = any(s.reply_truncated for s in episode.steps)
        agent = tensors["agent_token_mask"][row]
        assert tensors["loss_mask"][row].tolist() == ([0] * len(agent) if cut else agent.tolist())
    assert any(any(s.reply_truncated for s in e.steps) for e in batch.episodes)

    text = source.play(source.next_rows(), agentsgym.FunctionAgent(lambda m, s: ("[2]", s)))
    dropping = PerTokenGRPOTrainer(
        model, tokenizer=tokenizer, output_dir=None, on_retokenized="drop"
    )
    assert dropping.prepare(text)["input_ids"].shape[0] == 0
    assert dropping.consume(text)["skipped"] == 1.0
    with pytest.raises(TrainerOptionError, match="credit_assignment"):
        PerTokenGRPOTrainer(model, tokenizer=tokenizer, credit_assignment="spread")  # type: ignore[arg-type]
