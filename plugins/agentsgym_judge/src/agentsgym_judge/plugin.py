"""The agentsgym plugin of agentsgym-judge: its example env, ``judge/OpenAnswer-v0``.

Published under the ``agentsgym`` entry-point group as ``judge``.
"""

from __future__ import annotations

from agentsgym import RegisterEnv, hookimpl


@hookimpl
def register_envs(register: RegisterEnv) -> None:
    register(
        "judge/OpenAnswer-v0",
        "agentsgym_judge.open_answer:OpenAnswerEnv",
        description="a question answered in free text, scored by a judge model behind an "
        "OpenAI-compatible server (env_config judge={base_url, model, ...})",
    )
