"""What hooks return, checked and normalised: a wrong value (a message without a role,
a NaN reward) fails the episode naming the hook and what was expected, not a confusing
error later on. The env server plays hooks through the same checks. The role hooks'
answers (``turn_role``, ``role_rewards``) are checked against the env's declared roles.
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING, Any

from agentsgym.errors import EpisodeError
from agentsgym.surrogates import repair_text
from agentsgym.types import Message, Messages, RewardTerm, StepResult

if TYPE_CHECKING:
    from agentsgym.engine.playable import PlayableEnv

logger = logging.getLogger(__name__)

TOOL_RESULT_KEYS = ("tool_call_id", "name")
"""What a prompt's tool message keeps besides its role and content: the call it answers."""


def as_messages(prompt: Any, env: PlayableEnv) -> Messages:
    """What format_prompt returned, as new messages with surrogate code points repaired."""
    if isinstance(prompt, str):
        return [{"role": "user", "content": _repair(prompt, env)}]
    if isinstance(prompt, list) and prompt:
        messages: Messages = []
        for message in prompt:
            if not (
                isinstance(message, dict)
                and isinstance(message.get("role"), str)
                and isinstance(message.get("content"), str)
            ):
                raise EpisodeError(
                    f"{type(env).__name__}.format_prompt returned {message!r:.120}; each "
                    "message must be a dict with str 'role' and 'content'"
                )
            role, content = _repair(message["role"], env), _repair(message["content"], env)
            kept = Message(role=role, content=content)
            for key in TOOL_RESULT_KEYS:  # a tool result names its call (a served tool env's)
                if isinstance(message.get(key), str):
                    kept[key] = _repair(message[key], env)  # type: ignore[literal-required]
            messages.append(kept)
        return messages
    raise EpisodeError(
        f"{type(env).__name__}.format_prompt returned {prompt!r:.120}; expected a string "
        "or a non-empty list of message dicts"
    )


def _repair(text: str, env: PlayableEnv) -> str:
    repaired, count = repair_text(text)
    if count:
        logger.debug(
            "%s.format_prompt: repaired %d surrogate code point(s) in a message",
            type(env).__name__,
            count,
        )
    return repaired


def as_step_result(result: Any, env: PlayableEnv) -> StepResult:
    """What step_episode returned, checked: (state, finite reward, done, dict info)."""
    if not (isinstance(result, tuple) and len(result) == 4):
        raise EpisodeError(
            f"{type(env).__name__}.step_episode returned {result!r:.120}; expected "
            "(next_state, reward, done, info)"
        )
    state, reward, done, info = result
    try:
        reward = float(reward)
    except (TypeError, ValueError):
        raise EpisodeError(f"step_episode returned a non-numeric reward {reward!r}") from None
    if not math.isfinite(reward):
        raise EpisodeError(f"step_episode returned a non-finite reward {reward!r}")
    info = {} if info is None else info
    if not isinstance(info, dict):
        kind = type(info).__name__
        raise EpisodeError(f"step_episode returned info of type {kind}; expected dict")
    return StepResult(state, reward, bool(done), info)


def collect_terms(results: list[Any]) -> dict[str, float]:
    """Reward terms of every implementation, summed per name (lists flattened)."""
    terms: dict[str, float] = {}
    flat = [t for r in results for t in (r if isinstance(r, list) else [r])]
    for term in flat:
        if term is None:
            continue
        if not (isinstance(term, tuple) and len(term) == 2 and isinstance(term[0], str)):
            raise EpisodeError(
                f"reward shaping returned {term!r:.120}; expected RewardTerm(name, value) or None"
            )
        name, value = RewardTerm(*term)
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise EpisodeError(f"reward term {name!r} has a non-numeric value {value!r}") from None
        if not math.isfinite(number):
            raise EpisodeError(f"reward term {name!r} has a non-finite value {value!r}")
        terms[name] = terms.get(name, 0.0) + number
    return terms


def check_turn_role(named: Any, roles: tuple[str, ...], env: PlayableEnv) -> str:
    """What ``turn_role`` returned, once it is one of the env's roles."""
    if named is None:
        raise EpisodeError(
            f"{type(env).__name__} declares the roles {', '.join(roles)} but no turn_role "
            "implementation said whose turn it is; implement turn_role(state, step)"
        )
    if named not in roles:
        raise EpisodeError(
            f"{type(env).__name__}.turn_role returned {named!r:.80}; it must return one of "
            f"its declared roles: {', '.join(roles)}"
        )
    return str(named)


def role_reward_values(returned: Any, roles: tuple[str, ...], env: PlayableEnv) -> dict[str, float]:
    """What ``role_rewards`` returned, as ``{role: finite float}`` for every role
    (``None``: nothing); a role left out is an error, as is an unknown one."""
    if returned is None:
        return {}
    if not isinstance(returned, dict):
        raise EpisodeError(
            f"{type(env).__name__}.role_rewards returned {returned!r:.80}; it must return "
            "a dict {role: reward} or None"
        )
    values: dict[str, float] = {}
    for role, value in returned.items():
        if role not in roles:
            raise EpisodeError(
                f"{type(env).__name__}.role_rewards gave a reward to {role!r:.40}; its "
                f"roles are {', '.join(roles)}"
            )
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
        ):
            raise EpisodeError(
                f"{type(env).__name__}.role_rewards gave {role!r} the reward {value!r:.40}; "
                "each reward must be a finite number"
            )
        values[role] = float(value)
    missing = [role for role in roles if role not in values]
    if missing:
        raise EpisodeError(
            f"{type(env).__name__}.role_rewards gave no reward to {', '.join(missing)} (it "
            f"gave {', '.join(values)}); give every role its outcome ({missing[0]!r}: 0.0 "
            "for none), or return None for a game without outcome"
        )
    return values
