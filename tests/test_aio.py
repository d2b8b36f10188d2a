"""run_sync when the background loop's thread dies: the caller gets an error, not a hang."""

from __future__ import annotations

import asyncio
import threading

import pytest

from agentsgym.aio import LoopThreadDiedError, background_loop, run_sync, running_background_loop
from agentsgym.errors import AgentsGymError

# A guard only: without the fix these tests wait forever. Nothing below is timed.
pytestmark = pytest.mark.timeout(60)


async def _raise(exc: BaseException) -> None:
    await asyncio.sleep(0)
    raise exc


async def _answer() -> str:
    await asyncio.sleep(0)
    return "ok"


@pytest.mark.parametrize("exc_type", [SystemExit, KeyboardInterrupt])
def test_a_coroutine_that_ends_the_loop_thread_fails_the_waiting_call(
    exc_type: type[BaseException],
) -> None:
    dying = background_loop()
    with pytest.raises(LoopThreadDiedError) as caught:
        run_sync(_raise(exc_type("from a tool")))
    assert isinstance(caught.value, AgentsGymError)
    assert isinstance(caught.value.__cause__, exc_type)
    assert exc_type.__name__ in str(caught.value)
    assert running_background_loop() is not dying


def test_the_next_call_runs_on_a_new_loop() -> None:
    with pytest.raises(LoopThreadDiedError):
        run_sync(_raise(SystemExit(3)))
    assert run_sync(_answer()) == "ok"


def test_every_caller_waiting_on_the_dead_loop_is_told() -> None:
    """A caller whose coroutine is still pending when another one kills the loop."""
    started = threading.Event()
    never = asyncio.Event()
    outcome: dict[str, BaseException] = {}

    async def wait_forever() -> None:
        started.set()
        await never.wait()

    def waiting_caller() -> None:
        try:
            run_sync(wait_forever())
        except BaseException as exc:  # noqa: BLE001 - inspected below
            outcome["error"] = exc

    caller = threading.Thread(target=waiting_caller)
    caller.start()
    started.wait()
    with pytest.raises(LoopThreadDiedError):
        run_sync(_raise(KeyboardInterrupt()))
    caller.join()
    assert isinstance(outcome["error"], LoopThreadDiedError)
    assert isinstance(outcome["error"].__cause__, KeyboardInterrupt)


def test_ordinary_results_and_errors_pass_through() -> None:
    assert run_sync(_answer()) == "ok"
    with pytest.raises(ValueError, match="bad"):
        run_sync(_raise(ValueError("bad")))
    loop = running_background_loop()
    assert loop is not None and run_sync(_answer()) == "ok"
    assert running_background_loop() is loop  # an ordinary error keeps the loop


class _QuittingAgent:
    """An async agent whose code (a tool, say) raises SystemExit."""

    async def get_action(self, messages: object, agent_state: object) -> tuple[str, object]:
        raise SystemExit("a tool called sys.exit()")


def test_run_trial_of_an_agent_that_raises_system_exit_fails_instead_of_hanging() -> None:
    import agentsgym

    env = agentsgym.make("agentsgym/GuessTheNumber-v0")
    tasks = [{"seed": seed} for seed in range(8)]
    with pytest.raises(LoopThreadDiedError, match="SystemExit"):
        env.run_trial(tasks, _QuittingAgent(), num_rollouts=2)
    batch = env.run_trial(tasks[:1], agentsgym.make_agent("agentsgym/bisect"))
    assert len(batch.groups) == 1
