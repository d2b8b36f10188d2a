"""``agentsgym train ENV_ID --trainer NAME --model PATH``: rollouts, loss, optimizer steps.

The command's steps, each in its module: the checkpoints in ``--output-dir``
(:mod:`.train_checkpoints`), the tasks, trainer, run record and player
(:mod:`.train_setup`), the steps under progress bars (:mod:`.train_progress`) and
the closing summary (:mod:`.train_summary`).
"""

# ruff: noqa: B008 - typer declares a command's options as its parameters' defaults
from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

import typer

from agentsgym import load_tokenizer
from agentsgym.cli import (
    ExecutorChoice,
    complete_env_id,
    console,
    executor_option,
    executor_options_option,
    exit_on_failures,
    failure_report,
    log_samples_every_option,
    log_samples_option,
    max_concurrency_option,
    max_failure_rate_option,
    num_workers_option,
    parse_key_values,
    print_failures,
    project_option,
    report_to_option,
    run_name_option,
    tracker_class,
)
from agentsgym.errors import TrainerOptionError
from agentsgym.runtime import RolloutSource, StepMetrics, get_registry
from agentsgym_trl.batch_trainer import BatchTrainer
from agentsgym_trl.chat_templates import apply_chat_template_choice
from agentsgym_trl.played_rollouts import PLAYED_FILE, RecordingSource
from agentsgym_trl.served_policy import served_policy
from agentsgym_trl.train_async import stream_keywords
from agentsgym_trl.train_checkpoints import (
    TRAIN_LOG,
    check_resume_arguments,
    checkpoint_keywords,
    checkpoint_to_resume,
    lock_output_dir,
)
from agentsgym_trl.train_eval import (
    DEFAULT_EVAL_TASKS,
    HeldOutEval,
    evaluation_keywords,
    held_out_rows,
)
from agentsgym_trl.train_pace import pace_warning
from agentsgym_trl.train_progress import quiet_progress_bars, train_with_progress
from agentsgym_trl.train_setup import (
    DEFAULT_MAX_NEW_TOKENS,
    TINY_MAX_NEW_TOKENS,
    TrainAgents,
    default_max_new_tokens,
    default_tokenizer,
    player,
    run_arguments,
    task_rows,
    trainer_options,
)
from agentsgym_trl.train_summary import print_summary
from agentsgym_trl.train_tracking import TrainTracking, tracking_keywords
from agentsgym_trl.train_vllm import (
    VLLMOptions,
    check_generates_with_an_engine,
    engine_sampling,
    initial_model,
    served_folder,
    start_progress,
    trains_on_cpu,
    vllm_generation,
)


def train(
    command: typer.Context,
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
    agent: list[str] | None = typer.Option(
        None,
        "--agent",
        help="who plays (default: the trainer's model; for sinks the env's agent); "
        "ROLE=NAME: that role of an env with roles plays with NAME and is not trained "
        "(repeatable; a role without one is played by the model: self-play)",
    ),
    agent_option: list[str] | None = typer.Option(
        None,
        "--agent-option",
        help="key=value, repeatable (ROLE.key=value: to that role's agent only)",
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
    executor: str = executor_option(),
    num_workers: int | None = num_workers_option(),
    executor_option: list[str] | None = executor_options_option(),
    report_to: str = report_to_option(),
    project: str = project_option(),
    run_name: str | None = run_name_option(),
    log_samples_every: int = log_samples_every_option(),
    log_samples: int = log_samples_option(),
    eval_steps: int = typer.Option(
        0,
        "--eval-steps",
        min=0,
        help="every N steps, and after the last, play held-out tasks once each (sampled, "
        "at --temperature) and log their scores under eval/ (eval/reward_mean, "
        "eval/success_rate) in train_log.jsonl and the tracker; 0: never",
    ),
    eval_tasks: int | None = typer.Option(
        None,
        "--eval-tasks",
        min=1,
        help=f"held-out tasks per evaluation (default: {DEFAULT_EVAL_TASKS}, or as many as "
        "there are): the eval split's first ones (with --split eval, those after the "
        "--num-tasks trained ones)",
    ),
    vllm_server_base_url: str | None = typer.Option(
        None,
        "--vllm-server-base-url",
        help="generate with the vLLM server at this URL (started with VLLM_SERVER_DEV_MODE=1 "
        "and --enable-scale-out); the trained weights are pushed into it after every update "
        "(docs/training.md, Training with vLLM)",
    ),
    vllm_python: str | None = typer.Option(
        None,
        "--vllm-python",
        help="start a vLLM server with this python (or venv folder) and generate with it; "
        "its log goes to --output-dir/vllm-server.log",
    ),
    vllm_server_port: int | None = typer.Option(
        None, "--vllm-server-port", help="the started server's port (default: a free one)"
    ),
    vllm_server_timeout: float = typer.Option(
        900.0, "--vllm-server-timeout", help="seconds to wait for the started server to be ready"
    ),
    vllm_weight_sync: str = typer.Option(
        "auto",
        "--vllm-weight-sync",
        help="how weights reach vLLM: reload (safetensors reloaded in place; any device), "
        "nccl or ipc (vLLM's GPU transfer engines); auto: reload on a CPU, nccl on a GPU",
    ),
    vllm_sync_timeout: float = typer.Option(
        600.0, "--vllm-sync-timeout", help="seconds one weight push may take before the step fails"
    ),
    vllm_verify_tolerance: float | None = typer.Option(
        None,
        "--vllm-verify-tolerance",
        help="after each weight push, fail the step if vLLM's next-token logprobs for a probe "
        "differ from the trainer's by more (default: 0.01 on a CPU, no check on a GPU; 0: none)",
    ),
    vllm_serve_arg: list[str] | None = typer.Option(
        None,
        "--vllm-serve-arg",
        help="an argument of `vllm serve` for the started server, repeatable "
        "(--vllm-serve-arg=--max-model-len=2048)",
    ),
) -> None:
    """Train on ENV_ID: play rollouts, compute the loss, step the optimizer.

    With --trainer dataset-sink, write the rollouts as a dataset instead. A checkpoint
    is written every --save-steps steps; --resume continues from the newest one. With
    --eval-steps N, held-out tasks are played every N steps (scores under eval/). Exits 1
    when every episode failed (or more than --max-failure-rate of them).
    """
    if split not in ("train", "eval"):
        raise typer.BadParameter("--split must be train or eval")
    if eval_tasks is not None and not eval_steps:
        raise typer.BadParameter(
            f"--eval-tasks {eval_tasks} says how many tasks an evaluation plays, and there "
            "is none: give --eval-steps N too (evaluate every N steps)"
        )
    where = ExecutorChoice.parse(executor, num_workers, executor_option)
    remote = where.executor.remote
    if remote and chat_template != "model":
        raise TrainerOptionError(
            f"--executor {executor} loads the tokenizer by name in each worker, so it plays "
            "with the model's own chat template: drop --chat-template, or give a tokenizer "
            "folder whose template is the one to use (--tokenizer)"
        )
    vllm = VLLMOptions(
        base_url=vllm_server_base_url,
        python=vllm_python,
        port=vllm_server_port,
        server_timeout=vllm_server_timeout,
        weight_sync=vllm_weight_sync,
        sync_timeout=vllm_sync_timeout,
        serve_args=tuple(vllm_serve_arg or ()),
        verify_tolerance=vllm_verify_tolerance,
    )
    vllm.check()
    tracker_class(report_to)  # a tracker that is not installed: said before a model loads
    lock_output_dir(command, output_dir)  # held until the command ends
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
    held_out = (
        held_out_rows(env_id, env, split=split, num_trained=len(rows), eval_tasks=eval_tasks)
        if eval_steps
        else []
    )
    agents = TrainAgents.parse(env_id, env, agent, agent_option)
    trained_roles = agents.trained_roles(env)

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
    if vllm.enabled:
        check_generates_with_an_engine(adapter, trainer, agents)
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
        },
        agents,
        env_values,
        trainer_values,
    )
    if resume_from is not None:
        check_resume_arguments(resume_from, arguments)
    if checkpointing:
        checkpointing["run_arguments"] = arguments

    playing = player(
        env_id,
        env,
        agents,
        takes_model=takes_model,
        model=model,
        tokenizer=tok,
        sampling={"temperature": temperature, "max_new_tokens": max_new_tokens, "seed": seed},
        remote=remote,
    )
    own_policy = None
    if playing is None and remote and not vllm.enabled:
        own_policy = _own_policy(adapter, trainer, executor)
    played = output_dir / PLAYED_FILE
    playing_options: dict[str, Any] = {
        "tokenizer": (tokenizer or default_tokenizer(model)) if remote else tok,
        "max_concurrency": max_concurrency,
        "seed": seed,
        "executor": where.name,
        "executor_options": where.options,
        # a sink's agents by role (rollout's choice) hold the role agents already
        "opponents": {} if isinstance(playing, dict) else agents.opponents(remote=remote),
        # the rows are those of the env the command line names: the user's own choice,
        # a server URL included (as `rollout ENV_ID` plays it)
        "allow_remote": True,
    }
    source = RecordingSource(
        rows,
        record_to=played,
        append=resume_from is not None,
        trained_roles=trained_roles,
        num_rollouts=num_rollouts,
        tasks_per_step=min(tasks_per_step, len(rows)),
        **playing_options,
    )
    evaluation = None
    if held_out:
        evaluation = HeldOutEval(
            RolloutSource(
                held_out,
                num_rollouts=1,
                tasks_per_step=len(held_out),
                shuffle=False,
                **playing_options,
            ),
            every=eval_steps,
            last_step=max_steps,
            trained_roles=trained_roles,
        )
    evaluating = evaluation_keywords(adapter, trainer, evaluation)
    with contextlib.ExitStack() as serving:
        if own_policy is not None:  # served to the workers, which cannot be handed it
            playing = serving.enter_context(served_policy(own_policy))
        if evaluation is not None:
            serving.callback(evaluation.source.close)
        tracking = TrainTracking.start(
            report_to,
            project=project,
            run_name=run_name,
            config={
                **arguments,
                "output_dir": str(output_dir),
                "max_steps": max_steps,
                "eval_steps": eval_steps,
                "eval_tasks": len(held_out),
            },
            samples_every=log_samples_every,
            samples=log_samples,
        )
        if tracking is not None:
            serving.callback(tracking.finish)
        reporting = tracking_keywords(adapter, tracking)
        if vllm.enabled:
            generation = serving.enter_context(
                vllm_generation(
                    vllm,
                    served=lambda: served_folder(model, initial_model(adapter), tok, output_dir),
                    output_dir=output_dir,
                    cpu=trains_on_cpu(),
                    sampling=engine_sampling(temperature, max_new_tokens, trainer_values),
                    on_progress=start_progress(),
                )
            )
            playing = generation.agent_spec() if remote else generation.agent
            streaming = {**streaming, "engine": generation}
        result, errors = train_with_progress(
            adapter,
            source,
            trainer=trainer,
            env_id=env_id,
            max_steps=max_steps,
            episodes_per_step=source.tasks_per_step * num_rollouts * _episodes_per_trial(env),
            player=playing,
            checkpointing={**checkpointing, **streaming, **reporting, **evaluating},
            after_first_step=lambda metrics: _warn_if_slow(
                metrics, max_steps, max_new_tokens, env.config.max_steps_per_episode
            ),
            # an adapter that reports through its own library logs its steps itself
            also_on_step=tracking.on_step if tracking is not None and not reporting else None,
            also_on_episode=tracking.on_episode if tracking is not None else None,
        )
    output_dir.mkdir(parents=True, exist_ok=True)
    log_path = result.write_log(output_dir / TRAIN_LOG)
    print_summary(result, time.perf_counter() - started, log_path, played=played, env_id=env_id)
    report = failure_report(errors)
    print_failures(report)
    exit_on_failures(report, max_failure_rate)


def _episodes_per_trial(env: Any) -> int:
    """Episodes a trial plays (one per role and episode in an env with roles)."""
    return env.config.episodes_per_trial * max(1, len(env.role_names))


def _own_policy(adapter: Any, trainer: str, executor: str) -> Any:
    """The agent that plays ``adapter``'s own model, to serve to the executor's workers."""
    policy = getattr(adapter, "policy", None)
    agent = policy() if callable(policy) and isinstance(adapter, BatchTrainer) else None
    if agent is None:
        raise TrainerOptionError(
            f"trainer {trainer} plays its model inside its own loop, which --executor "
            f"{executor} cannot reach; use --trainer per-token-grpo, or give the workers "
            "an agent of their own (--agent openai --agent-option base_url=...)"
        )
    return agent


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
