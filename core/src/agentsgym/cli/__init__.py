"""The ``agentsgym`` command line, and the kit that plugins' commands import (public,
docs/plugin-authors.md): consoles, shared options, agent and executor choice, and for
long runs (``eval``) the planning of a run and its streamed, resumable output, and the
lock a command holds on what it writes (``train`` locks its ``--output-dir``). Library
code logs; the CLI owns the terminal."""

from __future__ import annotations

from agentsgym.atomic_files import write_atomically
from agentsgym.cli.agent_choice import AgentChoices, RunAgents, split_role_options
from agentsgym.cli.app import build_app, main
from agentsgym.cli.executor_flags import given_executor_flags
from agentsgym.cli.options import (
    MAX_CONCURRENCY,
    MAX_ROLLOUTS,
    MAX_TASKS,
    ExecutorChoice,
    accepted_options,
    build_component,
    check_options,
    complete_env_id,
    episode_timeout_option,
    executor_option,
    executor_options_option,
    hook_timeout_option,
    max_concurrency_option,
    max_failure_rate_option,
    num_workers_option,
    overwrite_option,
    parse_key_values,
    resume_option,
    retry_failed_option,
    time_budgets,
    tokenizer_cli_option,
    tokenizer_option,
)
from agentsgym.cli.rollout import agent_name, build_agent
from agentsgym.cli.running import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    RunPlan,
    check_output_after_inputs,
    exit_on_failures,
    plan_split,
    print_failures,
    progress_bar,
    run_into_output,
    sigterm_as_interrupt,
)
from agentsgym.cli.terminal import console, err_console
from agentsgym.output import (
    OPERATIONAL_AGENT_OPTIONS,
    RUN_LIMIT_ENV_KEYS,
    FinishResult,
    OutputLock,
    OutputPaths,
    check_output_path,
    choose_mode,
    failure_report,
)

__all__ = [
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "MAX_CONCURRENCY",
    "MAX_ROLLOUTS",
    "MAX_TASKS",
    "OPERATIONAL_AGENT_OPTIONS",
    "RUN_LIMIT_ENV_KEYS",
    "AgentChoices",
    "ExecutorChoice",
    "FinishResult",
    "OutputLock",
    "OutputPaths",
    "RunAgents",
    "RunPlan",
    "accepted_options",
    "agent_name",
    "build_agent",
    "build_app",
    "build_component",
    "check_options",
    "check_output_after_inputs",
    "check_output_path",
    "choose_mode",
    "complete_env_id",
    "console",
    "episode_timeout_option",
    "err_console",
    "executor_option",
    "executor_options_option",
    "exit_on_failures",
    "failure_report",
    "given_executor_flags",
    "hook_timeout_option",
    "main",
    "max_concurrency_option",
    "max_failure_rate_option",
    "num_workers_option",
    "overwrite_option",
    "parse_key_values",
    "plan_split",
    "print_failures",
    "progress_bar",
    "resume_option",
    "retry_failed_option",
    "run_into_output",
    "sigterm_as_interrupt",
    "split_role_options",
    "time_budgets",
    "tokenizer_cli_option",
    "tokenizer_option",
    "write_atomically",
]
