"""Options shared by several commands: ``key=value`` parsing, the tokenizer default,
agent building with checked options, time budgets, and the output/failure flags of
long runs."""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from typing import Any

import typer

from agentsgym.cli.executor_flags import flag_options, given_executor_flags
from agentsgym.engine import DEFAULT_MAX_CONCURRENCY
from agentsgym.errors import AgentError, AgentsGymError
from agentsgym.executors import Executor
from agentsgym.factory import DEFAULT_TOKENIZER
from agentsgym.registry import get_registry
from agentsgym.specs import ComponentSpec, accepted_options

MAX_ROLLOUTS = 10_000
"""Upper bound of --num-rollouts (a run holds every (task, rollout) job in memory)."""
MAX_TASKS = 10_000_000
MAX_CONCURRENCY = 100_000

CLI_TOKENIZER_DEFAULT = DEFAULT_TOKENIZER
"""The ``--tokenizer`` default of every command that plays episodes: the bundled,
offline tokenizer, so that token-exact rows and token checks work out of the box."""

TOKENIZER_HELP = (
    "tokenizer of the token fields: the bundled agentsgym/tiny-chatml (default: offline, "
    "what scripted agents and --model tiny use, so every env gives token-exact rows and "
    "token checks out of the box); when a model plays, its own tokenizer (a local folder "
    "or model name for AutoTokenizer: token ids must be the model's); or 'none' for text only"
)


def tokenizer_cli_option() -> Any:
    """The ``--tokenizer`` option, with the one default every command shares."""
    return typer.Option(CLI_TOKENIZER_DEFAULT, "--tokenizer", help=TOKENIZER_HELP)


def tokenizer_option(value: str) -> str | None:
    """The ``--tokenizer`` value as ``make`` takes it: ``none`` plays without tokens."""
    return None if value.lower() == "none" else value


def parse_key_values(pairs: list[str] | None, what: str) -> dict[str, Any]:
    """``["a=1", "b=[1, 2]", "c=text"]`` -> ``{"a": 1, "b": [1, 2], "c": "text"}``: values
    are read as JSON when they parse as JSON, else kept as strings."""
    result: dict[str, Any] = {}
    for pair in pairs or []:
        key, sep, raw = pair.partition("=")
        if not sep or not key.strip():
            raise typer.BadParameter(f"{what} must look like key=value, got {pair!r}")
        try:
            value: Any = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        result[key.strip()] = value
    return result


def complete_env_id(incomplete: str) -> list[str]:
    """Shell completion of an env id argument: the registered ids starting with it."""
    try:
        ids = sorted(get_registry().envs)
    except Exception:  # noqa: BLE001 - completion must never print a traceback into the shell
        return []
    return [env_id for env_id in ids if env_id.startswith(incomplete)]


# ---------------------------------------------------------------------- components
def check_options(
    factory: Any, options: dict[str, Any], *, what: str, flag: str = "--agent-option"
) -> None:
    """Refuse option names ``factory`` does not take, listing the ones it does."""
    accepted = accepted_options(factory)
    if accepted is None:
        return
    unknown = [key for key in options if key not in accepted]
    if not unknown:
        return
    hints = []
    for key in unknown:
        close = difflib.get_close_matches(key, accepted, n=1, cutoff=0.6)
        hints.append(f"{key!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    listed = ", ".join(accepted) if accepted else "none"
    raise AgentError(
        f"{what} has no option {', '.join(hints)}. It accepts: {listed}. "
        f"Pass them as {flag} key=value"
    )


def load_factory(spec: ComponentSpec, kind: str = "agent") -> Any:
    """The factory of a registered agent (or trainer, executor), imported if a path."""
    try:
        return spec.load()
    except (ImportError, ValueError) as exc:
        raise AgentError(
            f"{kind} {spec.name!r} cannot be loaded from {spec.factory!r} "
            f"({type(exc).__name__}: {exc}); reinstall "
            f"{spec.distribution or 'the package that registers it'}"
        ) from None


def build_component(spec: ComponentSpec, options: dict[str, Any], *, kind: str = "agent") -> Any:
    """Build a registered agent (or trainer) with options checked against its signature;
    a bad name or value is an AgentError that says which option, never a traceback."""
    what, flag = f"{kind} {spec.name!r}", f"--{kind}-option"
    factory = load_factory(spec, kind)
    check_options(factory, options, what=what, flag=flag)
    try:
        return factory(**options)
    except AgentsGymError:
        raise
    except (TypeError, ValueError) as exc:
        given = ", ".join(f"{k}={v!r}" for k, v in options.items()) or "no options"
        raise AgentError(
            f"could not build {what} with {given}: {type(exc).__name__}: {exc}. Check the "
            f"values given with {flag} (see `agentsgym list-{kind}s`)"
        ) from None


# ---------------------------------------------------------------------- executors
@dataclass(frozen=True)
class ExecutorChoice:
    """``--executor`` and its options: where trials run, built before any file is
    touched (an executor whose package is missing, or a bad option, fails first)."""

    name: str
    options: dict[str, Any]
    executor: Executor

    @classmethod
    def parse(
        cls,
        name: str,
        num_workers: int | None = None,
        executor_options: list[str] | None = None,
    ) -> ExecutorChoice:
        """The executor ``name`` built with ``--num-workers``, ``--executor-option
        key=value`` and the flags it declares (given on this command line)."""
        spec = get_registry().executor(name)
        options = parse_key_values(executor_options, "--executor-option")
        if num_workers is not None:
            options["num_workers"] = num_workers
        options.update(flag_options(spec, given_executor_flags()))
        executor = build_component(spec, options, kind="executor")
        return cls(name, options, executor)

    def settings(self) -> dict[str, Any]:
        """What the run record keeps (recorded, not compared: it routes, not decides)."""
        if self.name == "local" and not self.options:
            return {}
        return {"executor": self.name, **self.options}


def max_concurrency_option(what: str = "episodes", *, per_worker: bool = False) -> Any:
    where = " (per worker of a parallel --executor)" if per_worker else ""
    return typer.Option(
        DEFAULT_MAX_CONCURRENCY,
        "--max-concurrency",
        min=1,
        max=MAX_CONCURRENCY,
        help=f"{what} in flight at once{where}; size it to your model server (see README)",
    )


def executor_option() -> Any:
    return typer.Option(
        "local",
        "--executor",
        help="where trials run: local (this process), or a plugin's executor (see "
        "`agentsgym list-executors` and docs/scaling.md); an executor may add its own flags",
    )


def num_workers_option() -> Any:
    return typer.Option(
        None,
        "--num-workers",
        min=1,
        max=10_000,
        help="workers of a parallel --executor (default: the executor's own)",
    )


def executor_options_option() -> Any:
    return typer.Option(None, "--executor-option", help="key=value for the executor, repeatable")


# ---------------------------------------------------------------------- long runs
def time_budgets(hook_timeout: float | None, episode_timeout: float | None) -> dict[str, float]:
    """The env_config keys that --hook-timeout / --episode-timeout override."""
    budgets = {"hook_timeout_seconds": hook_timeout, "episode_timeout_seconds": episode_timeout}
    return {key: value for key, value in budgets.items() if value is not None}


def resume_option() -> Any:
    return typer.Option(
        False,
        "--resume",
        help="continue the run that wrote --out (same arguments): play only the trials it "
        "has not written",
    )


def retry_failed_option() -> Any:
    return typer.Option(
        False,
        "--retry-failed",
        help="with --resume: play the trials that failed again too (an outage, a timeout); "
        "their new results replace the failed ones",
    )


def overwrite_option() -> Any:
    return typer.Option(False, "--overwrite", help="replace an existing --out (and its journal)")


def hook_timeout_option() -> Any:
    return typer.Option(
        None,
        "--hook-timeout",
        metavar="SECONDS",
        help="budget of one env turn (env_config hook_timeout_seconds); over it, the episode "
        "fails with a timeout",
    )


def episode_timeout_option() -> Any:
    return typer.Option(
        None,
        "--episode-timeout",
        metavar="SECONDS",
        help="budget of one whole episode (env_config episode_timeout_seconds)",
    )


def max_failure_rate_option() -> Any:
    return typer.Option(
        None,
        "--max-failure-rate",
        min=0.0,
        max=1.0,
        metavar="F",
        help="exit 1 when more than this share of trials failed (default: only when all did)",
    )
