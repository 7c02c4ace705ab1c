"""Wall time of `ol check L10.8 --submission reference`, in-process and via the worker, over the import floor.

The import floor is `python -c "import numpy, scipy.stats, pytest"`; the three commands run side by
side in one run and print as ratios to the floor.

    python bench/check_speed.py [--repeat N] [--out F.json] [--quick]

Each command runs as a fresh process (what a student waits for), N times; the median is reported.
A check that does not pass all its tests (exit code not 0) stops the bench with exit 1.
--quick: one run of each command (seconds).
Goal (issue 6): in-process <= 3x the floor, worker <= 4x.
"""

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
from _benchkit import add_common, out_path, write_figures  # noqa: E402  (bench/ is sys.path[0])
CLI = [sys.executable, "-m", "harness.cli"]  # `./ol` without its bootstrap: this interpreter, this checkout
CHAPTER = "L10.8"  # the chapter whose check is timed
REPEAT = 3  # runs per command; the median is reported (one slow moment of the machine does not decide)
QUICK_REPEAT = 1  # the smoke run: every command once
GOALS = {"check in-process": 3.0, "check via worker": 4.0}  # issue 6: at most these multiples of the import floor
FLOOR = "import floor"  # the row every other is divided by


def commands() -> dict[str, list[str]]:
    check = CLI + ["check", CHAPTER, "--submission", "reference"]
    return {FLOOR: [sys.executable, "-c", "import numpy, scipy.stats, pytest"],
            "check in-process": check,
            "check via worker": check + ["--transport", "worker"]}


def wall(cmd: list[str]) -> float:
    """Seconds one fresh process of `cmd` takes; a failing command ends the bench with its output."""
    start = time.perf_counter()
    r = subprocess.run(cmd, cwd=REPO, capture_output=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    elapsed = time.perf_counter() - start
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout.decode()[-2000:]}{r.stderr.decode()[-2000:]}")
    return elapsed


def time_commands(cmds: dict[str, list[str]], repeat: int) -> dict[str, list[float]]:
    """Every command's wall times, interleaved, so a slow moment of the machine hits every command alike."""
    times = {k: [] for k in cmds}
    for _ in range(repeat):
        for k, cmd in cmds.items():
            times[k].append(wall(cmd))
    return times


def goal_text(name: str, ratio: float) -> str:
    goal = GOALS.get(name)
    return "" if goal is None else f"<= {goal:g}x " + ("met" if ratio <= goal else "NOT met")


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=REPEAT, help=f"runs per command (default {REPEAT})")
    add_common(ap, "check_speed", f"repeat {QUICK_REPEAT}")
    a = ap.parse_args()
    if a.quick:
        a.repeat = QUICK_REPEAT
    if a.repeat < 1:
        ap.error("--repeat must be >= 1")
    a.out = out_path(a, "check_speed")
    return a


def main() -> int:
    a = parse_args()
    times = time_commands(commands(), a.repeat)
    med = {k: statistics.median(v) for k, v in times.items()}
    ratio = {k: v / med[FLOOR] for k, v in med.items()}
    print(f"{'command':<20} {'median s':>9} {'x floor':>8}  goal")
    for k, v in med.items():
        print(f"{k:<20} {v:9.2f} {ratio[k]:8.2f}  {goal_text(k, ratio[k])}")
    write_figures(a.out, {"repeat": a.repeat, "quick": a.quick, "times_s": times, "median_s": med, "ratio_to_floor": ratio})
    return 0


if __name__ == "__main__":
    sys.exit(main())
