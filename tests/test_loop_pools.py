"""PerLoop: one resource per event loop, each closed on its own loop."""

from __future__ import annotations

import asyncio

from agentsgym.runtime import PerLoop, run_sync


class Pool:
    """A stand-in for a connection pool: which loop made it, and which closed it."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.closed_on: asyncio.AbstractEventLoop | None = None

    async def aclose(self) -> None:
        self.closed_on = asyncio.get_running_loop()


def per_loop(made: list[Pool]) -> PerLoop[Pool]:
    def make() -> Pool:
        made.append(Pool())
        return made[-1]

    return PerLoop(make, Pool.aclose, is_closed=lambda pool: pool.closed_on is not None)


def test_each_loop_gets_its_own_resource_and_asyncio_run_closes_it_on_that_loop() -> None:
    made: list[Pool] = []
    pools = per_loop(made)

    async def use() -> Pool:
        first = pools.get()
        assert pools.get() is first  # the same loop, the same pool
        return first

    one, two = asyncio.run(use()), asyncio.run(use())
    assert one is not two and len(made) == 2
    assert one.closed_on is one.loop and two.closed_on is two.loop  # closed as each ended
    assert len(pools) == 0


def test_close_from_plain_code_closes_a_pool_on_its_running_loop() -> None:
    made: list[Pool] = []
    pools = per_loop(made)

    async def use() -> Pool:
        return pools.get()

    pool = run_sync(use())  # on the background loop, which keeps running
    assert len(pools) == 1 and pool.closed_on is None
    pools.close()
    assert pool.closed_on is pool.loop and len(pools) == 0


def test_aclose_closes_this_loops_pool_and_the_next_use_makes_a_new_one() -> None:
    made: list[Pool] = []
    pools = per_loop(made)

    async def main() -> None:
        first = pools.get()
        await pools.aclose()
        assert first.closed_on is first.loop
        assert pools.get() is not first

    asyncio.run(main())
    assert len(made) == 2 and all(p.closed_on is p.loop for p in made)
