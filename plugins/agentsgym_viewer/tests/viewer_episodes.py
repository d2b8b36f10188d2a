"""Real rollout and eval files for the viewer tests, played with ``env.run_trial``.

Two envs (GuessTheNumber through ``agentsgym.make`` and the tests' Countdown env),
the bundled tiny-chatml tokenizer, a reward-shaping plugin so that reward terms
exist, and episodes that end every way: solved, truncated at the step limit,
failed before the first prompt, failed mid-episode. One episode's reply is hostile
HTML, for the page's escaping.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import agentsgym
from agentsgym import RewardTerm, ScriptedAgent, hookimpl
from agentsgym.output import write_records
from agentsgym.trajectory import Episode
from countdown import Countdown, CountingAgent

GUESS = "agentsgym/GuessTheNumber-v0"
COUNTDOWN = "countdown:Countdown"
HOSTILE = "</script><script>window.__pwned = 1</script><b>bold?</b> [7]"


class FormatPenalty:
    """A reward_shaping plugin: every step costs 0.05, as the term ``format``."""

    @hookimpl
    def reward_shaping(self, action: str) -> RewardTerm:
        return RewardTerm("format", -0.05)


@dataclass
class PlayedFiles:
    """The episodes played, in the order of the file's rows, and their records."""

    episodes: list[Episode]
    records: list[dict[str, Any]]


def play() -> PlayedFiles:
    tokenizer = agentsgym.load_tokenizer("agentsgym/tiny-chatml")
    guess = agentsgym.make(
        GUESS,
        tokenizer=tokenizer,
        env_config={"max_steps_per_episode": 3},
        plugins=[FormatPenalty()],
    )
    # target 50: bisection's first guess (solved); target 1: not within 3 guesses
    # (truncated); target 1000: outside [1, 100], initialize_episode raises.
    solved_and_cut = guess.run_trial(
        [{"target": 50}, {"target": 1}, {"target": 1000}], agentsgym.make_agent("agentsgym/bisect")
    )
    hostile = guess.run_trial([{"target": 7}], ScriptedAgent([HOSTILE]))
    countdown = Countdown(tokenizer=tokenizer, env_config={})
    counted = countdown.run_trial([{"start": 2}], CountingAgent())
    # the env raises on "boom": a failure after one rewarded step
    boom = countdown.run_trial([{"start": 3}], ScriptedAgent(["3", "boom"]))
    episodes: list[Episode] = []
    records: list[dict[str, Any]] = []
    for batch in (solved_and_cut, hostile, counted, boom):
        rows = batch.to_records()
        records += rows
        by_session = {e.session_id: e for e in batch.all_episodes}
        episodes += [by_session[r["session_id"]] for r in rows]
    return PlayedFiles(episodes, records)


def with_step_columns(played: PlayedFiles) -> list[dict[str, Any]]:
    """The records plus per-step rewards and terms, as proposed for Episode.to_record."""
    return [
        {
            **record,
            "step_rewards": [s.reward for s in episode.steps],
            "step_reward_terms": [dict(s.reward_terms) for s in episode.steps],
        }
        for record, episode in zip(played.records, played.episodes)
    ]


def write(records: list[dict[str, Any]], path: Path) -> Path:
    return write_records(records, path)


def listed(output: str) -> list[int]:
    """The episode numbers in the first column of ``view --list``."""
    numbers = []
    for line in output.splitlines():
        cells = [c.strip() for c in line.strip("│┃ ").split("│")]
        if cells and cells[0].isdigit():
            numbers.append(int(cells[0]))
    return numbers
