"""The Atropos producer against atroposlib's real API server (run-api) on loopback:
register like a trainer, produce, pull /batch, and compare with the runner."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

aiohttp = pytest.importorskip("aiohttp")
requests = pytest.importorskip("requests")

import agentsgym
from agentsgym_atropos.producer import AtroposProducer
from agentsgym_atropos.scored_data import IGNORE_INDEX

TINY = "agentsgym/tiny-chatml"
GUESS = "agentsgym/GuessTheNumber-v0"

pytestmark = pytest.mark.timeout(180)


def env() -> Any:
    return agentsgym.make(GUESS, tokenizer=TINY, env_config={"high": 40})


def atropos(api: str, *options: str) -> subprocess.CompletedProcess[str]:
    """``agentsgym atropos`` of GuessTheNumber in groups of 2, against ``api``."""
    return subprocess.run(
        [sys.executable, "-m", "agentsgym", "atropos", GUESS, "--api-url", api, "--group-size", "2"]
        + list(options),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_pushed_groups_reach_the_trainer_exactly_as_the_runner_played_them(
    api: str, register_trainer: Callable[[str, int], None]
) -> None:
    register_trainer(api, 8)
    pushed: list[tuple[Any, dict[str, Any]]] = []
    producer = AtroposProducer(
        env(),
        agentsgym.make_agent("agentsgym/bisect"),
        api,
        group_size=4,
        max_groups=2,
        poll_seconds=0.1,
        advantages="per_token",
        on_group=lambda group, data: pushed.append((group, data)),
    )
    stats = agentsgym.aio.run_sync(producer.run())
    assert stats.groups_pushed == 2 and stats.sequences_pushed == 8
    batch = requests.get(api + "/batch", timeout=10).json()["batch"]
    assert batch is not None and len(batch) == 2
    for group, data in pushed:
        served = next(b for b in batch if b["group_overrides"] == data["group_overrides"])
        episodes = [e for e, _ in group.rows]
        assert served["tokens"] == [e.full_token_ids for e in episodes]
        assert served["masks"] == [
            [t if m else IGNORE_INDEX for t, m in zip(e.full_token_ids, e.agent_token_mask)]
            for e in episodes
        ]
        assert served["scores"] == [e.final_reward for e in episodes]
        assert served["messages"] == [e.messages for e in episodes]
        assert len(served["advantages"]) == 4
        # the same task played again locally with the same seed: the same tokens
        task = data["group_overrides"]["agentsgym"]["task_data"]
        index = data["group_overrides"]["agentsgym"]["task_index"]
        again = env().run_trial([task], agentsgym.make_agent("agentsgym/bisect"), 4, seed=index)
        assert served["tokens"] == [e.full_token_ids for e in again.episodes]


def test_the_producer_waits_for_the_trainer_and_pauses_on_a_full_queue(
    api: str, register_trainer: Callable[[str, int], None]
) -> None:
    producer = AtroposProducer(
        env(),
        agentsgym.make_agent("agentsgym/bisect"),
        api,
        group_size=4,
        max_groups=2,
        max_batches_offpolicy=1,
        max_concurrency=4,  # one group in flight at a time
        poll_seconds=0.05,
    )
    result: dict[str, Any] = {}
    thread = threading.Thread(
        target=lambda: result.setdefault("stats", agentsgym.aio.run_sync(producer.run())),
        daemon=True,
    )
    thread.start()
    time.sleep(0.3)
    assert producer.env_id is None  # no trainer yet: the server says wait
    register_trainer(api, 4)
    deadline = time.monotonic() + 60
    while producer.stats.pauses < 3 and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    # one group fills the trainer's one-batch budget: the producer paused, pushed no more
    assert producer.stats.groups_pushed == 1 and producer.stats.pauses >= 3
    first = requests.get(api + "/batch", timeout=10).json()["batch"]
    assert first is not None and len(first) == 1
    thread.join(60)
    assert result["stats"].groups_pushed == 2
    second = requests.get(api + "/batch", timeout=10).json()["batch"]
    assert second is not None and len(second) == 1


def test_an_unreachable_api_is_a_clear_error(unreachable_url: str) -> None:
    from agentsgym_atropos.api_client import AtroposOutageError

    producer = AtroposProducer(
        env(),
        agentsgym.make_agent("agentsgym/bisect"),
        unreachable_url,
        group_size=2,
        max_groups=1,
        outage_window=0,  # give up at the first failure (retries: test_outage.py)
    )
    with pytest.raises(AtroposOutageError, match="cannot reach the Atropos API server"):
        agentsgym.aio.run_sync(producer.run())
    assert producer.stats.retries == 0 and producer.stats.groups_started == 0


def test_the_cli_produces_for_a_registered_trainer(
    api: str, register_trainer: Callable[[str, int], None]
) -> None:
    register_trainer(api, 4)
    result = atropos(api, "--max-groups", "2", "--env-config", "high=10")
    assert result.returncode == 0, result.stderr
    assert "groups pushed" in result.stdout
    batch = requests.get(api + "/batch", timeout=10).json()["batch"]
    assert batch is not None and sum(len(g["tokens"]) for g in batch) == 4


def test_logprobs_follow_atropos_convention_and_are_all_or_nothing() -> None:
    """Sampled logprobs go out one per token, 1.0 on masked tokens (atroposlib's
    ManagedServer convention); a group where some rollout has none sends None."""
    from agentsgym import AgentAction
    from agentsgym.agents import FunctionAgent
    from agentsgym_atropos.scored_data import MASKED_LOGPROB, to_scored_data_group

    tokenizer = agentsgym.load_tokenizer(TINY)
    reply = tokenizer("[50]", add_special_tokens=False)["input_ids"]
    eot = tokenizer.convert_tokens_to_ids("<|im_end|>")
    game = agentsgym.make(GUESS, tokenizer=tokenizer, env_config={"low": 50, "high": 50})

    def sampled(messages: Any, state: Any) -> Any:
        ids = [*reply, eot]
        return AgentAction(text="[50]", token_ids=ids, logprobs=[-0.25] * len(ids)), state

    group = game.run_trial([{"seed": 0}], FunctionAgent(sampled), 2).groups[0]
    data = to_scored_data_group(group)
    for tokens, masks, logprobs in zip(data["tokens"], data["masks"], data["inference_logprobs"]):
        assert len(logprobs) == len(tokens)
        assert [lp for lp, m in zip(logprobs, masks) if m != IGNORE_INDEX] == [-0.25] * (
            len(reply) + 1
        )
        assert {lp for lp, m in zip(logprobs, masks) if m == IGNORE_INDEX} == {MASKED_LOGPROB}

    from agentsgym.engine import make_group

    plain = game.run_trial([{"seed": 0}], FunctionAgent(lambda m, s: ("[50]", s)), 1).groups[0]
    # two rollouts with logprobs, one without
    mixed = to_scored_data_group(make_group(game, 0, {"seed": 0}, [*group.trials, *plain.trials]))
    assert len(mixed["tokens"]) == 3 and mixed["inference_logprobs"] is None


class BrokenAgent:
    """An agent whose every reply fails: every episode, so every group, fails."""

    def get_action(self, messages: Any, agent_state: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the model server is down")


def test_a_producer_whose_every_group_fails_stops_saying_why(
    api: str, register_trainer: Callable[[str, int], None]
) -> None:
    """It does not play on for ever (115 groups dropped in 240 s, in the outsiders' trial):
    after max_dropped_in_a_row groups in a row, none pushed, it stops with the failure."""
    from agentsgym_atropos.api_client import AtroposError

    register_trainer(api, 4)
    producer = AtroposProducer(
        env(), BrokenAgent(), api, group_size=2, poll_seconds=0.05, max_dropped_in_a_row=3
    )
    with pytest.raises(AtroposError, match="the last [0-9]+ groups all had a failed episode") as e:
        agentsgym.aio.run_sync(producer.run())
    assert "the model server is down" in str(e.value) and "--max-dropped-groups" in str(e.value)
    assert producer.stats.groups_dropped >= 3 and producer.stats.groups_pushed == 0


def test_the_cli_exits_1_when_every_group_fails(
    api: str, register_trainer: Callable[[str, int], None], unreachable_url: str
) -> None:
    register_trainer(api, 4)
    model = ["--agent", "openai", "--agent-option", f"base_url={unreachable_url}/v1"]
    result = atropos(api, *model, "--agent-option", "max_retries=0", "--max-dropped-groups", "2")
    assert result.returncode == 1, result.stdout + result.stderr
    said = " ".join(result.stderr.split())
    assert "groups all had a failed episode" in said and "Traceback" not in said
    assert "groups pushed │ 0" in " ".join(result.stdout.split())
