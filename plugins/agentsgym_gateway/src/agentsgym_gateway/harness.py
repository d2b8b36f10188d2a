"""HarnessEnv: an env whose episodes are runs of an unmodified agent program.

An env package subclasses it and says three things per task:

* :meth:`HarnessEnv.program`: the program (a command line, or a Python callable of a
  :class:`~agentsgym_gateway.programs.ProgramRun`);
* :meth:`HarnessEnv.prepare`: what goes into the task's working directory, and the
  program's input;
* :meth:`HarnessEnv.verify`: the score of the final state (an answer, files, tests).

The engine plays it like any env (``env.run_trial``, ``agentsgym rollout``, ``eval``,
``train``: the core's trial runner, with ``episodes_per_trial``, free shots, the
per-rollout seeds and its callbacks), and asks it for each episode whole
(:meth:`HarnessEnv.aplay_own_episode`): one program run, with a gateway session of its
own in front of the model, within ``episode_timeout_seconds``. The model is a server
(``backend_url`` in the env_config, or an ``openai`` agent's ``base_url``), or the agent
itself (a local model, such as ``transformers``; see
:mod:`~agentsgym_gateway.agent_backend`). The session's calls become the episode
(:func:`~agentsgym_gateway.episodes.episode_from_calls`).
"""

from __future__ import annotations

import asyncio
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from agentsgym import EnvConfig, Episode, EpisodeContext, MultistepEnv, hookimpl
from agentsgym.errors import EpisodeError, RunSettingsError
from agentsgym.runtime import redact_text
from agentsgym_gateway.agent_backend import AGENT_MODEL, AgentBackend
from agentsgym_gateway.episodes import episode_from_calls
from agentsgym_gateway.gateway import ModelGateway, SessionHandle
from agentsgym_gateway.programs import ProgramOutcome, ProgramRun, as_program

if TYPE_CHECKING:
    from agentsgym.testing import EnvCheckContext, EnvChecks


class HarnessConfig(EnvConfig):
    """A harness env's settings: where the model is, and how calls are read."""

    backend_url: str | None = Field(
        default=None,
        description="the model server's OpenAI base URL (http://host:port/v1); default: the "
        "base_url of the openai agent playing the env",
    )
    model: str | None = Field(
        default=None, description="the model the programs ask for; default: the agent's model"
    )
    tool_parser: Literal["hermes", "llama3_json", "auto"] | None = Field(
        default=None,
        description="read a text-only backend's tool calls into tool_calls, as vLLM's parser "
        "of that name does (hermes: <tool_call> blocks; llama3_json: Llama-3 JSON calls); "
        "auto: the parser of the format the env tokenizer's chat template writes",
    )


class HarnessEnv(MultistepEnv):
    """See the module docstring. Subclasses implement :meth:`program` and :meth:`verify`."""

    config_class = HarnessConfig

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._gateways: dict[int, tuple[ModelGateway, str]] = {}
        self._gateways_lock = threading.Lock()

    # ------------------------------------------------------------ what a subclass says
    def program(self, task_data: dict[str, Any]) -> Any:
        """The program of a task: a command line, a callable or a Program."""
        raise NotImplementedError(
            f"{type(self).__name__} must implement program(task_data): a command line (list "
            "of strings) or a callable taking a ProgramRun"
        )

    def prepare(self, task_data: dict[str, Any], workdir: Path) -> str:
        """Set up ``workdir`` for the task and return the program's input (default: the
        task's ``prompt``)."""
        return str(task_data.get("prompt", ""))

    def verify(self, task_data: dict[str, Any], workdir: Path, outcome: ProgramOutcome) -> float:
        """The score of the program's final state (its output, its files)."""
        raise NotImplementedError(
            f"{type(self).__name__} must implement verify(task_data, workdir, outcome)"
        )

    @classmethod
    def contract_checks(cls, context: EnvCheckContext) -> EnvChecks:
        """``agentsgym check-env``'s checks of a harness env: the program ends within the
        timeout, its calls become an episode, the verifier scores, a crash or a hang
        fails only its episode (:mod:`~agentsgym_gateway.harness_checks`)."""
        from agentsgym_gateway.harness_checks import harness_checks

        return harness_checks(context)

    # ------------------------------------------------------------ the engine's hooks
    def _not_hooks(self, *args: Any, **kwargs: Any) -> Any:
        raise EpisodeError(
            f"{self.env_id} is a harness env: its episodes are runs of a program "
            "(aplay_own_episode), never played turn by turn through its hooks"
        )

    initialize_episode = hookimpl(specname="initialize_episode")(_not_hooks)
    format_prompt = hookimpl(specname="format_prompt")(_not_hooks)
    step_episode = hookimpl(specname="step_episode")(_not_hooks)

    # ------------------------------------------------------------ playing programs
    def _gateway(self, agent: Any) -> tuple[ModelGateway, str]:
        """A gateway in front of the model server (``backend_url``, else an openai
        agent's ``base_url``), else in front of the agent itself; and the model name."""
        parser = self.config.tool_parser
        url = self.config.backend_url or getattr(agent, "base_url", None)
        if url:
            model = self.config.model or getattr(agent, "model", None)
            if not model:
                raise RunSettingsError(
                    f"{self.env_id}: name the model its programs ask for: model in the "
                    "env_config, or an openai agent's model"
                )
            key = None if self.config.backend_url else getattr(agent, "api_key", None)
            template = self.chat.tokenizer.chat_template if self.chat is not None else None
            gateway = ModelGateway(
                url, backend_api_key=key, tool_parser=parser, chat_template=template
            )
            return gateway, str(model)
        if agent is None:
            raise RunSettingsError(
                f"{self.env_id} needs a model for its programs: an agent (an openai agent "
                "with base_url and model, or a local one such as transformers), or "
                "backend_url and model in its env_config"
            )
        backend = AgentBackend(agent, self.chat, self.env_id)
        return ModelGateway(backend=backend, tool_parser=parser), self.config.model or AGENT_MODEL

    # ------------------------------------------------ the engine (rollout, train, eval)
    async def aplay_own_episode(
        self, task_data: dict[str, Any], agent: Any, context: EpisodeContext
    ) -> Episode:
        """One episode for the engine: a program run through this env's gateway for
        ``agent`` (``None``: the ``backend_url`` of the env_config), started on first use
        and kept until :meth:`close`. The run's ``max_concurrency`` bounds the programs
        at once; ``context`` (task, rollout, seed) reaches an agent backend's agent with
        every call, and the program as its seed."""
        gateway, model = await asyncio.to_thread(self._shared_gateway, agent)
        return await self.aplay_program(gateway, task_data, model, context)

    def _shared_gateway(self, agent: Any) -> tuple[ModelGateway, str]:
        if self.chat is None:
            raise RunSettingsError(
                f"{self.env_id} needs the model's tokenizer to pad its episodes: "
                "agentsgym.make(id, tokenizer=...)"
            )
        with self._gateways_lock:
            made = self._gateways.get(id(agent))
            if made is None:
                gateway, model = self._gateway(agent)
                made = self._gateways[id(agent)] = (gateway.start(), model)
            return made

    def close(self) -> None:
        """Stop the gateways this env started for the engine's episodes."""
        with self._gateways_lock:
            gateways, self._gateways = list(self._gateways.values()), {}
        for gateway, _ in gateways:
            gateway.stop()
        super().close()

    async def aplay_program(
        self,
        gateway: ModelGateway,
        task_data: dict[str, Any],
        model: str,
        context: EpisodeContext | None = None,
    ) -> Episode:
        """One program run for ``task_data`` through ``gateway``: its episode (a failure,
        the program's or the verifier's, is recorded on it, never raised). ``context``:
        the engine's episode, for the agent backend and the program's seed."""
        handle = gateway.open_session(context=context)
        seed = context.seed if context is not None else 0
        timeout = self.config.episode_timeout_seconds
        reward, error, outcome = 0.0, None, None
        calls: list[Any] | None = None
        with tempfile.TemporaryDirectory(prefix="agentsgym-harness-") as folder:
            workdir = Path(folder)
            try:
                text = await asyncio.to_thread(self.prepare, task_data, workdir)
                run = ProgramRun(
                    handle.base_url, handle.api_key, model, workdir, text, task_data, seed
                )
                outcome = await as_program(self.program(task_data)).run(run, timeout)
                calls = gateway.close_session(handle)  # a program's stray calls end here
                error = outcome.failure(timeout)
                if error is None:
                    reward = float(
                        await asyncio.to_thread(self.verify, task_data, workdir, outcome)
                    )
            except Exception as exc:  # noqa: BLE001 - one failed program never sinks the run
                error = f"{type(exc).__name__}: {exc}"
            if calls is None:
                calls = gateway.close_session(handle)
        if error is None and not calls:
            error = "the program made no model call: nothing to train on"
        safe_error = None if error is None else _safe(error, handle)
        try:
            episode = episode_from_calls(
                calls,
                session_id=handle.session_id,
                env_id=self.env_id,
                task_data=task_data,
                reward=reward if error is None else 0.0,
                chat=self.chat,
                reward_strategy=self.config.reward_strategy,
                error=safe_error,
            )
        except Exception as exc:  # noqa: BLE001 - the calls could not be tokenized
            episode = Episode(
                session_id=handle.session_id, env_id=self.env_id, task_data=dict(task_data)
            )
            episode.error = safe_error or _safe(f"{type(exc).__name__}: {exc}", handle)
        if outcome is not None:
            episode.metrics["program_exit_code"] = float(
                -1 if outcome.exit_code is None else outcome.exit_code
            )
        return episode


def _safe(error: str, handle: SessionHandle) -> str:
    """An error without the session's key (a program may print its environment)."""
    return redact_text(error.replace(handle.api_key, "***"))
