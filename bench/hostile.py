"""Time to verdict of every hostile submission under `ol grade --jobs 2`, and its score against its honest one.

    python bench/hostile.py [--out F.json] [--quick]

The class is tests/harness/hostile_catalog.py: one hostile submission per threat class (each the s07
sample, an honest 15 of 16, plus a payload; the load failures score 0; the slow import 16) and a
correct control (16 of 16), graded together on fresh cases (seed fixed) in whatever sandbox this
machine gives (harness.confine; the mode is printed). Printed side by side: each submission's time to
verdict (wall_s in grades.csv) and as a multiple of the control's, its score against its honest
score, its bound, and the batch's total. A canary variable in the grader's environment and a listener
on 127.0.0.1 tell whether the environ and network payloads got anything out.
Exit 1 when a hostile submission scores above its honest score (a defence failed), when anything got
out, or when the batch fails (ol grade exits non-zero or leaves a submission ungraded). A verdict that
is only not what the catalog expects (a deterministic score lower than honest, a bound passed) is
printed as NOT and recorded, but is not a failure of the bench.
--quick: the control and four fast classes (well under a minute).
Goal (the hostile-class issue): every verdict within its bound (60 s; 30 s for a submission that never
loads, a hang at import included: the load deadline is 27 s), the whole class within 300 s, no score
above honest.
"""

import argparse
import csv
import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
from _benchkit import add_common, out_path, write_figures  # noqa: E402  (bench/ is sys.path[0])
sys.path.insert(0, str(REPO))
from tests.harness import hostile_catalog as hc  # noqa: E402

CHAPTER = "L10.8"
JOBS = 2
SEED = "12345"  # the fresh cases' seed: the same class regrades identically
QUICK = ["crash-import", "golden-fresh", "reference-delegate", "environ"]  # fast, and each a different defence
BATCH_GOAL_S = 300.0


def grade(subs: Path, out_csv: Path, results: Path, run_tmp: Path, canary: str) -> tuple[subprocess.CompletedProcess, float]:
    cmd = [sys.executable, "-m", "harness.cli", "grade", CHAPTER, str(subs), "--jobs", str(JOBS), "--seed", SEED,
           "--out", str(out_csv), "--results-dir", str(results)]
    start = time.perf_counter()
    r = subprocess.run(cmd, cwd=run_tmp, capture_output=True, text=True,
                       env=hc.canary_env(canary) | {"TMPDIR": str(run_tmp)})
    return r, time.perf_counter() - start


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common(ap, "hostile", f"the control and {', '.join(QUICK)}")
    a = ap.parse_args()
    a.out = out_path(a, "hostile")
    return a


def main() -> int:
    a = parse_args()
    from harness.confine import choose

    mode = choose()
    with tempfile.TemporaryDirectory(prefix="ol-bench-hostile-") as tmp:
        tmp = Path(tmp)
        tmp.chmod(0o711)  # mode uid: the worker reaches its copies under the grader's temporary folders by name
        subs, results, out_csv = tmp / "subs", tmp / "results", tmp / "grades.csv"
        run_tmp = tmp / "tmp"
        run_tmp.mkdir(mode=0o711)
        run_tmp.chmod(0o711)
        entries = hc.build(subs, QUICK if a.quick else None)
        canary = secrets.token_hex(16)
        with hc.CanaryListener() as listener:
            r, batch_s = grade(subs, out_csv, results, run_tmp, canary)
        rows = {row["submission"]: row for row in csv.DictReader(out_csv.open())} if out_csv.exists() else {}
        problems = hc.problems(entries, rows, results)
        outs = ([out_csv.read_bytes()] if out_csv.exists() else []) + \
            ([p.read_bytes() for p in results.iterdir()] if results.is_dir() else [])
        leaked = [f"something reached 127.0.0.1:{hc.CANARY_PORT}" for _ in listener.received[:1]]
        leaked += ["the canary of the grader's environment is in the outputs" for o in outs if canary.encode() in o][:1]

    control_s = float(rows["control"]["wall_s"]) if rows.get("control", {}).get("wall_s") else None
    print(f"{len(entries)} submissions (the control and {len(entries) - 1} hostile), ol grade --jobs {JOBS}, "
          f"sandbox {mode.name}, fresh cases seed {SEED}")
    print(f"{'submission':<20} {'wall s':>7} {'x control':>9} {'bound s':>7} {'score':>6} {'honest':>6}  verdict")
    figures = {}
    for e in entries:
        row = rows.get(e.name)
        if row is None or row["status"] != "graded":
            print(f"{e.name:<20} {'-':>7} {'-':>9} {e.bound_s:7.0f} {'-':>6} {e.honest:6g}  "
                  f"{'missing' if row is None else 'UNGRADED: ' + row['reason'][:80]}")
            figures[e.name] = {"status": "missing" if row is None else "ungraded"}
            continue
        wall, score = float(row["wall_s"]), float(row["score"])
        ok = [p for p in problems if p.startswith(e.name + ":")]
        verdict = "ok" if not ok else ("ABOVE HONEST" if score > e.honest else "NOT: " + "; ".join(p.split(": ", 1)[1] for p in ok))
        ratio = f"{wall / control_s:9.2f}" if control_s else f"{'-':>9}"
        print(f"{e.name:<20} {wall:7.1f} {ratio} {e.bound_s:7.0f} {score:6g} {e.honest:6g}  {verdict[:110]}")
        figures[e.name] = {"wall_s": wall, "x_control": wall / control_s if control_s else None, "bound_s": e.bound_s,
                           "score": score, "honest": e.honest, "verdict": e.verdict, "sandbox": row["sandbox"],
                           "problems": ok}
    print(f"{'batch total':<20} {batch_s:7.1f} {batch_s / control_s if control_s else float('nan'):9.2f} "
          f"{BATCH_GOAL_S:7.0f}  goal <= {BATCH_GOAL_S:g} s {'met' if batch_s <= BATCH_GOAL_S else 'NOT met'}")
    above = [e.name for e in entries if e.name in rows and rows[e.name]["status"] == "graded"
             and float(rows[e.name]["score"]) > e.honest]
    ungraded = [e.name for e in entries if rows.get(e.name, {}).get("status") != "graded"]
    failed = [f"ol grade exited {r.returncode}"] if r.returncode != 0 else []
    failed += [f"ungraded: {', '.join(ungraded)}"] if ungraded else []
    failed += [f"above honest: {', '.join(above)}"] if above else []
    failed += leaked
    write_figures(a.out, {"quick": a.quick, "sandbox": mode.name, "jobs": JOBS, "seed": SEED, "batch_s": batch_s,
                          "batch_goal_s": BATCH_GOAL_S, "submissions": figures, "problems": problems, "failed": failed,
                          "grade_exit": r.returncode})
    for p in problems:
        print(f"NOT: {p}", file=sys.stderr)
    for f in failed:
        print(f"BROKEN: {f}", file=sys.stderr)
    if failed and r.returncode not in (0, 3):
        print(r.stdout[-2000:] + r.stderr[-2000:], file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
