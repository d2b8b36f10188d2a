"""``agentsgym train ENV_ID --trainer NAME --model PATH``: rollouts, loss, optimizer steps."""

from __future__ import annotations

import inspect
import math
import shutil
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from agentsgym import DEFAULT_TOKENIZER, load_tokenizer, make
from agentsgym.cli import (
    build_agent,
    complete_env_id,
    console,
    exit_on_failures,
    max_concurrency_option,
    max_failure_rate_option,
    parse_key_values,
    print_failures,
    progress_bar,
)
from agentsgym.errors import TrainerOptionError
from agentsgym.output import (
    OPERATIONAL_AGENT_OPTIONS,
    RUN_LIMIT_ENV_KEYS,
    failure_report,
    is_secret,
    redact,
)
from agentsgym.registry import get_registry
from agentsgym.trainers import RolloutSource, StepMetrics, TrainResult
from agentsgym_trl.chat_templates import apply_chat_template_choice
from agentsgym_trl.checkpoints import (
    CHECKPOINT_PREFIX,
    changed_arguments,
    complete_checkpoints,
    last_checkpoint,
    read_run_state,
)

TRAIN_LOG = "train_log.jsonl"


def _factory_parameters(name: str) -> tuple[set[str], bool]:
    """The named keyword parameters of a trainer factory, and whether it takes ``**kw``."""
    factory = get_registry().trainer(name).load()
    try:
        parameters = list(inspect.signature(factory).parameters.values())
    except (TypeError, ValueError):
        return set(), True
    names = {p.name for p in parameters if p.kind is not inspect.Parameter.VAR_KEYWORD}
    return names, any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


def _default_tokenizer(model: str | None) -> str:
    from agentsgym_trl.tiny_model import TINY_MODEL

    if model is None or model == TINY_MODEL:
        return DEFAULT_TOKENIZER
    return model


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
    max_new_tokens: int = typer.Option(256, "--max-new-tokens", min=1, help="tokens per reply"),
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
) -> None:
    """Train on ENV_ID: play rollouts, compute the loss, step the optimizer.

    With --trainer dataset-sink, write the rollouts as a dataset instead. A checkpoint
    is written every --save-steps steps; --resume continues from the newest one. Exits 1
    when every episode failed (or more than --max-failure-rate of them).
    """
    if split not in ("train", "eval"):
        raise typer.BadParameter("--split must be train or eval")
    resume_from = _checkpoint_to_resume(output_dir, resume=resume, overwrite=overwrite)
    _quiet_progress_bars()
    started = time.perf_counter()
    tok = load_tokenizer(tokenizer or _default_tokenizer(model))
    tok, template = apply_chat_template_choice(tok, chat_template)
    if chat_template != "model":
        console.print(f"chat template: {template}")
    env = make(env_id, tokenizer=tok, env_config=parse_key_values(env_config, "--env-config"))
    dataset = env.get_train_dataset() if split == "train" else env.get_eval_dataset()
    rows = [dataset[i] for i in range(min(num_tasks, len(dataset)))]
    if not rows:
        raise typer.BadParameter(f"the {split} split of {env_id} has no tasks")

    # The command's own options go to the factory when it takes them; --trainer-option
    # values always do (an unknown one is the factory's error to report).
    accepted, takes_any = _factory_parameters(trainer)
    takes_model = "model" in accepted
    options: dict[str, Any] = {"output_dir": str(output_dir), "seed": seed}
    if takes_model:
        if model is None:
            raise typer.BadParameter(
                f"--trainer {trainer} trains a model: give --model PATH (or 'tiny')"
            )
        options.update(
            model=model, tokenizer=tok, temperature=temperature, max_new_tokens=max_new_tokens
        )
        if learning_rate is not None:
            options["learning_rate"] = learning_rate
    if not takes_any:
        options = {k: v for k, v in options.items() if k in accepted}
    trainer_options = parse_key_values(trainer_option, "--trainer-option")
    options.update(trainer_options)
    adapter = get_registry().trainer(trainer).build(**options)
    checkpointing = _checkpointing(adapter, trainer, save_steps, save_total_limit, resume_from)
    # The run's record goes into every checkpoint (and into --resume's error
    # messages): secrets at any depth are redacted (a JSON option's api_key, a URL's
    # userinfo), and top-level secret options left out, so that they may change.
    arguments: dict[str, Any] = redact(
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
            "agent_options": {
                k: v
                for k, v in parse_key_values(agent_option, "--agent-option").items()
                if k not in OPERATIONAL_AGENT_OPTIONS and not is_secret(k)
            },
            "env_config": {
                k: v
                for k, v in parse_key_values(env_config, "--env-config").items()
                if k not in RUN_LIMIT_ENV_KEYS
            },
            "trainer_options": {k: v for k, v in trainer_options.items() if not is_secret(k)},
        }
    )
    if resume_from is not None:
        differences = changed_arguments(read_run_state(resume_from).arguments, arguments)
        if differences:
            raise TrainerOptionError(
                f"--resume refuses to continue {resume_from} with other arguments (only "
                "--max-steps, --max-concurrency, the checkpoint options and connection "
                "options may change):\n  - " + "\n  - ".join(differences)
            )
        console.print(f"resuming from {resume_from}")
    if checkpointing:
        checkpointing["run_arguments"] = arguments

    player = None
    if agent is not None:
        player = build_agent(env_id, agent, agent_option)
    elif not takes_model:
        if model is not None:
            from agentsgym_trl.transformers_agent import TransformersAgent

            player = TransformersAgent(
                model,
                tokenizer=tok,
                temperature=temperature,
                max_new_tokens=max_new_tokens,
                seed=seed,
            )
        else:
            player = build_agent(env_id, None, agent_option)

    source = RolloutSource(
        rows,
        tokenizer=tok,
        num_rollouts=num_rollouts,
        tasks_per_step=min(tasks_per_step, len(rows)),
        max_concurrency=max_concurrency,
        seed=seed,
    )
    per_step = source.tasks_per_step * num_rollouts * env.config.episodes_per_trial
    with progress_bar() as progress:
        steps_bar = progress.add_task(f"{trainer} on {env_id}", total=max_steps)
        episodes_bar = progress.add_task("episodes", total=max_steps * per_step)
        errors: list[str | None] = []

        def on_episode(episode: Any) -> None:
            errors.append(episode.error)
            progress.advance(episodes_bar)

        source.on_episode = on_episode

        def on_step(metrics: StepMetrics) -> None:
            progress.update(
                steps_bar, completed=metrics.step, description=_describe(trainer, metrics)
            )

        try:
            result = adapter.train(
                source, max_steps=max_steps, on_step=on_step, agent=player, **checkpointing
            )
        except Exception:
            # With no episode to learn from a trainer may fail in its own way; what the
            # user needs to hear is why the episodes failed.
            report = failure_report(errors)
            if not report.fails_run(None):
                raise
            progress.stop()
            print_failures(report)
            exit_on_failures(report, None)
            raise
        finally:
            source.close()
            closer = getattr(player, "close", None)
            if callable(closer):
                closer()
    output_dir.mkdir(parents=True, exist_ok=True)
    log_path = result.write_log(output_dir / TRAIN_LOG)
    print_summary(result, time.perf_counter() - started, log_path)
    report = failure_report(errors)
    print_failures(report)
    exit_on_failures(report, max_failure_rate)


def _checkpoint_to_resume(output_dir: Path, *, resume: bool, overwrite: bool) -> Path | None:
    """The checkpoint ``--resume`` continues from, after refusing to train over an
    earlier run in ``output_dir`` without ``--resume`` or ``--overwrite``."""
    if resume and overwrite:
        raise typer.BadParameter("--resume and --overwrite exclude each other")
    checkpoints = complete_checkpoints(output_dir)
    finished = (output_dir / TRAIN_LOG).exists()
    if overwrite:
        for _, folder in checkpoints:
            shutil.rmtree(folder, ignore_errors=True)
        for torn in output_dir.glob(f"{CHECKPOINT_PREFIX}*"):
            shutil.rmtree(torn, ignore_errors=True)
        return None
    if resume:
        found = last_checkpoint(output_dir)
        if found is None and finished:
            raise TrainerOptionError(
                f"{output_dir} holds a finished run without a checkpoint to continue "
                "from; pass --overwrite to train again there (checkpoints are written "
                "every --save-steps N steps)"
            )
        if found is None:
            console.print(f"no checkpoint in {output_dir} yet: starting the run")
        return found
    if checkpoints or finished:
        what = f"checkpoints up to step {checkpoints[-1][0]}" if checkpoints else "a finished run"
        raise TrainerOptionError(
            f"--output-dir {output_dir} holds an earlier run ({what}); pass --resume to "
            "continue it or --overwrite to start over"
        )
    return None


def _checkpointing(
    adapter: Any, trainer: str, save_steps: int, save_total_limit: int, resume_from: Path | None
) -> dict[str, Any]:
    """The checkpoint keywords of ``adapter.train``, if it takes them."""
    try:
        parameters = inspect.signature(adapter.train).parameters
    except (TypeError, ValueError):
        parameters = {}
    takes = "resume_from" in parameters or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()
    )
    if not takes:
        if resume_from is not None:
            raise TrainerOptionError(f"trainer {trainer} cannot resume from a checkpoint")
        return {}
    return {
        "save_steps": save_steps,
        "save_total_limit": save_total_limit,
        "resume_from": resume_from,
    }


def _quiet_progress_bars() -> None:
    """The CLI shows its own progress; silence the libraries' tqdm bars."""
    try:
        from huggingface_hub.utils import disable_progress_bars
        from transformers.utils import logging as hf_logging

        disable_progress_bars()
        hf_logging.disable_progress_bar()
    except ImportError:  # pragma: no cover - both ship with transformers
        pass


def _describe(trainer: str, metrics: StepMetrics) -> str:
    parts = [f"{trainer} step {metrics.step}"]
    if metrics.loss is not None:
        parts.append(f"loss {metrics.loss:.4g}")
    if metrics.mean_reward is not None:
        parts.append(f"reward {metrics.mean_reward:.3g}")
    return ", ".join(parts)


def print_summary(result: TrainResult, seconds: float, log_path: Path) -> None:
    table = Table(title=f"{result.num_steps} steps in {seconds:.1f}s")
    table.add_column("", justify="left")
    table.add_column("value", justify="right")
    rewards = [s.mean_reward for s in result.steps if s.mean_reward is not None]
    signal = RewardSignal.of(result)
    rows: list[tuple[str, str]] = [("steps", str(result.num_steps))]
    if result.final_loss is not None:
        rows.append(("final loss", f"{result.final_loss:.6g}"))
    if rewards:
        rows.append(("mean reward", f"{statistics.fmean(rewards):.4g}"))
        rows.append(("reward, first -> last step", f"{rewards[0]:.3g} -> {rewards[-1]:.3g}"))
    rows.append(("rollouts", str(sum(s.num_rollouts for s in result.steps))))
    failed = sum(s.num_failed for s in result.steps)
    rows.append(("failed episodes", str(failed)))
    rows.extend(signal.rows())
    for name, path in sorted(result.artifacts.items()):
        rows.append((name, path))
    rows.append(("step log", str(log_path)))
    for name, value in rows:
        table.add_row(name, value)
    console.print(table)
    if result.final_loss is not None:  # a trainer that learns, not a sink
        verdict = signal.verdict()
        if verdict:
            console.print(verdict, soft_wrap=True)
    loss = result.final_loss
    if loss is not None and not math.isfinite(loss):
        console.print("[bold red]the loss is not finite[/]; lower --learning-rate")
        raise typer.Exit(1)


@dataclass
class RewardSignal:
    """Whether a run had anything to learn from, summed over the steps that report it
    (``groups`` and ``groups_with_signal`` in the step log, see
    :func:`agentsgym_trl.screening.reward_signal`). A loss of 0 and an unchanged
    reward say nothing by themselves; this says why."""

    reported_steps: int = 0
    groups: int = 0
    groups_with_signal: int = 0
    steps_with_signal: int = 0
    rollouts: int = 0
    masked_rollouts: int | None = None

    @classmethod
    def of(cls, result: TrainResult) -> RewardSignal:
        signal = cls()
        for step in result.steps:
            if "masked_rollouts" in step.extra:
                masked = int(step.extra["masked_rollouts"])
                signal.masked_rollouts = (signal.masked_rollouts or 0) + masked
            if "groups" not in step.extra:
                continue
            with_signal = int(step.extra.get("groups_with_signal", 0))
            signal.reported_steps += 1
            signal.groups += int(step.extra["groups"])
            signal.groups_with_signal += with_signal
            signal.steps_with_signal += int(with_signal > 0)
            signal.rollouts += step.num_rollouts
        return signal

    def rows(self) -> list[tuple[str, str]]:
        if not self.reported_steps:
            return [("groups with differing rewards", "not reported by this trainer")]
        counts = (
            f"{self.groups_with_signal} of {self.groups} "
            f"(in {self.steps_with_signal} of {self.reported_steps} steps)"
        )
        rows = [("groups with differing rewards", counts)]
        if self.masked_rollouts is not None:
            rows.append(
                ("rollouts masked (a reply cut)", f"{self.masked_rollouts} of {self.rollouts}")
            )
        return rows

    def verdict(self) -> str | None:
        """One line when no step could learn anything, saying why and what to change."""
        if not self.reported_steps:
            return None
        if self.groups_with_signal == 0:
            return (
                "[bold yellow]no learning signal[/]: in every group all rollouts got the "
                "same reward, so every advantage was 0 and no step moved the policy (a "
                "smoke run of the plumbing). To learn, the model must win some rollouts of "
                "a task and lose others: start from a model that sometimes wins (e.g. "
                "`python -m agentsgym_trl.tiny_model tiny-model --warm-start guess-number`, "
                "see docs/training.md), an easier --env-config, more --num-rollouts or a "
                "higher --temperature."
            )
        if self.masked_rollouts is not None and self.masked_rollouts >= self.rollouts > 0:
            return (
                "[bold yellow]no learning signal[/]: every rollout held a reply cut at "
                "--max-new-tokens, and such rollouts are masked out of the loss; raise "
                "--max-new-tokens (or pass --trainer-option mask_truncated_completions=false)."
            )
        return None
