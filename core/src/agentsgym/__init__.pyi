"""The public API of agentsgym, for env authors: each name once, here (the package hands
each one out on first access; see agentsgym.lazy_api)."""

from agentsgym import (
    errors as errors,
)
from agentsgym.agents import (
    Agent as Agent,
)
from agentsgym.agents import (
    FunctionAgent as FunctionAgent,
)
from agentsgym.agents import (
    ScriptedAgent as ScriptedAgent,
)
from agentsgym.agents import (
    call_agent as call_agent,
)
from agentsgym.aio import (
    run_sync as run_sync,
)
from agentsgym.config import (
    MAX_STEPS_PER_EPISODE as MAX_STEPS_PER_EPISODE,
)
from agentsgym.config import (
    EnvConfig as EnvConfig,
)
from agentsgym.config import (
    describe_validation_error as describe_validation_error,
)
from agentsgym.dataset_runner import (
    arun_dataset as arun_dataset,
)
from agentsgym.dataset_runner import (
    run_dataset as run_dataset,
)
from agentsgym.engine import (
    DEFAULT_MAX_CONCURRENCY as DEFAULT_MAX_CONCURRENCY,
)
from agentsgym.engine import (
    TrialJob as TrialJob,
)
from agentsgym.engine import (
    arun_trial as arun_trial,
)
from agentsgym.engine import (
    rollout_seed as rollout_seed,
)
from agentsgym.env import (
    MultistepEnv as MultistepEnv,
)
from agentsgym.executors import (
    AgentSpec as AgentSpec,
)
from agentsgym.factory import (
    DEFAULT_TOKENIZER as DEFAULT_TOKENIZER,
)
from agentsgym.factory import (
    load_tokenizer as load_tokenizer,
)
from agentsgym.factory import (
    make as make,
)
from agentsgym.hookspecs import (
    RegisterAgent as RegisterAgent,
)
from agentsgym.hookspecs import (
    RegisterEnv as RegisterEnv,
)
from agentsgym.hookspecs import (
    RegisterEnvSource as RegisterEnvSource,
)
from agentsgym.hookspecs import (
    RegisterExecutor as RegisterExecutor,
)
from agentsgym.hookspecs import (
    RegisterModel as RegisterModel,
)
from agentsgym.hookspecs import (
    RegisterTrainer as RegisterTrainer,
)
from agentsgym.hookspecs import (
    hookimpl as hookimpl,
)
from agentsgym.hookspecs import (
    hookspec as hookspec,
)
from agentsgym.randomness import (
    episode_numpy_rng as episode_numpy_rng,
)
from agentsgym.randomness import (
    episode_random as episode_random,
)
from agentsgym.randomness import (
    global_random as global_random,
)
from agentsgym.randomness import (
    task_seed as task_seed,
)
from agentsgym.redaction import (
    is_secret as is_secret,
)
from agentsgym.redaction import (
    redact as redact,
)
from agentsgym.redaction import (
    redact_argv as redact_argv,
)
from agentsgym.redaction import (
    redact_text as redact_text,
)
from agentsgym.registry import (
    ENV_ID_PATTERN as ENV_ID_PATTERN,
)
from agentsgym.registry import (
    get_registry as get_registry,
)
from agentsgym.registry import (
    make_agent as make_agent,
)
from agentsgym.registry import (
    make_trainer as make_trainer,
)
from agentsgym.registry import (
    model_folder as model_folder,
)
from agentsgym.registry import (
    resolve as resolve,
)
from agentsgym.registry import (
    validate_env_id as validate_env_id,
)
from agentsgym.retry import (
    Attempts as Attempts,
)
from agentsgym.retry import (
    RetryPolicy as RetryPolicy,
)
from agentsgym.retry import (
    retry_async as retry_async,
)
from agentsgym.retry import (
    retry_sync as retry_sync,
)
from agentsgym.rewards import (
    assign_token_rewards as assign_token_rewards,
)
from agentsgym.rewards import (
    discounted_returns as discounted_returns,
)
from agentsgym.rows import (
    DatasetRow as DatasetRow,
)
from agentsgym.rows import (
    parse_rows as parse_rows,
)
from agentsgym.rows import (
    rows_to_dataset as rows_to_dataset,
)
from agentsgym.specs import (
    EnvSpec as EnvSpec,
)
from agentsgym.specs import (
    ExecutorFlag as ExecutorFlag,
)
from agentsgym.testing import (
    check_env as check_env,
)
from agentsgym.tokenization import (
    AgentSpan as AgentSpan,
)
from agentsgym.tokenization import (
    ChatTokenizer as ChatTokenizer,
)
from agentsgym.tokenization import (
    reply_as_rendered as reply_as_rendered,
)
from agentsgym.trainers import (
    RolloutSource as RolloutSource,
)
from agentsgym.trainers import (
    StepCallback as StepCallback,
)
from agentsgym.trainers import (
    StepMetrics as StepMetrics,
)
from agentsgym.trainers import (
    TrainerAdapter as TrainerAdapter,
)
from agentsgym.trainers import (
    TrainResult as TrainResult,
)
from agentsgym.trajectory import (
    Episode as Episode,
)
from agentsgym.trajectory import (
    StepRecord as StepRecord,
)
from agentsgym.trajectory import (
    TokenSegment as TokenSegment,
)
from agentsgym.trajectory import (
    TrajectoryBatch as TrajectoryBatch,
)
from agentsgym.trajectory import (
    TrajectoryGroup as TrajectoryGroup,
)
from agentsgym.trajectory import (
    records_to_dataset as records_to_dataset,
)
from agentsgym.types import (
    TOOL_ERROR_PREFIX as TOOL_ERROR_PREFIX,
)
from agentsgym.types import (
    TRUNCATED_KEY as TRUNCATED_KEY,
)
from agentsgym.types import (
    AgentAction as AgentAction,
)
from agentsgym.types import (
    EpisodeContext as EpisodeContext,
)
from agentsgym.types import (
    Message as Message,
)
from agentsgym.types import (
    Messages as Messages,
)
from agentsgym.types import (
    RewardTerm as RewardTerm,
)
from agentsgym.types import (
    Role as Role,
)
from agentsgym.types import (
    StepResult as StepResult,
)
