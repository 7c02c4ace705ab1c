"""Fixtures the harness tests share."""

import pytest

from harness.sandbox.uids import UidPool


@pytest.fixture
def worker_uids():
    """`worker_uids(n)`: n worker uids for mode uid, leased for this test's whole life as `ol grade`'s pools lease
    theirs (harness.sandbox.uids.UidPool), cleared before and after. A bare `slot_uids(1)` would not do: it
    skips the uids with a process at that instant only, so two tests running side by side could both take an idle
    one, and the first judge to end clears it, killing the other test's worker mid-run."""
    held: list[tuple[UidPool, list[int]]] = []

    def take(n: int = 1) -> list[int]:
        pool = UidPool(n)
        uids = [pool.take() for _ in range(n)]
        held.append((pool, uids))
        return uids

    yield take
    for pool, uids in held:
        for uid in uids:
            pool.give(uid)
        pool.close()
