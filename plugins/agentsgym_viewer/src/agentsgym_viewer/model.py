"""One viewed episode: a rollout or eval row normalised for display.

Rollout files (``agentsgym rollout --out``, rows of ``Episode.to_record`` /
``TrajectoryBatch.to_records``) and eval files (``agentsgym eval --out``, rows of
``evaluation.Sample``) share most fields; a :class:`ViewedEpisode` holds the union,
with ``None`` where a file kind has no value (eval rows have no tokens, rollout rows
no ``correct``). Rows are validated here, at the boundary, so that the terminal view
and the HTML page can trust every field.

An episode's ``error`` is shown redacted (:func:`agentsgym.redaction.redact_text`): an
error text is where a secret of the run's configuration can surface (a server URL
with userinfo in a connection error), and files written before agentsgym redacted
them still hold it. Messages, task data and step infos are shown as recorded: they
are the episode itself, and the token view shows the same text from the ids.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from agentsgym.runtime import redact, redact_argv, redact_text
from agentsgym.errors import is_reward_unavailable

FileKind = Literal["rollout", "eval"]
CORRECT_KEY = "correct"
"""The step info key an env reports a judged answer with (docs/plugin-authors.md, 7)."""
REPLY_TRUNCATED_KEY = "reply_truncated"
"""The step info key the runner sets on a reply cut at the agent's generation limit."""
JUDGE_KEY = "judge"
"""The step info key of a judge model's judgement of the step: a ``{prompt, reply,
score, model}`` dict, or a list of them (agentsgym-judge's ``Verdict.record()``)."""


class ViewedToolCall(BaseModel):
    """One tool call of an assistant message: OpenAI's form (``{"type": "function",
    "function": {"name", "arguments"}, "id"}``) or a flat ``{"name", "arguments"}``."""

    model_config = ConfigDict(frozen=True)

    name: str
    arguments: str
    """The arguments as JSON text (a server sends text, agentsgym's parser an object)."""

    @classmethod
    def from_value(cls, value: Any) -> ViewedToolCall:
        """A call as recorded; a value of another shape is shown as its JSON."""
        if not isinstance(value, dict):
            return cls(name="?", arguments=_as_json_text(value))
        function = value.get("function")
        call = function if isinstance(function, dict) else value
        name = call.get("name")
        return cls(
            name=name if isinstance(name, str) and name else "?",
            arguments=_as_json_text(call.get("arguments", {})),
        )

    @property
    def text(self) -> str:
        """``multiply({"a": 2, "b": 3})``: how the views show the call."""
        return f"{self.name}({self.arguments})"


def _as_json_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


class ViewedMessage(BaseModel):
    """One chat message; non-string content (multimodal parts) is shown as JSON. An
    assistant's ``tool_calls`` are kept (a tool-call turn often has no content), and
    a tool result's ``name``: the tool that answered."""

    model_config = ConfigDict(frozen=True)

    role: str
    content: str
    tool_calls: list[ViewedToolCall] = Field(default_factory=list)
    name: str | None = None

    @field_validator("content", mode="before")
    @classmethod
    def _content_as_text(cls, value: Any) -> str:
        if value is None:
            return ""
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)

    @field_validator("tool_calls", mode="before")
    @classmethod
    def _calls_as_recorded(cls, value: Any) -> list[ViewedToolCall]:
        if value is None:
            return []
        values = value if isinstance(value, list) else [value]
        return [ViewedToolCall.from_value(v) for v in values]

    @field_validator("name", mode="before")
    @classmethod
    def _name_as_text(cls, value: Any) -> str | None:
        return value if isinstance(value, str) and value else None

    @property
    def call_texts(self) -> list[str]:
        """Each tool call as the views show it."""
        return [call.text for call in self.tool_calls]

    @property
    def title(self) -> str:
        """The role, and for a tool result the tool's name: ``tool · multiply``."""
        return f"{self.role} \u00b7 {self.name}" if self.name else self.role


@dataclass(frozen=True)
class RunRecord:
    """What the run record beside a file (``FILE.run.json``) says about the run that
    wrote it, as the views show it."""

    command_line: str
    """The command that made the file, secrets redacted."""
    status: str | None = None
    done_trials: int | None = None
    planned_trials: int | None = None
    env_id: str | None = None

    @classmethod
    def from_json(cls, data: Any) -> RunRecord | None:
        """The record of a run record's JSON, or None when it is not one.

        Redacted again here: a record written before agentsgym redacted secrets at any
        depth (or edited by hand) may still hold one, and the views never show it.
        """
        if not isinstance(data, dict):
            return None
        data = redact(data)
        argv = data.get("command_line")
        if not isinstance(argv, list) or not argv:
            return None
        arguments = data.get("arguments")
        env_id = arguments.get("env_id") if isinstance(arguments, dict) else None
        return cls(
            command_line=shlex.join(redact_argv([str(a) for a in argv])),
            status=_typed(data.get("status"), str),
            done_trials=_typed(data.get("done_trials"), int),
            planned_trials=_typed(data.get("planned_trials"), int),
            env_id=_typed(env_id, str),
        )

    def describe(self) -> str:
        """``agentsgym eval ... (complete: 8 of 8 trials)``: one line for the views."""
        state = [self.status] if self.status else []
        if self.done_trials is not None and self.planned_trials is not None:
            state.append(f"{self.done_trials} of {self.planned_trials} trials")
        return self.command_line + (f" ({': '.join(state)})" if state else "")


def _typed(value: Any, kind: type | tuple[type, ...]) -> Any:
    return value if isinstance(value, kind) and not isinstance(value, bool) else None


@dataclass(frozen=True, slots=True)
class ViewedJudgement:
    """A judge model's judgement of a step: what it was asked, what it answered, and the
    score read from that (each ``None`` when the record lacks it)."""

    prompt: str | None
    reply: str | None
    score: float | None
    model: str | None
    reused: bool
    """The answer of an earlier request with the same prompt (a cache hit)."""

    @classmethod
    def from_value(cls, value: Any) -> ViewedJudgement:
        """A judgement as recorded; a value that is not a dict is shown as its reply."""
        if not isinstance(value, dict):
            return cls(None, _as_json_text(value), None, None, False)
        score = _typed(value.get("score"), (int, float))
        return cls(
            prompt=_text_or_none(value.get("prompt")),
            reply=_text_or_none(value.get("reply")),
            score=None if score is None else float(score),
            model=_text_or_none(value.get("model")),
            reused=value.get("reused") is True,
        )


def _text_or_none(value: Any) -> str | None:
    return None if value is None else _as_json_text(value)


@dataclass(frozen=True, slots=True)
class ViewedStep:
    """What the file records about one agent action (the step after an assistant turn)."""

    index: int
    info: dict[str, Any]
    reward: float | None
    """The step reward (env reward plus terms), when the file records it."""
    reward_terms: dict[str, float]

    @property
    def judgements(self) -> list[ViewedJudgement]:
        """The judge model's judgements of the step (``info["judge"]``), if any."""
        recorded = self.info.get(JUDGE_KEY)
        if recorded is None:
            return []
        values = recorded if isinstance(recorded, list) else [recorded]
        return [ViewedJudgement.from_value(value) for value in values]

    @property
    def other_info(self) -> dict[str, Any]:
        """The step info but the judgements (shown on their own)."""
        return {key: value for key, value in self.info.items() if key != JUDGE_KEY}


@dataclass(frozen=True, eq=False)
class TokenFields:
    """The unpadded token fields of one row: ids, agent mask and per-token rewards.

    Held as numpy arrays (17 bytes a token rather than about 80 as Python lists), so
    that files of millions of tokens load in little memory.
    """

    ids: np.ndarray
    """int64 token ids."""
    agent_mask: np.ndarray
    """uint8, 1 on the tokens the agent generated."""
    rewards: np.ndarray
    """float64 per-token rewards."""

    @classmethod
    def from_values(cls, ids: Any, agent_mask: Any, rewards: Any) -> TokenFields:
        """Check and convert three sequences; ValueError says what is wrong."""
        try:
            id_array = np.asarray(ids, dtype=np.int64)
            mask_array = np.asarray(agent_mask, dtype=np.int64)
            reward_array = np.asarray(rewards, dtype=np.float64)
        except (TypeError, ValueError, OverflowError) as exc:
            raise ValueError(f"token fields of the wrong type ({exc})") from None
        if not id_array.ndim == mask_array.ndim == reward_array.ndim == 1:
            raise ValueError("token fields must be flat lists")
        if not len(id_array) == len(mask_array) == len(reward_array):
            raise ValueError(
                f"token ids ({len(id_array)}), agent mask ({len(mask_array)}) and per-token "
                f"rewards ({len(reward_array)}) have different lengths"
            )
        if mask_array.size and not np.isin(mask_array, (0, 1)).all():
            raise ValueError("the agent mask holds values other than 0 and 1")
        return cls(id_array, mask_array.astype(np.uint8), reward_array)

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def num_agent_tokens(self) -> int:
        return int(self.agent_mask.sum())

    def agent_runs(self) -> list[tuple[int, int]]:
        """``(start, end)`` of every maximal run of agent tokens, in order."""
        edges = np.diff(np.concatenate(([0], self.agent_mask.astype(np.int8), [0])))
        starts = np.flatnonzero(edges == 1)
        ends = np.flatnonzero(edges == -1)
        return [(int(s), int(e)) for s, e in zip(starts, ends)]


class ViewedEpisode(BaseModel):
    """One row of a rollout or eval file, ready to show."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    index: int = Field(description="0-based row number in the file (shown as #N)")
    kind: FileKind
    env_id: str | None = None
    session_id: str | None = None
    task_index: int | None = None
    rollout_index: int | None = None
    episode_index: int | None = None
    group_index: int | None = None
    role: str | None = Field(default=None, description="the role played (envs with roles)")
    segment_index: int | None = None
    num_segments: int | None = None
    task_data: dict[str, Any] = Field(default_factory=dict)
    final_reward: float = 0.0
    num_turns: int = 0
    truncated: bool = False
    free_shot: bool = False
    error: str | None = None
    correct: bool | None = None
    answer: str | None = None
    graded: bool | None = None
    metrics: dict[str, float] = Field(default_factory=dict)
    messages: list[ViewedMessage] = Field(default_factory=list)
    step_infos: list[dict[str, Any]] = Field(default_factory=list)
    step_rewards: list[float] | None = None
    step_reward_terms: list[dict[str, float]] | None = None
    tokens: TokenFields | None = None

    @field_validator("task_data", "metrics", mode="before")
    @classmethod
    def _none_as_empty_dict(cls, value: Any) -> Any:
        return {} if value is None else value

    @field_validator("messages", "step_infos", mode="before")
    @classmethod
    def _none_as_empty_list(cls, value: Any) -> Any:
        return [] if value is None else value

    @field_validator("error")
    @classmethod
    def _error_redacted(cls, value: str | None) -> str | None:
        return None if value is None else redact_text(value)

    @field_validator("answer", mode="before")
    @classmethod
    def _answer_as_text(cls, value: Any) -> Any:
        if value is None or isinstance(value, str):
            return value
        return json.dumps(value, ensure_ascii=False, sort_keys=True)

    @property
    def failed(self) -> bool:
        """The episode ended with an error (an exception in the env or the agent)."""
        return self.error is not None

    @property
    def unscored(self) -> bool:
        """The episode failed because its reward could not be computed (a judge failed:
        ``RewardUnavailableError``)."""
        return is_reward_unavailable(self.error)

    @property
    def wrong(self) -> bool:
        """The episode's answer was not judged correct (``--wrong``).

        The rule ``agentsgym eval`` scores a sample by, so that an episode is judged the
        same in a rollout file and in an eval file: an eval row is wrong when its
        ``correct`` is false (failed and ungraded samples included, as in the
        accuracy); a rollout row when it failed, when its steps report
        ``info["correct"]`` but never ``True``, or, when no step reports it, when its
        final reward is not above 0. (A file does not record an env's best possible
        reward, so "below the maximum" cannot be judged from it.)
        """
        if self.correct is not None:
            return not self.correct
        if self.failed:
            return True
        reported = [info[CORRECT_KEY] for info in self.step_infos if CORRECT_KEY in info]
        if reported:
            return not any(value is True for value in reported)
        return not self.final_reward > 0

    @property
    def cut_replies(self) -> list[int]:
        """The steps whose reply was cut at the agent's generation length limit
        (``max_new_tokens``, ``max_tokens``): it never ended its turn."""
        return [i for i, info in enumerate(self.step_infos) if info.get(REPLY_TRUNCATED_KEY)]

    @property
    def truncation(self) -> str:
        """What the views say on their ``truncated`` line: whether the episode ran out of
        steps, and which replies were cut at the length limit."""
        parts = ["yes (it hit max_steps_per_episode)"] if self.truncated else []
        cut = self.cut_replies
        if cut:
            steps = ", ".join(str(i) for i in cut)
            replies = "reply" if len(cut) == 1 else "replies"
            parts.append(f"{len(cut)} {replies} cut at the generation limit (step {steps})")
        return "; ".join(parts) or "no"

    @property
    def task_json(self) -> str:
        """``task_data`` as one line of JSON (shown, and searched, as this text)."""
        return json.dumps(self.task_data, ensure_ascii=False, sort_keys=True, default=str)

    def steps(self) -> list[ViewedStep]:
        """One :class:`ViewedStep` per recorded step, rewards included when recorded."""
        count = max(len(self.step_infos), len(self.step_rewards or []))
        steps = []
        for i in range(count):
            rewards = self.step_rewards or []
            terms = self.step_reward_terms or []
            steps.append(
                ViewedStep(
                    index=i,
                    info=self.step_infos[i] if i < len(self.step_infos) else {},
                    reward=rewards[i] if i < len(rewards) else None,
                    reward_terms=terms[i] if i < len(terms) else {},
                )
            )
        return steps

    def episode_reward_terms(self) -> dict[str, float]:
        """The episode's reward split by source: ``reward/<name>`` metrics, summed."""
        return {
            k.removeprefix("reward/"): v for k, v in self.metrics.items() if k.startswith("reward/")
        }

    def turn_token_spans(self) -> list[tuple[int, int]] | None:
        """The token span of each assistant message, or None when they cannot be matched.

        Agent tokens form one run per agent action; the runs map to the assistant
        messages in order when the row holds the episode's only segment and the counts
        agree (a split episode's row holds one view of the conversation).
        """
        if self.tokens is None or (self.num_segments or 1) != 1:
            return None
        runs = self.tokens.agent_runs()
        assistants = sum(1 for m in self.messages if m.role == "assistant")
        return runs if len(runs) == assistants else None

    def turn_token_rewards(self) -> list[float] | None:
        """Per assistant message, the reward its tokens carry (what a trainer sees)."""
        spans = self.turn_token_spans()
        if spans is None or self.tokens is None:
            return None
        return [float(self.tokens.rewards[s:e].sum()) for s, e in spans]

    def search_text(self) -> str:
        """The lower-cased text ``--search`` looks in (the HTML page builds the same)."""
        parts = [self.env_id or "", self.session_id or "", self.error or "", self.task_json]
        for message in self.messages:
            parts += [message.content, *message.call_texts]
        return "\n".join(parts).lower()

    def search_matches(self, text: str) -> int:
        """How many times ``text`` occurs in :meth:`search_text`, any case (0: no match).

        Counted like ``str.count`` (non-overlapping, left to right), as the page does.
        """
        return self.search_text().count(text.lower()) if text else 0
