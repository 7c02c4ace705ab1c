"""Shared test setup for ol's own suite (tests/ and every pack's tests under chapters/). The reference
is loaded by path (never installed): `import tinyllm` here is it (harness.subjects.reference.use_reference).
The `ol` pytest plugin gives every chapter test the implementation under test (`--impl`, default
the reference)."""
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from harness.subjects.reference import use_reference  # noqa: E402

use_reference()
pytest_plugins = ["harness.check.pytest_plugin"]


SLOW_S, FAST_S = 3.0, 0.1  # a slow-marked test's seconds when it states none (slow: over about 1.5 s), and the others'


def _cost(item) -> float:
    slow = item.get_closest_marker("slow")
    return float(slow.kwargs.get("s", SLOW_S)) if slow is not None else FAST_S


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "xdist_group(name): tests sharing an expensive module fixture, dealt to one "
                            "xdist worker (conftest.py; registered here too for a run without xdist)")


def _group(item) -> str:
    """The unit a test is dealt in: its `xdist_group` (tests sharing an expensive module fixture, which each
    worker running any of them would build again), else itself."""
    group = item.get_closest_marker("xdist_group")
    return f"group:{group.args[0] if group.args else group.kwargs.get('name')}" if group is not None else item.nodeid


def pytest_collection_modifyitems(config, items) -> None:
    """The longest tests first, spread over the xdist workers: every slow-marked test ahead of the rest, longest
    first (`slow(s=N)`: its measured seconds), so none starts late and sets the suite's wall time while the
    other workers idle. xdist's worksteal scheduler hands worker i the i-th contiguous share of this list and
    later moves tests from a busy worker's tail to an idle one; so under xdist each worker's share is dealt its
    slow tests by longest-processing-time (each next longest to the lightest share) and filled up with the rest,
    in their order. Tests of one `xdist_group` are dealt together, as one unit of their summed seconds, to one
    share's head (a steal takes a share's tail), so their module fixture is built once, not once per worker.
    Without xdist (or one worker) it is the plain stable sort. The order decides no outcome."""
    items.sort(key=lambda item: (_cost(item) <= FAST_S, -_cost(item)))
    workers = int(getattr(config, "workerinput", {}).get("workercount", 1))
    if workers < 2:
        return
    sizes, left = [], len(items)
    for i in range(workers):  # xdist's first distribution: len(pending) // nodes_remaining, in node order
        sizes.append(left // (workers - i))
        left -= sizes[-1]
    units: dict[str, list] = {}
    for item in items:
        units.setdefault(_group(item), []).append(item)
    cost = {key: sum(map(_cost, unit)) for key, unit in units.items()}
    order = sorted(units, key=lambda key: (cost[key] <= FAST_S, -cost[key]))
    shares, loads = [[] for _ in sizes], [0.0] * workers
    rest = []
    for key in order:
        unit = units[key]
        fits = [i for i in range(workers) if sizes[i] - len(shares[i]) >= len(unit)]
        if cost[key] <= FAST_S or not fits:
            rest.extend(unit)
            continue
        i = min(fits, key=lambda k: loads[k])
        shares[i].extend(unit)
        loads[i] += cost[key]
    fill = iter(rest)
    for i, share in enumerate(shares):
        share.extend(next(fill) for _ in range(sizes[i] - len(share)))
    items[:] = [item for share in shares for item in share]
