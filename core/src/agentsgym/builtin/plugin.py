"""The core's built-in plugin: the example env and the generic agents."""

from __future__ import annotations

from agentsgym.hookspecs import hookimpl
from agentsgym.registry import RegisterAgent, RegisterEnv, RegisterTrainer


@hookimpl
def register_envs(register: RegisterEnv) -> None:
    register(
        "agentsgym/GuessTheNumber-v0",
        "agentsgym.builtin.guess_number:GuessTheNumberEnv",
        description="Find a hidden integer in [1, 100] from higher/lower hints (example env)",
        default_agent="agentsgym/bisect",
    )


@hookimpl
def register_agents(register: RegisterAgent) -> None:
    register(
        "scripted",
        "agentsgym.agents.scripted:ScriptedAgent",
        description="replies with a fixed list of messages (option: replies=[...])",
    )
    register(
        "agentsgym/bisect",
        "agentsgym.builtin.guess_number:BisectAgent",
        description="plays GuessTheNumber by bisection",
    )
    register(
        "transformers",
        "agentsgym.agents.transformers_agent:TransformersAgent",
        description="a local causal LM, token-in/token-out, micro-batched (options: model=PATH "
        "or 'tiny', temperature, top_p, top_k, max_new_tokens, seed, batch_size, "
        "batch_window_ms, logprobs=sampling|model)",
    )
    register(
        "openai",
        "agentsgym.agents.openai_agent:OpenAIAgent",
        description="an OpenAI-compatible server such as vLLM (options: base_url, model, "
        "api_key, temperature, max_tokens, timeout, max_retries, max_concurrency, "
        "extra_body, api=chat|completions)",
    )


@hookimpl
def register_trainers(register: RegisterTrainer) -> None:
    register(
        "trl-grpo",
        "agentsgym.trainers.trl_grpo:TRLGRPOAdapter",
        description="trl.GRPOTrainer on the runner's rollouts (rollout_func + env_mask); "
        "episode reward as the sequence reward",
    )
    register(
        "per-token-grpo",
        "agentsgym.trainers.per_token:PerTokenGRPOTrainer",
        description="group-normalised per-token rewards as advantages, agent_token_mask in "
        "the loss (small torch loop)",
    )
    register(
        "dataset-sink",
        "agentsgym.trainers.dataset_sink:DatasetSink",
        description="writes the padded batches as a datasets.Dataset (DIR/rollouts.parquet)",
    )
