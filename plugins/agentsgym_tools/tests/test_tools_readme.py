"""The README's Python examples run as written, in order, in one namespace; the env
they define then passes check_env through the testing kit's register_env."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from agentsgym.testing import check_env, register_env

README = Path(__file__).resolve().parents[1] / "README.md"
FENCE = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


def test_the_readme_examples_run_and_the_env_passes_check_env() -> None:
    namespace: dict[str, Any] = {"__name__": "readme_examples"}
    blocks = [
        b
        for b in FENCE.findall(README.read_text())
        if "trl_environment" not in b and "MCPTools" not in b and "MCPServer" not in b
    ]
    assert len(blocks) >= 2
    for block in blocks:
        exec(compile(block, str(README), "exec"), namespace)  # noqa: S102 - our own docs
    env_class = namespace["DictionaryEnv"]
    env_class.__module__ = __name__  # register_env imports it by path: from this module
    globals()["DictionaryEnv"] = env_class

    class Solver:
        def __init__(self) -> None:
            self.agent = namespace["ScriptedToolAgent"](namespace["solve"])

        def get_action(self, messages: Any, agent_state: Any) -> Any:
            return self.agent.get_action(messages, agent_state)

    def get_train_dataset(self: Any, size: int = 2) -> Any:
        return self.make_dataset({"word": w} for w in ("laconic", "laconic")[:size])

    env_class.get_train_dataset = get_train_dataset
    with register_env("readme/Dictionary-v0", env_class):
        report = check_env("readme/Dictionary-v0", agent=Solver(), raise_on_failure=False)
    assert report.passed, report.failures
