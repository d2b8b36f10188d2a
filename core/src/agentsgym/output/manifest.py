"""The run record (``OUT.run.json``): the arguments that made an output, and its state.

``--resume`` continues a run only with the arguments that decide *which* trials exist
and *what* a trial's result is (:class:`RunArguments`: the env or the rows file's
sha256, split, counts, seed, env_config, agents (each role's too) and their options,
tokenizer), so the finished output is the one an uninterrupted run would have written.
Settings that bound or route a run without changing a trial's result are not compared,
because a resumed run often needs them changed: time budgets
(:data:`RUN_LIMIT_ENV_KEYS`), concurrency, the failure rate, the executor, the agent's
:data:`OPERATIONAL_AGENT_OPTIONS` (the server moved, a longer timeout; a role's too) and
secrets (never written to the record at all). A refusal lists what differs, and for
agents and their options the flags that give the earlier run's values back.
"""

from __future__ import annotations

import datetime as _dt
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from agentsgym.atomic_files import write_atomically
from agentsgym.errors import OutputError
from agentsgym.redaction import redact, redact_argv
from agentsgym.surrogates import repair_value

RUN_LIMIT_ENV_KEYS = frozenset({"hook_timeout_seconds", "episode_timeout_seconds"})
"""env_config keys that bound a run's time; not compared on --resume."""

OPERATIONAL_AGENT_OPTIONS = frozenset(
    {
        "base_url",
        "timeout",
        "max_retries",
        "max_concurrency",
        "backoff",
        "max_backoff",
        "batch_size",
        "batch_window_ms",
    }
)
"""Agent options that say where and how fast to reach a model, not which model or how
it samples; not compared on --resume."""

Command = Literal["rollout", "eval"]
Status = Literal["running", "interrupted", "partial", "complete"]


class RunArguments(BaseModel):
    """What decides a run's trials and their results (compared on --resume)."""

    env_id: str | None = None
    dataset: str | None = Field(default=None, description="rows file path (not compared)")
    dataset_sha256: str | None = None
    split: str | None = None
    num_tasks: int
    num_rollouts: int
    seed: int = 0
    env_config: dict[str, Any] = Field(default_factory=dict)
    agent: str | None = Field(
        default=None, description="the agent of every env (None: each env has its own)"
    )
    env_agents: dict[str, str] = Field(
        default_factory=dict, description="env id -> agent, when the envs of a run differ"
    )
    role_agents: dict[str, str] = Field(
        default_factory=dict,
        description="role -> agent, for each role with its own (--agent ROLE=NAME, or the "
        "role's default agent); the other roles play with their env's agent",
    )
    agent_options: dict[str, Any] = Field(
        default_factory=dict, description="--agent-option values (ROLE.key: one role's)"
    )
    tokenizer: str | None = None

    def compared(self) -> dict[str, Any]:
        """The fields as --resume compares them, as the record stores them: text repaired
        and secrets redacted (so a changed secret never blocks a resume)."""
        values = redact(repair_value(self.model_dump(exclude={"dataset"})))
        values["env_config"] = {
            k: v for k, v in values["env_config"].items() if k not in RUN_LIMIT_ENV_KEYS
        }
        values["agent_options"] = {
            k: v
            for k, v in values["agent_options"].items()
            if k.rpartition(".")[2] not in OPERATIONAL_AGENT_OPTIONS  # ROLE.key: a role's
        }
        return values

    def differences(self, other: RunArguments) -> list[str]:
        """One line per compared field that differs, ``self`` being the earlier run."""
        before, now = self.compared(), other.compared()
        lines = []
        for name in before:
            if _canonical(before[name]) == _canonical(now[name]):
                continue
            if name == "dataset_sha256":  # name the files: a digest says nothing to a reader
                old, new = self.dataset, other.dataset
                lines.append(
                    f"  - dataset (file content): {old!r} then, {new!r} now (the rows differ)"
                )
            else:
                line = f"  - {name}: {before[name]!r} then, {now[name]!r} now"
                lines.append(line + _flags_to_pass(name, before[name], now[name]))
        return lines


_FLAGS = {"role_agents": ("--agent", "="), "agent_options": ("--agent-option", "=")}
"""The compared fields whose values are flags by key: ``--agent ROLE=NAME`` for a role's
agent, ``--agent-option KEY=VALUE`` (``ROLE.key``: one role's agent)."""


def _flags_to_pass(name: str, before: dict[str, Any], now: dict[str, Any]) -> str:
    """For a field of keyed flags: which flags give the earlier run's values back."""
    if name not in _FLAGS:
        return ""
    flag, sep = _FLAGS[name]
    give = [
        f"{flag} {key}{sep}{_flag_value(value)}"
        for key, value in before.items()
        if _canonical(now.get(key)) != _canonical(value)
    ]
    drop = [f"{flag} {key}{sep}..." for key in now if key not in before]
    hints = ([f"pass {' '.join(give)}"] if give else []) + (
        [f"leave out {' '.join(drop)}"] if drop else []
    )
    return f" ({'; '.join(hints)})" if hints else ""


def _flag_value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


class RunManifest(BaseModel):
    """Everything ``OUT.run.json`` records about the run that writes ``OUT``."""

    format_version: int = 1
    command: Command
    arguments: RunArguments
    planned_trials: int = Field(description="(task, rollout) pairs the run plays in all")
    done_trials: int = 0
    failed_trials: int = 0
    status: Status = "running"
    started_at: str = Field(default_factory=lambda: _now())
    updated_at: str = Field(default_factory=lambda: _now())
    resumed: int = Field(default=0, description="how many times --resume continued the run")
    settings: dict[str, Any] = Field(
        default_factory=dict, description="recorded, not compared: concurrency, time budgets"
    )
    versions: dict[str, str] = Field(default_factory=dict)
    command_line: list[str] = Field(default_factory=list)

    @classmethod
    def new(
        cls,
        command: Command,
        arguments: RunArguments,
        *,
        planned_trials: int,
        settings: dict[str, Any] | None = None,
        versions: dict[str, str] | None = None,
        command_line: list[str] | None = None,
    ) -> RunManifest:
        """A record for a run about to start: secrets redacted at any depth, and text
        that JSON files cannot hold (lone surrogates) repaired."""
        return cls(
            command=command,
            arguments=RunArguments.model_validate(redact(repair_value(arguments.model_dump()))),
            planned_trials=planned_trials,
            settings=redact(repair_value(settings or {})),
            versions=versions or {},
            command_line=repair_value(redact_argv(command_line or [])),
        )


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _now() -> str:
    return _dt.datetime.now().astimezone().isoformat(timespec="seconds")


def read_manifest(path: Path) -> RunManifest:
    """The run record at ``path``, or :class:`OutputError` saying what is wrong with it."""
    try:
        return RunManifest.model_validate_json(path.read_bytes())
    except OSError as exc:
        raise OutputError(f"cannot read the run record {str(path)!r}: {exc.strerror}") from None
    except (ValidationError, ValueError) as exc:
        raise OutputError(
            f"the run record {str(path)!r} is not one agentsgym wrote "
            f"({str(exc).splitlines()[0]}); restore it, or start over with --overwrite"
        ) from None


def write_manifest(manifest: RunManifest, path: Path) -> None:
    """Write the record atomically."""
    manifest.updated_at = _now()
    write_atomically(path, manifest.model_dump_json(indent=2).encode() + b"\n")
