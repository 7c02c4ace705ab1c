"""Time to verdict of every hostile submission under `ol grade --jobs 2`, and its score against its honest one.

    python bench/hostile.py [--out F.json] [--quick]

The class is tests/harness/hostile_catalog.py: one hostile submission per threat class (each the s07
sample, an honest 15 of 16, plus a payload; the load failures score 0; the slow import 16) and a
correct control (16 of 16), graded together on fresh cases (seed fixed) in whatever sandbox this
machine gives (harness.sandbox.confine; the mode is printed). Printed side by side: each submission's time to
verdict (wall_s in grades.csv) and as a multiple of the control's, its score against its honest
score, its bound, and the batch's total. A canary variable in the grader's environment and a listener
on 127.0.0.1 tell whether the environ and network payloads got anything out.
Exit 1 when a hostile submission scores above its honest score (a defence failed), when anything got
out, or when the batch fails (ol grade exits non-zero or leaves a submission ungraded). A verdict that
is only not what the catalog expects (a deterministic score lower than honest, a bound passed) is
printed as NOT and recorded, but is not a failure of the bench.
--quick: the control and four fast classes (well under a minute), and the first row of the second table.
Goal (the hostile-class issue): every verdict within its bound (60 s; 30 s for a submission that never
loads, a hang at import included: the load deadline is 27 s), the whole class within 300 s, no score
above honest.

A second table times what the suite checks by its mechanism only (tests/harness/test_hostile.py,
test_threats.py, test_examples.py: a timeout produced by the deadline it names): how long after its
deadline a call's verdict comes (the worker killed and reaped), for a call that spins (with a spinning
child), one whose worker never reads the judge's reply, and, in a bwrap sandbox, a fork bomb; and the whole
check of examples/submissions/hangs (and rust-hangs, with cargo: its build included), as test_examples.py
grades it. Goals: a call's verdict within its deadline + 3 s; the check of `hangs` within 60 s, of
`rust-hangs` within 120 s.
Each printed beside its goal and as a multiple of its deadline; a miss is printed NOT and recorded, not a
failure; a verdict of the wrong kind (not the timeout or crash expected) is.
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
from tests.harness.hostile_kit import FORK_BOMB  # noqa: E402

CHAPTER = "L10.8"
JOBS = 2
SEED = "12345"  # the fresh cases' seed: the same class regrades identically
QUICK = ["crash-import", "golden-fresh", "reference-delegate", "environ"]  # fast, and each a different defence
BATCH_GOAL_S = 300.0
KILL_SLACK_S = 3.0  # a call's verdict within its deadline plus this: killing and reaping its worker, on a loaded machine
HANGS_GOAL_S = {"hangs": 60.0, "rust-hangs": 120.0}  # the whole check of each hanging sample (rust: its build too)

SPINS = """
def prompt_lookup(ctx, k, max_ngram, min_ngram):
    if _os.fork() == 0:
        _os.execv(_sys.executable, [_sys.executable, "-S", "-c", "while True: pass", "ol-bench-spinner"])
    while True:
        pass
"""
NEVER_READS = """
import json as _json, time as _time
def generate(target, cfg, prompt, params, seed, max_new, eos):
    out = int(_sys.argv[_sys.argv.index("--out") + 1])
    _os.write(out, (_json.dumps({"id": "c1", "call": "target.extend", "args": {"ids": [1] * 4000}}) + "\\n").encode())
    _time.sleep(600)
"""


def grade(subs: Path, out_csv: Path, results: Path, run_tmp: Path, canary: str) -> tuple[subprocess.CompletedProcess, float]:
    cmd = [sys.executable, "-m", "harness.cli", "grade", CHAPTER, str(subs), "--jobs", str(JOBS), "--seed", SEED,
           "--out", str(out_csv), "--results-dir", str(results)]
    start = time.perf_counter()
    r = subprocess.run(cmd, cwd=run_tmp, capture_output=True, text=True,
                       env=hc.canary_env(canary) | {"TMPDIR": str(run_tmp)})
    return r, time.perf_counter() - start


def _call_row(name: str, payload: str, call, deadline_s: float, want, scratch: Path) -> dict:
    """One submission (the reference plus `payload`), one call under `deadline_s`: its time to verdict."""
    from harness.kernel.errors import SubmissionFailure
    from harness.subjects.open import open_impl
    from tests.harness.hostile_kit import CH, submission

    sub = submission(scratch, payload, name=name)
    impl = open_impl(CH, str(sub))
    try:
        impl.call("blocks_for", dict(tokens=5, block_tokens=4))  # the worker started and loaded: not timed
        start = time.perf_counter()
        try:
            call(impl, deadline_s)
            got = None
        except SubmissionFailure as e:
            got = e
        took = time.perf_counter() - start
    finally:
        impl.close()
    ok_kind = isinstance(got, want)
    return {"s": took, "deadline_s": deadline_s, "goal_s": deadline_s + KILL_SLACK_S, "x_deadline": took / deadline_s,
            "met": took <= deadline_s + KILL_SLACK_S, "verdict": type(got).__name__ if got else "answered",
            "right_kind": ok_kind}


def _hangs_row(name: str) -> dict:
    from harness.check.runner import CheckOptions, run_check
    from harness.transport.impl import DEFAULT_DEADLINE_S
    from tests.harness.hostile_kit import CH

    skip = {"sampled_spec_keeps_the_target_distribution", "runner_target_scores_every_fed_position"}  # as test_examples
    start = time.perf_counter()
    rep = run_check(CH, str(REPO / "examples" / "submissions" / name), CheckOptions(ref_deps=True,
                    only=[t.name for t in CH.tests if t.name not in skip]))
    took = time.perf_counter() - start
    timeouts = [t.name for t in rep.tests if t.outcome == "timeout"]
    goal = HANGS_GOAL_S[name]
    return {"s": took, "deadline_s": DEFAULT_DEADLINE_S, "goal_s": goal, "x_deadline": took / DEFAULT_DEADLINE_S,
            "met": took <= goal, "verdict": f"{len(timeouts)} timeout(s)", "right_kind": len(timeouts) == 1}


def deadlines(quick: bool, mode_name: str) -> dict[str, dict]:
    """The second table: each row's time to verdict against its goal."""
    import shutil as _shutil
    from chapters.L10_8.judge.fake_target import FakeTarget
    from harness.kernel.errors import Crashed, Timeout
    from harness.subjects.reference import pristine
    from tests.harness.hostile_kit import HAND_PL, kill_marked

    rows = {}
    with tempfile.TemporaryDirectory(prefix="ol-bench-deadlines-") as scratch:
        scratch = Path(scratch)
        try:
            rows["call spins (1 s)"] = _call_row("spins", SPINS, lambda impl, d: impl.call("prompt_lookup", HAND_PL, deadline_s=d),
                                                 1.0, Timeout, scratch)
        finally:
            kill_marked("ol-bench-spinner")
        if quick:
            return rows
        rows["reply never read (3 s)"] = _call_row(
            "never-reads", NEVER_READS,
            lambda impl, d: impl.generate(FakeTarget(pristine("L10.8"), 16), {"draft": "none", "k": 4}, [1, 2, 3],
                                          {"temperature": 0.0}, 1, 5, [], deadline_s=d), 3.0, Crashed, scratch)
        if mode_name == "bwrap":  # SAFETY: a fork bomb only where its PID namespace dies with it
            rows["fork bomb (3 s)"] = _call_row("fork-bomb", FORK_BOMB,
                                                lambda impl, d: impl.call("prompt_lookup", HAND_PL, deadline_s=d),
                                                3.0, Timeout, scratch)
    rows["ol check of hangs"] = _hangs_row("hangs")
    if _shutil.which("cargo"):
        rows["ol check of rust-hangs"] = _hangs_row("rust-hangs")
    return rows


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common(ap, "hostile", f"the control and {', '.join(QUICK)}")
    a = ap.parse_args()
    a.out = out_path(a, "hostile")
    return a


def main() -> int:
    a = parse_args()
    from harness.sandbox.confine import choose

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
        problems = hc.problems(entries, rows, results) + hc.late(entries, rows)  # late: NOT, recorded, not a failure
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

    timed = deadlines(a.quick, mode.name)
    print(f"\n{'past a deadline':<24} {'s':>7} {'deadline':>8} {'x dl':>6} {'goal s':>7}  verdict")
    for name, t in timed.items():
        print(f"{name:<24} {t['s']:7.1f} {t['deadline_s']:8g} {t['x_deadline']:6.2f} {t['goal_s']:7.0f}  {t['verdict']}"
              f"{'' if t['right_kind'] else ' (WRONG KIND)'}; goal {'met' if t['met'] else 'NOT met'}")
    above = [e.name for e in entries if e.name in rows and rows[e.name]["status"] == "graded"
             and float(rows[e.name]["score"]) > e.honest]
    ungraded = [e.name for e in entries if rows.get(e.name, {}).get("status") != "graded"]
    failed = [f"ol grade exited {r.returncode}"] if r.returncode != 0 else []
    failed += [f"ungraded: {', '.join(ungraded)}"] if ungraded else []
    failed += [f"above honest: {', '.join(above)}"] if above else []
    failed += leaked
    failed += [f"{name}: {t['verdict']}, not the verdict its deadline gives" for name, t in timed.items() if not t["right_kind"]]
    problems += [f"{name}: {t['s']:.1f} s > its goal {t['goal_s']:g} s" for name, t in timed.items() if not t["met"]]
    write_figures(a.out, {"quick": a.quick, "sandbox": mode.name, "jobs": JOBS, "seed": SEED, "batch_s": batch_s,
                          "batch_goal_s": BATCH_GOAL_S, "submissions": figures, "problems": problems, "failed": failed,
                          "grade_exit": r.returncode, "past_deadline": timed})
    for p in problems:
        print(f"NOT: {p}", file=sys.stderr)
    for f in failed:
        print(f"BROKEN: {f}", file=sys.stderr)
    if failed and r.returncode not in (0, 3):
        print(r.stdout[-2000:] + r.stderr[-2000:], file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
