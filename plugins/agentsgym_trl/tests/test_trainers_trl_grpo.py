"""trl-grpo: rollouts become TRL completions, and env tokens carry no gradient."""

from __future__ import annotations

import math
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

import agentsgym
from agentsgym.errors import TokenFidelityError, TrainerOptionError
from agentsgym.trainers import RolloutSource
from agentsgym_trl import TRLGRPOAdapter
from agentsgym_trl.chat_templates import apply_chat_template_choice
from agentsgym_trl.screening import RolloutScreen
from agentsgym_trl.tiny_model import build_tiny_model
from agentsgym_trl.trl_rollouts import (
    REWARD_FIELD,
    episode_completion,
    episode_views,
    rollouts_to_trl,
)
from agentsgym_trl.trl_trainer import scored_stats
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
    output, views = rollouts_to_trl(batch, pad_token_id=tokenizer.pad_token_id)
    assert views == []  # the tiny template is prefix-preserving: one view per episode
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
    # Scripted rollouts whose rewards differ in every group: sampled ones can all tie.
    trainer = adapter.build(source, max_steps=1, agent=ThinkingAgent(tokenizer, logprobs=False))
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
    played: list[Any] = []
    source = RolloutSource(
        rows, tokenizer=tokenizer, num_rollouts=4, tasks_per_step=2, on_episode=played.append
    )
    adapter = agentsgym.runtime.make_trainer(
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
    # Sampling decides whether a step carries any signal: a step whose groups all got
    # equal rewards has zero advantage, and then no gradient (the KL term is off).
    signal = [has_signal(played[8 * i : 8 * (i + 1)]) for i in range(2)]
    for step, carries in zip(result.steps, signal):  # the step log: TRL's figures and ours
        log = step.to_dict()
        assert log["entropy"] > 0 and log["advantage_std"] >= 0
        assert (log["grad_norm"] > 0) == carries, (log["grad_norm"], carries)
        # the policy agent samples from the trained weights: importance ratios sit at 1
        assert log["is_ratio_mean"] == pytest.approx(1.0, abs=1e-3)
        assert log["token_source/sampled"] == 1.0 and log["rows"] == 8
    changed = [k for k, v in model.state_dict().items() if not torch.equal(v, before[k])]
    assert bool(changed) == any(signal), "the weights change exactly when a step has signal"
    # each step's rollouts were generated by the weights of the updates before it
    assert [{e.min_policy_version, e.max_policy_version} for e in played] == [{0}] * 8 + [{1}] * 8
    assert (tmp_path / "out" / "model.safetensors").exists()
    reloaded = __import__("transformers").AutoModelForCausalLM.from_pretrained(tmp_path / "out")
    key = "model.embed_tokens.weight"
    assert torch.equal(reloaded.state_dict()[key], model.state_dict()[key])


# ---------------------------------------------------------------- every view, IS
GUESS_ROWS = [
    {"env_class_path": GUESS, "env_config": CONFIG, "task_data": {"seed": seed}} for seed in (0, 2)
]


def scored_batch(trainer: Any, prompts: list[Any], group: int = 4) -> dict[str, Any]:
    """TRL's scored generation batch for ``prompts``, each ``group`` times."""
    trainer.model.train()
    return trainer._generate_and_score_completions(  # type: ignore[no-any-return]
        [{"prompt": p} for p in prompts for _ in range(group)]
    )


def test_split_episodes_train_every_view_with_the_episodes_advantage(
    tokenizer: Any, tmp_path: Any
) -> None:
    """A template that drops earlier think blocks splits episodes into views; every
    view becomes a row with its episode's advantage, and every agent token of every
    view gets gradient (with the KL term and importance sampling on)."""
    splitting = with_template(tokenizer, THINK_STRIPPING_TEMPLATE)
    model = build_tiny_model(splitting, warm_start="guess-number", high=3, seed=0)
    source = RolloutSource(GUESS_ROWS, tokenizer=splitting, num_rollouts=4, tasks_per_step=2)
    agent = ThinkingAgent(splitting, nan_at=2)
    adapter = TRLGRPOAdapter(
        model,
        tokenizer=splitting,
        output_dir=tmp_path,
        beta=0.04,
        max_new_tokens=8,
        # per token: the fake logprobs are far from the model's, and a per-sequence
        # ratio would mask whole rows
        vllm_importance_sampling_mode="token_truncate",
    )
    trainer = adapter.build(source, max_steps=1, agent=agent)
    scored = scored_batch(trainer, list(trainer.train_dataset["prompt"]))
    batch = adapter.last_batch
    assert batch is not None
    episodes = [g.trials[0][-1] for g in batch.groups]
    assert all(e.ok for e in episodes)
    split = [e for e in episodes if len(e.segments) > 1]
    assert split, "some episodes took two turns and split"
    views = {row: episode_views(e) for row, e in enumerate(episodes)}
    extra = [(row, view) for row, vs in views.items() for view in vs[:-1]]
    assert scored["prompt_ids"].shape[0] == len(episodes) + len(extra)

    loss_mask = scored["completion_mask"] * scored["tool_mask"]
    # every agent token of every episode is in the loss exactly once
    assert int(loss_mask.sum()) == sum(e.num_agent_tokens for e in episodes)
    advantages = scored["advantages"]
    assert advantages[: len(episodes)].abs().sum() > 0, "rewards differ within a group"
    width = scored["prompt_ids"].shape[1]
    for index, (row, view) in enumerate(extra, start=len(episodes)):
        assert advantages[index] == advantages[row]
        prompt = scored["prompt_ids"][index][scored["prompt_mask"][index].bool()]
        assert prompt.tolist() == view.prompt_ids
        n = len(view.completion_ids)
        assert scored["completion_ids"][index, :n].tolist() == view.completion_ids
        assert scored["tool_mask"][index, :n].tolist() == view.env_mask
        # the sampler's logprobs reach TRL's importance-sampling ratio (NaN: ratio 1)
        sampled = scored["sampling_per_token_logps"][index, :n]
        agent = torch.tensor(view.env_mask).bool()
        assert torch.isnan(sampled[agent]).sum() == 1
        assert "ref_per_token_logps" in scored and "importance_sampling_ratio" in scored
    assert width >= max(len(v.prompt_ids) for vs in views.values() for v in vs)

    captured: dict[str, Any] = {}

    def keep_hidden(module: Any, args: Any, output: Any) -> None:
        output.last_hidden_state.retain_grad()
        captured["hidden"] = output.last_hidden_state

    trainer.current_gradient_accumulation_steps = 1
    handle = trainer.model.model.register_forward_hook(keep_hidden)
    try:
        loss = trainer.compute_loss(trainer.model, scored)
        loss.backward()
    finally:
        handle.remove()
    assert math.isfinite(loss.item())
    grad = captured["hidden"].grad.norm(dim=-1)
    for row in range(grad.shape[0]):
        predicting = grad[row, width - 1 : -1]
        assert torch.all(grad[row, : width - 1] == 0), "prompt tokens got gradient"
        assert torch.all(predicting[loss_mask[row] == 0] == 0), "env or pad tokens got gradient"
        if advantages[row] != 0:
            assert torch.all(predicting[loss_mask[row] == 1] > 0), "an agent token got none"


def test_sampled_logprobs_drive_importance_sampling_without_vllm(
    tokenizer: Any, tmp_path: Any
) -> None:
    """The agent's logprobs (not vLLM's) give TRL's importance-sampling ratio
    exp(old - sampled) per token, truncated at the cap, 1 where a logprob is NaN; the
    ratio statistics reach the step log."""
    model = build_tiny_model(tokenizer, warm_start="guess-number", high=3, seed=0)
    source = RolloutSource(GUESS_ROWS, tokenizer=tokenizer, num_rollouts=4, tasks_per_step=2)
    adapter = TRLGRPOAdapter(
        model,
        tokenizer=tokenizer,
        output_dir=tmp_path,
        max_new_tokens=8,
        vllm_importance_sampling_mode="token_truncate",
        vllm_importance_sampling_clip_max=3.0,
    )
    trainer = adapter.build(source, max_steps=1, agent=ThinkingAgent(tokenizer, nan_at=1))
    scored = scored_batch(trainer, list(trainer.train_dataset["prompt"]))
    assert not trainer._use_vllm  # TRL does not generate; the agent did
    mask = (scored["completion_mask"] * scored["tool_mask"]).bool()
    old, sampled = scored["old_per_token_logps"], scored["sampling_per_token_logps"]
    ratio = scored["importance_sampling_ratio"]
    known = mask & ~torch.isnan(sampled)
    expected = torch.clamp(torch.exp(old - sampled), max=3.0)
    assert torch.allclose(ratio[known], expected[known], rtol=1e-5)
    assert (ratio[known] != 1).all(), "the fake logprobs are off the model's: ratios move"
    assert torch.all(ratio[mask & torch.isnan(sampled)] == 1)
    metrics = trainer._metrics["train"]
    assert metrics["sampling/importance_sampling_ratio/mean"][-1] > 0
    assert metrics["sampling/sampling_logp_difference/max"][-1] > 0
    # the step log has the ratios raw (is_ratio_*) and as the loss applied them
    stats = scored_stats(scored)
    assert stats["is_ratio_max"] == pytest.approx(float(torch.exp(old - sampled)[known].max()))
    assert stats["is_weight_max"] == pytest.approx(float(ratio[known].max()))
    assert stats["is_weight_mean"] == pytest.approx(float(ratio[known].mean()))

    # a sampler far less sure than the model: raw ratios pass the cap, weights stop at it
    doubtful = ThinkingAgent(tokenizer, base_logprob=-40.0)
    trainer = adapter.build(source, max_steps=1, agent=doubtful)
    stats = scored_stats(scored_batch(trainer, list(trainer.train_dataset["prompt"])))
    assert stats["is_ratio_min"] > 3.0
    assert stats["is_weight_min"] == stats["is_weight_max"] == pytest.approx(3.0)

    # without logprobs there is nothing to correct with: TRL's plain path
    plain = TRLGRPOAdapter(model, tokenizer=tokenizer, output_dir=tmp_path, max_new_tokens=8)
    trainer = plain.build(source, max_steps=1, agent=ThinkingAgent(tokenizer, logprobs=False))
    scored = scored_batch(trainer, list(trainer.train_dataset["prompt"]))
    assert "importance_sampling_ratio" not in scored and "sampling_per_token_logps" not in scored


def test_truncated_and_retokenized_rollouts_follow_the_policies(
    tokenizer: Any, caplog: pytest.LogCaptureFixture
) -> None:
    source = RolloutSource(GUESS_ROWS, tokenizer=tokenizer)
    cut = source.play(GUESS_ROWS, ThinkingAgent(tokenizer, truncate_turn=0), num_rollouts=1)
    for episode in (g.trials[0][-1] for g in cut.groups):
        assert episode.steps[0].reply_truncated and episode.ok
    output, _ = rollouts_to_trl(cut, 0, multi_turn=source.is_multi_turn)
    assert all(not any(mask) for mask in output["env_mask"]), "masked: a reply was cut"
    # in the group's baseline a cut episode counts as a failure: the lowest reward seen
    earned = [g.trials[0][-1].final_reward for g in cut.groups]
    assert output[REWARD_FIELD] == [min(earned)] * len(earned)
    seen = RolloutScreen()
    assert seen.failure_score([-2.0, 1.0]) == -2.0
    remembered, _ = rollouts_to_trl(cut, 0, screen=seen)  # the run's lowest, not the batch's
    assert remembered[REWARD_FIELD] == [-2.0] * len(earned)
    kept, _ = rollouts_to_trl(cut, 0, screen=RolloutScreen(mask_truncated_completions=False))
    assert all(any(mask) for mask in kept["env_mask"]) and kept[REWARD_FIELD] == earned
    single, _ = rollouts_to_trl(cut, 0, multi_turn=lambda _episode: False)
    assert all(any(mask) for mask in single["env_mask"]), "single-turn envs: TRL's default"

    text = source.play(GUESS_ROWS, agentsgym.FunctionAgent(lambda m, s: ("[2]", s)))
    assert {s.token_source for g in text.groups for e in g.episodes for s in e.steps} == {
        "retokenized"
    }
    screen = RolloutScreen(trainer="trl-grpo")
    with caplog.at_level("WARNING", logger="agentsgym_trl.screening"):
        warned, _ = rollouts_to_trl(text, 0, screen=screen)
        rollouts_to_trl(text, 0, screen=screen)
    assert len([r for r in caplog.records if "re-tokenized" in r.message]) == 1
    assert all(any(mask) for mask in warned["env_mask"])
    dropped, _ = rollouts_to_trl(text, 0, screen=RolloutScreen("drop"))
    assert dropped[REWARD_FIELD] == [None, None] and dropped["env_mask"] == [[0], [0]]
    with pytest.raises(TokenFidelityError, match="re-tokenized"):
        rollouts_to_trl(text, 0, screen=RolloutScreen("error"))
    with pytest.raises(TrainerOptionError, match="on_retokenized"):
        RolloutScreen("sometimes")  # type: ignore[arg-type]


def test_qwen3_three_turn_episode_trains_48_of_48_agent_tokens(qwen3: Any, tmp_path: Any) -> None:
    """The issue's case: Qwen3's template drops earlier think blocks, so a 3-turn
    episode splits into 3 views; trl-grpo used to train the last (16 of 48 agent
    tokens). Every view is trained now, and --chat-template training keeps the
    episode in one view."""
    rows = [
        {
            "env_class_path": GUESS,
            "env_config": {"high": 9, "max_steps_per_episode": 3},
            "task_data": {"target": 9},
        }
    ]

    def trained_tokens(tok: Any) -> tuple[int, int, int]:
        model = build_tiny_model(tok, hidden_size=16, seed=0)
        source = RolloutSource(rows, tokenizer=tok, num_rollouts=2, tasks_per_step=1)
        adapter = TRLGRPOAdapter(model, tokenizer=tok, output_dir=tmp_path, max_new_tokens=8)
        agent = ThinkingAgent(tok, high=3)
        trainer = adapter.build(source, max_steps=1, agent=agent)
        scored = scored_batch(trainer, list(trainer.train_dataset["prompt"]), group=2)
        batch = adapter.last_batch
        assert batch is not None
        episode = batch.groups[0].trials[0][-1]
        assert episode.ok and episode.num_turns == 3
        mask = scored["completion_mask"] * scored["tool_mask"]
        per_entry = int(mask.sum()) // 2  # two entries (the group), the same episode each
        return per_entry, episode.num_agent_tokens, len(episode.segments)

    trained, agent_tokens, views = trained_tokens(qwen3)
    assert (trained, agent_tokens, views) == (48, 48, 3)
    training, how = apply_chat_template_choice(qwen3, "training")
    assert "qwen3_training" in how and training is not qwen3
    assert trained_tokens(training) == (48, 48, 1)
