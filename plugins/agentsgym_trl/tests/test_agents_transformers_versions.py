"""The transformers agent is versioned: every reply carries the weights' version."""

from __future__ import annotations

import threading
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from agentsgym_trl import TransformersAgent

pytestmark = pytest.mark.usefixtures("torch_single_thread")


@pytest.fixture
def agent() -> Any:
    made = TransformersAgent("tiny", max_new_tokens=2, seed=0)
    yield made
    made.close()


def version_of_a_reply(agent: Any) -> int | None:
    return agent.to_action(agent.generate([[1, 2, 3]])[0]).policy_version


def test_replies_carry_the_version_of_the_weights_that_made_them(agent: Any) -> None:
    assert version_of_a_reply(agent) == 0
    with agent.updating_weights():
        for parameter in agent.model.parameters():
            parameter.data.mul_(1.0)
    assert version_of_a_reply(agent) == 1
    state = {k: v.clone() for k, v in agent.model.state_dict().items()}
    assert agent.load_weights(state, version=5) == 5
    assert version_of_a_reply(agent) == 5


def test_a_reply_requested_during_an_update_is_generated_after_it(agent: Any) -> None:
    replies: list[int | None] = []
    with agent.updating_weights(version=3):
        asking = threading.Thread(target=lambda: replies.append(version_of_a_reply(agent)))
        asking.start()
    asking.join()
    assert replies == [3]  # never the half-updated weights under the old version


def test_a_failed_update_keeps_the_version(agent: Any) -> None:
    with pytest.raises(RuntimeError), agent.updating_weights():
        raise RuntimeError("the checkpoint was torn")
    assert agent.policy_version == 0
