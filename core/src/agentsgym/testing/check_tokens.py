"""check_env's check of a played batch's token rows: padding, masks, and (where the
template is prefix-preserving) the stream against ``apply_chat_template``."""

from __future__ import annotations

from typing import Any

from agentsgym.engine import toolbox_now
from agentsgym.testing.check_report import require
from agentsgym.trajectory import TrajectoryBatch

__all__ = ["check_padded_rows", "check_token_rows"]


def check_padded_rows(batch: TrajectoryBatch, pad_token_id: int | None) -> None:
    """Fail the running check where a group's padded rows differ in width, an episode
    breaks its own invariants (:meth:`Episode.check`), or padding is not ``pad_token_id``
    or carries a mask or a reward."""
    for group in batch.groups:
        widths = {len(r) for r in group.padded_full_token_ids}
        require(len(widths) == 1, f"group {group.task_index} rows have lengths {widths}")
        rows = zip(
            group.rows,
            group.padded_full_token_ids,
            group.padded_agent_token_mask,
            group.padded_per_token_rewards,
        )
        for (episode, segment), ids, mask, rewards in rows:
            episode.check()
            n = len(episode.segments[segment])
            pad = [pad_token_id] * (len(ids) - n)
            require(ids[n:] == pad, "padding is not the pad token id")
            require(not any(mask[n:]) and not any(rewards[n:]), "padding carries mask or reward")


def check_token_rows(batch: TrajectoryBatch, env: Any) -> None:
    """Fail the running check where ``batch``'s rows break a fidelity invariant."""
    check_padded_rows(batch, env.chat.pad_token_id)
    for group in batch.groups:
        if not env.chat.is_prefix_preserving():
            # e.g. Qwen3 renders an empty think block into a final assistant turn the
            # model never generated; segments were checked against their views instead.
            continue
        for episode in group.episodes:
            _check_against_the_template(episode, env)


def _check_against_the_template(episode: Any, env: Any) -> None:
    """One segment whose messages hold no special-token text renders to its stream."""
    if len(episode.segments) != 1:
        return
    if any(env.chat.has_special_text(m["content"]) for m in episode.messages):
        return  # such text stays plain text in the stream, as it should
    toolbox = toolbox_now(env, episode.task_data)  # the episode's tools render too
    rendered = env.tokenizer.apply_chat_template(
        episode.messages,
        tokenize=False,
        tools=toolbox.schemas if toolbox else None,
        **env.config.chat_template_kwargs,
    )
    expected = env.tokenizer(rendered, add_special_tokens=False)["input_ids"]
    require(
        episode.full_token_ids == list(expected),
        "full_token_ids differ from apply_chat_template(messages)",
    )
