"""What the bubblewrap sandbox adds to starting a process: `python -c pass` plain and sandboxed, side by side.

    python bench/sandbox_startup.py [--repeat N] [--out F.json] [--quick]

Each command runs N times, interleaved (plain, sandboxed, plain, ...), as a fresh process; the medians are
printed with the sandboxed one as a multiple of the plain one, and the difference beside its goal. A worker
starts once per check (and again after each timeout or crash), so this is paid per start, not per call.
--quick: 3 runs of each (about a second). Skipped (exit 0, said so) where the sandbox cannot run.
Goal (the sandbox issue): the sandbox adds at most 1 s to a start (it was a test's assertion,
tests/harness/test_sandbox.py; a timing belongs here).
"""

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
from _benchkit import add_common, out_path, write_figures  # noqa: E402  (bench/ is sys.path[0])
sys.path.insert(0, str(REPO))

REPEAT, QUICK_REPEAT = 10, 3
GOAL_ADDED_S = 1.0


def once(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdin=subprocess.DEVNULL, capture_output=True)
    return time.perf_counter() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common(ap, "sandbox_startup", f"{QUICK_REPEAT} runs of each command")
    ap.add_argument("--repeat", type=int, default=None, help=f"runs of each command (default {REPEAT})")
    a = ap.parse_args()
    out = out_path(a, "sandbox_startup")
    from harness.sandbox.bwrap import available, sandboxed

    why_not = available()
    if why_not is not None:
        print(f"skipped: the sandbox cannot run here ({why_not})")
        write_figures(out, {"quick": a.quick, "skipped": why_not})
        return 0
    n = a.repeat or (QUICK_REPEAT if a.quick else REPEAT)
    plain_argv = [sys.executable, "-c", "pass"]
    rows = {"plain": plain_argv, "sandboxed": sandboxed(plain_argv)}
    times = {name: [] for name in rows}
    for _ in range(n):
        for name, argv in rows.items():
            times[name].append(once(argv))
    plain, boxed = (statistics.median(times[k]) for k in rows)
    added = boxed - plain
    print(f"python -c pass, median of {n}, interleaved")
    print(f"{'command':<10} {'ms':>8} {'x plain':>8}")
    print(f"{'plain':<10} {plain * 1000:8.1f} {1.0:8.2f}")
    print(f"{'sandboxed':<10} {boxed * 1000:8.1f} {boxed / plain:8.2f}")
    print(f"added by the sandbox: {added * 1000:.1f} ms; goal <= {GOAL_ADDED_S * 1000:.0f} ms "
          f"{'met' if added <= GOAL_ADDED_S else 'NOT met'}")
    write_figures(out, {"quick": a.quick, "repeat": n, "plain_s": plain, "sandboxed_s": boxed, "x_plain": boxed / plain,
                        "added_s": added, "goal_added_s": GOAL_ADDED_S, "met": added <= GOAL_ADDED_S,
                        "runs": times})
    return 0


if __name__ == "__main__":
    sys.exit(main())
