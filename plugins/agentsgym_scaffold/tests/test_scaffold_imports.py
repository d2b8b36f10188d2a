"""The scaffolded package keeps its entry point light: every agentsgym command loads
it, so `datasets` (about a second to import) is imported only when a dataset is made."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from agentsgym_scaffold import package_names, render_package

LOADS_THE_ENTRY_POINT = """
import sys
import agentsgym_acme.plugin
import agentsgym_acme.env
assert "datasets" not in sys.modules, "the entry point imported datasets"
env = agentsgym_acme.env.{env_class}()
print(len(env.get_train_dataset(3)), "datasets" in sys.modules)
"""


@pytest.mark.timeout(120)
@pytest.mark.parametrize("tools", [False, True], ids=["plain", "tools"])
def test_loading_the_entry_point_does_not_import_datasets(tmp_path: Path, tools: bool) -> None:
    names = package_names("acme/Maze")
    for path, text in render_package(names, tools=tools).items():
        target = tmp_path / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    script = LOADS_THE_ENTRY_POINT.format(env_class=names.env_class)
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path / "src",
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["3", "True"]  # a dataset is still made on demand
