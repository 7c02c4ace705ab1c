"""Wall time of `ol check L10.8 --submission reference`, in-process and through the worker, beside the
import floor `python -c "import numpy, scipy.stats, pytest"`, side by side in one run, as ratios.

    python bench/check_speed.py [--repeat N]

Each command runs as a fresh process (what a student waits for), N times; the median is reported.
Goal (issue 6): in-process <= 3x the floor, worker <= 4x.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "harness.cli"]


def wall(cmd: list[str]) -> float:
    start = time.perf_counter()
    r = subprocess.run(cmd, cwd=REPO, capture_output=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    elapsed = time.perf_counter() - start
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout.decode()[-2000:]}{r.stderr.decode()[-2000:]}")
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default=str(REPO / "bench" / "out" / "check_speed.json"))
    a = ap.parse_args()
    cmds = {
        "import floor": [sys.executable, "-c", "import numpy, scipy.stats, pytest"],
        "check in-process": CLI + ["check", "L10.8", "--submission", "reference"],
        "check via worker": CLI + ["check", "L10.8", "--submission", "reference", "--transport", "worker"],
    }
    times = {k: [] for k in cmds}
    for _ in range(a.repeat):  # interleaved, so a slow moment of the machine hits every command alike
        for k, cmd in cmds.items():
            times[k].append(wall(cmd))
    med = {k: statistics.median(v) for k, v in times.items()}
    floor = med["import floor"]
    print(f"{'command':<20} {'median s':>9} {'x floor':>8}  goal")
    goals = {"check in-process": 3.0, "check via worker": 4.0}
    for k, v in med.items():
        goal = goals.get(k)
        print(f"{k:<20} {v:9.2f} {v / floor:8.2f}  {'' if goal is None else ('<= %gx ' % goal) + ('met' if v / floor <= goal else 'NOT met')}")
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps({"repeat": a.repeat, "times_s": times, "median_s": med,
                                       "ratio_to_floor": {k: v / floor for k, v in med.items()}}, indent=2) + "\n")


if __name__ == "__main__":
    main()
