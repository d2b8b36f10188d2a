"""Every error agentsgym raises, in one hierarchy. Each message says what was wrong and
what to do about it, so that a user need not read our source."""

from __future__ import annotations

__all__ = [
    "AgentError",
    "AgentsGymError",
    "DatasetRowError",
    "EnvConfigError",
    "EpisodeError",
    "EpisodeTimeoutError",
    "JournalError",
    "MissingPluginError",
    "OutputError",
    "OutputExistsError",
    "OutputLockedError",
    "PluginLoadError",
    "RegistrationError",
    "ResumeMismatchError",
    "RewardUnavailableError",
    "RunSettingsError",
    "TemplateMismatchError",
    "TokenFidelityError",
    "TokenizerRequiredError",
    "TrackerError",
    "TrainerOptionError",
    "UnknownAgentError",
    "UnknownEnvError",
    "UnknownExecutorError",
    "UnknownModelError",
    "UnknownTrainerError",
    "UntrustedClassPathError",
    "UntrustedRemoteEnvError",
    "is_reward_unavailable",
]


class AgentsGymError(Exception):
    """Base class of every agentsgym error."""


class _UnknownName(AgentsGymError, KeyError):
    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0])


class PluginLoadError(AgentsGymError):
    """A plugin failed to load (raised only in strict mode; otherwise recorded)."""

    def __init__(self, plugin: str, distribution: str | None, cause: BaseException) -> None:
        self.plugin = plugin
        self.distribution = distribution
        self.cause = cause
        where = f" from distribution {distribution!r}" if distribution else ""
        super().__init__(
            f"plugin {plugin!r}{where} failed to load: {type(cause).__name__}: {cause}. "
            f"Fix or uninstall it, or block it with AGENTSGYM_BLOCK_PLUGINS={plugin}."
        )


class RegistrationError(AgentsGymError):
    """A plugin registered something invalid (bad id, clash with another package)."""


class UnknownEnvError(_UnknownName):
    """An env id that no installed plugin registered."""


class UnknownAgentError(_UnknownName):
    """An agent name that no installed plugin registered."""


class UnknownTrainerError(_UnknownName):
    """A trainer adapter name that no installed plugin registered."""


class UnknownExecutorError(_UnknownName):
    """An executor name that no installed plugin registered."""


class UnknownModelError(_UnknownName):
    """A model name that no installed plugin registered (``register_models``)."""


class UntrustedClassPathError(AgentsGymError):
    """A `module:Class` env path that the user has not allowed to be imported."""


class UntrustedRemoteEnvError(AgentsGymError):
    """A dataset row names an env server URL that the user has not allowed."""


class MissingPluginError(AgentsGymError, ModuleNotFoundError):
    """A command, executor, env source or name that no loaded plugin provides (or a
    package a plugin needs is not installed); the message says where to find it."""


class EnvConfigError(AgentsGymError, ValueError):
    """An env_config value has the wrong type, or a key the env does not know."""


class DatasetRowError(AgentsGymError, ValueError):
    """A dataset row is missing a key or has a field of the wrong type."""


class EpisodeError(AgentsGymError):
    """An episode failed; recorded on the episode rather than raised by the runner."""


class EpisodeTimeoutError(EpisodeError):
    """An env turn (``hook_timeout_seconds``) or an episode (``episode_timeout_seconds``)
    took longer than its budget; a plain hook still running is abandoned in its thread."""


class RewardUnavailableError(EpisodeError):
    """The episode's reward could not be computed: a judge model failed, timed out or
    answered something that is not a score.

    An env hook raises it (``step_episode``, ``reward_shaping`` or ``finish_episode``)
    rather than pay a made-up reward: the episode is recorded as failed, with an error
    that starts with ``RewardUnavailableError:`` (:func:`is_reward_unavailable`), so
    trainers leave it out like any failed episode and the run summaries count it apart.
    Raise this class itself: the engine records an error by its class name.
    """


def is_reward_unavailable(error: str | None) -> bool:
    """Whether an episode's recorded ``error`` is a :class:`RewardUnavailableError`."""
    return error is not None and error.startswith(f"{RewardUnavailableError.__name__}: ")


class AgentError(AgentsGymError):
    """An agent returned something the runner cannot use, or could not be built."""


class TokenizerRequiredError(AgentsGymError):
    """Token fields were asked of episodes played without a tokenizer."""


class TemplateMismatchError(AgentsGymError):
    """The chat template re-renders earlier turns differently from what the model saw."""


class TokenFidelityError(AgentsGymError):
    """An episode's token stream broke an invariant (lengths, growth, mask coverage)."""


class TrackerError(AgentsGymError):
    """An experiment tracker (``--report-to``) that cannot be used: an unknown name, its
    library not installed, or a run it could not start."""


class TrainerOptionError(AgentsGymError, ValueError):
    """A trainer adapter was given an option value it cannot use."""


class OutputError(AgentsGymError):
    """An output file (``--out``) that cannot be written, read back or finished."""


class OutputExistsError(OutputError):
    """``--out`` already holds a run's files and neither --resume nor --overwrite was given."""


class OutputLockedError(OutputError):
    """Another process is writing the same ``--out`` right now."""


class ResumeMismatchError(OutputError):
    """``--resume`` was given arguments that differ from those of the run it continues."""


class JournalError(OutputError):
    """A run's journal is damaged somewhere other than its last, torn trial."""


class RunSettingsError(AgentsGymError, ValueError):
    """A run's own settings are wrong: rollouts, concurrency, the executor or its
    workers, a dataset row with no agent to play it."""
