"""``agentsgym train ENV_ID --trainer NAME --model PATH``: rollouts, loss, optimizer steps.

The command's steps, each in its module: the checkpoints in ``--output-dir``
(:mod:`.train_checkpoints`), the tasks, trainer, run record and player
(:mod:`.train_setup`), the steps under progress bars (:mod:`.train_progress`) and
the closing summary (:mod:`.train_summary`).
"""

from __future__ import annotations

import time
from pathlib import Path

import typer

from agentsgym import StepMetrics, get_registry, load_tokenizer
from agentsgym.cli import (
    complete_env_id,
    console,
    exit_on_failures,
    failure_report,
    max_concurrency_option,
    max_failure_rate_option,
    parse_key_values,
    print_failures,
)
from agentsgym_trl.chat_templates import apply_chat_template_choice
from agentsgym_trl.played_rollouts import PLAYED_FILE, RecordingSource
from agentsgym_trl.train_checkpoints import (
    TRAIN_LOG,
    check_resume_arguments,
    checkpoint_keywords,
    checkpoint_to_resume,
)
from agentsgym_trl.train_async import stream_keywords
from agentsgym_trl.train_pace import pace_warning
from agentsgym_trl.train_progress import quiet_progress_bars, train_with_progress
from agentsgym_trl.train_setup import (
    DEFAULT_MAX_NEW_TOKENS,
    TINY_MAX_NEW_TOKENS,
    default_max_new_tokens,
    default_tokenizer,
    player,
    run_arguments,
    task_rows,
    trainer_options,
)
from agentsgym_trl.train_summary import print_summary


def train(
    env_id: str = typer.Argument(
        ...,
        help="registered env id, e.g. agentsgym/GuessTheNumber-v0",
        autocompletion=complete_env_id,
    ),
    trainer: str = typer.Option(
        "trl-grpo", "--trainer", help="trainer adapter (agentsgym list-trainers)"
    ),
    model: str | None = typer.Option(
        None, "--model", help="local model folder (or hub name), or 'tiny' for a tiny random model"
    ),
    max_steps: int = typer.Option(10, "--max-steps", min=1, help="training steps"),
    output_dir: Path = typer.Option(
        Path("agentsgym-train"), "--output-dir", help="model, logs, data"
    ),
    num_tasks: int = typer.Option(16, "--num-tasks", min=1, help="tasks taken from the split"),
    num_rollouts: int = typer.Option(
        4, "--num-rollouts", min=1, help="rollouts per task (group size)"
    ),
    tasks_per_step: int = typer.Option(
        2, "--tasks-per-step", min=1, help="tasks per training step"
    ),
    split: str = typer.Option("train", "--split", help="train or eval"),
    tokenizer: str | None = typer.Option(None, "--tokenizer", help="default: the model's"),
    chat_template: str = typer.Option(
        "model",
        "--chat-template",
        help="model (the tokenizer's own), training (TRL's prefix-preserving training "
        "variant: Qwen3, DeepSeek-R1 episodes then stay in one segment) or a .jinja path; "
        "used to render rollouts and to train alike",
    ),
    learning_rate: float | None = typer.Option(
        None, "--learning-rate", help="default: the trainer's"
    ),
    temperature: float = typer.Option(1.0, "--temperature", min=0.0, help="sampling temperature"),
    max_new_tokens: int | None = typer.Option(
        None,
        "--max-new-tokens",
        min=1,
        help=f"tokens per reply (default: {DEFAULT_MAX_NEW_TOKENS}; {TINY_MAX_NEW_TOKENS} with "
        "--model tiny, whose replies always run to the limit)",
    ),
    seed: int = typer.Option(0, "--seed"),
    agent: str | None = typer.Option(
        None, "--agent", help="who plays (default: the trainer's model; for sinks the env's agent)"
    ),
    agent_option: list[str] | None = typer.Option(
        None, "--agent-option", help="key=value, repeatable"
    ),
    env_config: list[str] | None = typer.Option(None, "--env-config", help="key=value, repeatable"),
    trainer_option: list[str] | None = typer.Option(
        None, "--trainer-option", help="key=value for the trainer, repeatable (e.g. beta=0.04)"
    ),
    max_concurrency: int = max_concurrency_option(),
    max_failure_rate: float | None = max_failure_rate_option(),
    save_steps: int = typer.Option(
        50, "--save-steps", min=0, help="write a checkpoint every N steps (0: none)"
    ),
    save_total_limit: int = typer.Option(
        2, "--save-total-limit", min=1, help="checkpoints kept (the newest)"
    ),
    resume: bool = typer.Option(
        False, "--resume", help="continue from the newest checkpoint in --output-dir"
    ),
    overwrite: bool = typer.Option(
        False, "--overwrite", help="start over in an --output-dir that holds an earlier run"
    ),
    async_rollouts: bool = typer.Option(
        False,
        "--async",
        help="play rollouts ahead of the trainer, at most --max-staleness versions "
        "(docs/training.md, asynchronous training)",
    ),
    max_staleness: int = typer.Option(
        1, "--max-staleness", min=0, help="with --async: how many updates old a token may be"
    ),
) -> None:
    """Train on ENV_ID: play rollouts, compute the loss, step the optimizer.

    With --trainer dataset-sink, write the rollouts as a dataset instead. A checkpoint
    is written every --save-steps steps; --resume continues from the newest one. Exits 1
    when every episode failed (or more than --max-failure-rate of them).
    """
    if split not in ("train", "eval"):
        raise typer.BadParameter("--split must be train or eval")
    resume_from = checkpoint_to_resume(output_dir, resume=resume, overwrite=overwrite)
    quiet_progress_bars()
    started = time.perf_counter()
    if max_new_tokens is None:
        max_new_tokens = default_max_new_tokens(model)
    tok = load_tokenizer(tokenizer or default_tokenizer(model))
    tok, template = apply_chat_template_choice(tok, chat_template)
    if chat_template != "model":
        console.print(f"chat template: {template}")
    env_values = parse_key_values(env_config, "--env-config")
    env, rows = task_rows(env_id, tok, env_values, split, num_tasks)

    trainer_values = parse_key_values(trainer_option, "--trainer-option")
    options, takes_model = trainer_options(
        trainer,
        {"output_dir": str(output_dir), "seed": seed},
        {
            "model": model,
            "tokenizer": tok,
            "temperature": temperature,
            "max_new_tokens": max_new_tokens,
            "learning_rate": learning_rate,
        },
        trainer_values,
    )
    adapter = get_registry().trainer(trainer).build(**options)
    checkpointing = checkpoint_keywords(adapter, trainer, save_steps, save_total_limit, resume_from)
    streaming = stream_keywords(
        adapter, trainer, enabled=async_rollouts, max_staleness=max_staleness
    )
    arguments = run_arguments(
        {
            "env_id": env_id,
            "trainer": trainer,
            "model": model,
            "split": split,
            "num_tasks": len(rows),
            "num_rollouts": num_rollouts,
            "tasks_per_step": tasks_per_step,
            "tokenizer": tokenizer,
            "chat_template": chat_template,
            "learning_rate": learning_rate,
            "temperature": temperature,
            "max_new_tokens": max_new_tokens,
            "seed": seed,
            "agent": agent,
        },
        parse_key_values(agent_option, "--agent-option"),
        env_values,
        trainer_values,
    )
    if resume_from is not None:
        check_resume_arguments(resume_from, arguments)
    if checkpointing:
        checkpointing["run_arguments"] = arguments

    playing = player(
        env_id,
        agent,
        agent_option,
        takes_model=takes_model,
        model=model,
        tokenizer=tok,
        sampling={"temperature": temperature, "max_new_tokens": max_new_tokens, "seed": seed},
    )
    played = output_dir / PLAYED_FILE
    source = RecordingSource(
        rows,
        record_to=played,
        append=resume_from is not None,
        tokenizer=tok,
        num_rollouts=num_rollouts,
        tasks_per_step=min(tasks_per_step, len(rows)),
        max_concurrency=max_concurrency,
        seed=seed,
    )
    result, errors = train_with_progress(
        adapter,
        source,
        trainer=trainer,
        env_id=env_id,
        max_steps=max_steps,
        episodes_per_step=source.tasks_per_step * num_rollouts * env.config.episodes_per_trial,
        player=playing,
        checkpointing={**checkpointing, **streaming},
        after_first_step=lambda metrics: _warn_if_slow(
            metrics, max_steps, max_new_tokens, env.config.max_steps_per_episode
        ),
    )
    output_dir.mkdir(parents=True, exist_ok=True)
    log_path = result.write_log(output_dir / TRAIN_LOG)
    print_summary(result, time.perf_counter() - started, log_path, played=played, env_id=env_id)
    report = failure_report(errors)
    print_failures(report)
    exit_on_failures(report, max_failure_rate)


def _warn_if_slow(
    metrics: StepMetrics, max_steps: int, max_new_tokens: int, max_steps_per_episode: int
) -> None:
    warning = pace_warning(
        metrics,
        max_steps=max_steps,
        max_new_tokens=max_new_tokens,
        max_steps_per_episode=max_steps_per_episode,
    )
    if warning:
        console.print(warning, soft_wrap=True)
