"""The way back: verifiers' own eval (``vf-eval``, unchanged, from the package) plays an
agentsgym env served by ``agentsgym serve``, through verifiers' built-in openenv
taskset and OpenEnv's protocol; its reward is what agentsgym's own rollout gives."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

import agentsgym
from agentsgym_serve import BackgroundServer, create_app
from verifiers_fixtures import MODEL, bisect_guess_the_number, scripted_model

pytestmark = pytest.mark.timeout(1800)  # the first test may build verifiers' venv

SEEDS = (3, 4)


def _eval_config(model_url: str, game_url: str, output: Path) -> str:
    resets = ", ".join(f"{{seed = {seed}}}" for seed in SEEDS)
    return f"""
model = "{MODEL}"
num_rollouts = 1
push = false
output_dir = "{output}"

[client]
base_url = "{model_url}"
api_key_var = "AGENTSGYM_TEST_UNUSED_KEY"

[env.taskset]
id = "openenv"
base_url = "{game_url}"
resets = [{resets}]

[env.player]
max_turns = 12

[env.player.harness]
id = "null"

[env.player.runtime]
type = "subprocess"
"""


def test_vf_eval_plays_an_env_served_by_agentsgym(
    verifiers_python_path: str, tmp_path: Path
) -> None:
    python = Path(verifiers_python_path)
    app = create_app("agentsgym/GuessTheNumber-v0")
    with BackgroundServer(app) as game, scripted_model(bisect_guess_the_number) as server:
        config = tmp_path / "eval.toml"
        config.write_text(_eval_config(server.base_url, game.url, tmp_path / "outputs"))
        environment = {**os.environ, "PATH": f"{python.parent}{os.pathsep}{os.environ['PATH']}"}
        result = subprocess.run(
            [str(python.parent / "vf-eval"), "@", str(config), "--no-rich"],
            capture_output=True,
            text=True,
            timeout=900,
            env=environment,
            cwd=tmp_path,
            check=False,
        )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (traces_file,) = (tmp_path / "outputs").rglob("traces.jsonl")
    episodes = [json.loads(line) for line in traces_file.read_text().splitlines()]
    assert len(episodes) == len(SEEDS)
    won = {}
    for episode in episodes:
        assert episode["ok"], episode["errors"]
        (trace,) = episode["traces"]
        seed = trace["task"]["data"]["reset"]["seed"]
        won[seed] = trace["rewards"]["openenv_reward"]["score"]
    # agentsgym's own rollout of the same games by the same bisection scores the same
    env = agentsgym.make("agentsgym/GuessTheNumber-v0")
    tasks = [{"seed": seed} for seed in SEEDS]
    batch = env.run_trial(tasks, agentsgym.make_agent("agentsgym/bisect"))
    for group in batch.groups:
        (played,) = group.episodes
        assert won[group.task_data["seed"]] == pytest.approx(played.final_reward)
