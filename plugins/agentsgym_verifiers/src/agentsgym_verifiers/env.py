"""VerifiersEnv: a verifiers v1 taskset played as an agentsgym env.

``agentsgym.make("verifiers://TASKSET", tokenizer=..., env_config={...})`` gives a
:class:`VerifiersEnv`. Its episodes are rollouts of verifiers' own env server: the
bridge (:mod:`~agentsgym_verifiers.bridge`, a child process in the venv verifiers
lives in) sends each task to the server with a run request whose model endpoint is
a session of agentsgym's model gateway. verifiers' harness program talks to that
endpoint as to any OpenAI-compatible server; the gateway answers with the run's
model and records the exact ids of every call, so the episode's tokens are the ones
the model saw and sampled (docs/harness.md). The server scores the rollout with the
taskset's own rubric; the weighted total is the episode's reward (spread over the
tokens by ``reward_strategy``), and each named reward and metric is kept in the
episode's metrics as ``verifiers/NAME``.

It is a harness env (:class:`agentsgym_gateway.HarnessEnv`): ``agentsgym rollout``,
``eval``, ``--resume`` and ``agentsgym train`` play it like any env, the model a
local one (``--agent transformers``, the trainer's policy) or a server
(``backend_url``, or an ``openai`` agent's ``base_url``).
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentsgym import Episode, EpisodeContext
from agentsgym.errors import EpisodeError, RunSettingsError
from agentsgym_gateway import CallableProgram, HarnessEnv, ModelGateway, ProgramOutcome, ProgramRun
from agentsgym_verifiers.bridge import VerifiersBridge
from agentsgym_verifiers.config import PYTHON_VARIABLE, VerifiersConfig
from agentsgym_verifiers.urls import canonical_url, taskset_id

if TYPE_CHECKING:
    import datasets

METRIC_PREFIX = "verifiers/"
TASKS_TIMEOUT_SECONDS = 600.0

_summary: contextvars.ContextVar[dict[str, Any]] = contextvars.ContextVar("verifiers_summary")
"""The summary of the rollout an episode is playing (set by its program, read when its
episode is built): one dict per :meth:`VerifiersEnv.aplay_program` call."""


class VerifiersEnv(HarnessEnv):
    """See the module docstring.

    :param url: ``verifiers://TASKSET_ID``.
    :param tokenizer: the model's tokenizer (the episodes' tokens are rendered with it).
    :param env_config: :class:`~agentsgym_verifiers.config.VerifiersConfig` keys.
    """

    config_class = VerifiersConfig
    config: VerifiersConfig

    def __init__(
        self,
        url: str,
        tokenizer: Any = None,
        env_config: dict[str, Any] | None = None,
        *,
        plugins: Any = (),
    ) -> None:
        super().__init__(tokenizer, env_config, plugins=plugins)
        self.taskset_id = taskset_id(url)
        self.url = canonical_url(url)
        self._bridge: VerifiersBridge | None = None
        self._bridge_lock = threading.Lock()

    # ------------------------------------------------------------------ the bridge
    def bridge(self) -> VerifiersBridge:
        """The bridge to verifiers' env server, started on first use."""
        with self._bridge_lock:
            if self._bridge is None or not self._bridge.alive:
                python = self.config.python_executable()
                if python is None:
                    raise RunSettingsError(
                        f"{self.url}: say which python has verifiers==0.4.0: `python` in the "
                        f"env_config or ${PYTHON_VARIABLE} (verifiers' pins, openai<3 and "
                        "mcp==2.0.0, need a venv of their own: python -m venv venv-verifiers "
                        "&& venv-verifiers/bin/pip install verifiers==0.4.0 uv)"
                    )
                settings = {
                    "env": self.config.verifiers_env(self.taskset_id),
                    "address": self.config.server_address,
                    "max_concurrent": self.config.max_concurrent,
                    "startup_timeout": self.config.startup_timeout_seconds,
                }
                bridge = VerifiersBridge(python, settings, python_path=self.config.python_path)
                bridge.start(timeout=self.config.startup_timeout_seconds + 30)
                self._bridge = bridge
            return self._bridge

    def close(self) -> None:
        """Stop the bridge (and the env server it hosts), then the gateways."""
        with self._bridge_lock:
            bridge, self._bridge = self._bridge, None
        if bridge is not None:
            bridge.close()
        super().close()

    # ------------------------------------------------------------------ datasets
    def tasks(self) -> list[dict[str, Any]]:
        """The task data of the taskset's tasks (``num_tasks`` of them), loaded by verifiers."""
        return self.bridge().tasks(self.config.num_tasks, timeout=TASKS_TIMEOUT_SECONDS)

    def get_train_dataset(self) -> datasets.Dataset:
        """The taskset's tasks as rows (task_data: each task's ``TaskData``, as verifiers
        dumps it)."""
        return self.make_dataset(self.tasks())

    def get_eval_dataset(self) -> datasets.Dataset:
        """The same tasks: a verifiers taskset has no split of its own (choose one with
        its settings, ``taskset`` in the env_config)."""
        return self.get_train_dataset()

    # ------------------------------------------------------------------ the program
    def program(self, task_data: dict[str, Any]) -> CallableProgram:
        return CallableProgram(self._play)

    def prepare(self, task_data: dict[str, Any], workdir: Path) -> str:
        return ""  # the task travels to verifiers whole, in the run request

    async def _play(self, run: ProgramRun) -> dict[str, Any]:
        """One rollout on verifiers' env server, its model this episode's gateway session."""
        bridge = await asyncio.to_thread(self.bridge)
        # The session's key rides in the path: verifiers sends its own key header.
        base_url = run.base_url.removesuffix("/v1") + f"/s/{run.api_key}/v1"
        summary = await bridge.run(run.task_data, base_url, run.model, self.config.sampling)
        holder = _summary.get(None)
        if holder is not None:
            holder.update(summary)
        return summary

    def verify(self, task_data: dict[str, Any], workdir: Path, outcome: ProgramOutcome) -> float:
        """The rubric's weighted total; an error when verifiers reports the rollout failed."""
        summary = outcome.result
        if not summary["ok"]:
            errors = "; ".join(summary["errors"]) or "no error recorded"
            raise EpisodeError(
                f"verifiers reports the rollout failed (stop: {summary['stop_conditions']}): "
                f"{errors}"
            )
        return float(summary["reward"])

    async def aplay_program(
        self,
        gateway: ModelGateway,
        task_data: dict[str, Any],
        model: str,
        context: EpisodeContext | None = None,
    ) -> Episode:
        """A harness env's episode, with the rubric's named rewards and metrics in its
        metrics (``verifiers/NAME``)."""
        holder: dict[str, Any] = {}
        token = _summary.set(holder)
        try:
            episode = await super().aplay_program(gateway, task_data, model, context)
        finally:
            _summary.reset(token)
        episode.metrics.update(rubric_metrics(holder))
        return episode


def rubric_metrics(summary: dict[str, Any]) -> dict[str, float]:
    """The named rewards (their scores) and metrics of a rollout's summary."""
    metrics: dict[str, float] = {}
    for name, reward in (summary.get("rewards") or {}).items():
        if reward is not None:
            metrics[f"{METRIC_PREFIX}{name}"] = float(reward["score"])
    for name, value in (summary.get("metrics") or {}).items():
        if value is not None:
            metrics[f"{METRIC_PREFIX}{name}"] = float(value)
    if "num_turns" in summary:
        metrics[f"{METRIC_PREFIX}num_turns"] = float(summary["num_turns"])
    return metrics
