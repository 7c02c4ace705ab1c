"""The Rust student's loop, edit -> verdict: `ol check L10.8` and `cargo test` after a one-line edit of spec.rs,
cold (no build anywhere yet) and warm (built once, then edited), against a plain `cargo build` of the same edit.

    python bench/student_loop.py [--repeat N] [--out F.json] [--quick]

A student's folder made by `ol start L10.8` (./rust, the Rust reference's spec.rs in it, so every test runs to
its end), its judge's build cache in a folder of its own (XDG_CACHE_HOME). Each round makes one edit (a line
inserted at the top of spec.rs: every item below it moves, as an edit near the top of the file does) and
times, each as a fresh process from the student's folder:

  cargo build                 `cargo build -p tl-engine` in ./rust: the baseline (the student's own compile of the edit)
  cargo build -p tl-worker    the same edit built as the judge builds it: the crate and the worker binary
  ol check                    `ol check L10.8` in the folder holding ./rust: the judge's sandboxed build, the tests
  cargo test                  `cargo test` in ./rust: its front end (crates/tl-check) runs the same judge
  judge's build               within ol check: from its line `ol: building your crate` to `ol: loading` (the
                              sandboxed cargo build; pytest's start runs meanwhile)

Cold rows remove every build first (./rust/target and the judge's cache); warm rows follow a built state, a check
of the same kind (ol check, or cargo test), and one edit. The tests' own time is the sum of the tests' durations in `ol check`'s report; the figure the
goal is about is (edit -> verdict - the tests' own time) / cargo build, goal <= 1.5x (issue 29): the
crate built once, incrementally, and reused. Medians of N rounds (default 3); --quick: one round.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
from _benchkit import add_common, out_path, write_figures  # noqa: E402  (bench/ is sys.path[0])

CLI = [sys.executable, "-m", "harness"]  # `./ol` without its bootstrap: this interpreter, this checkout
REPEAT, QUICK_REPEAT = 3, 1
GOAL = 1.5  # (edit -> verdict - the tests' own time) / cargo build of the same edit
BUILD, BUILD_WORKER, CHECK, TEST = "cargo build", "cargo build -p tl-worker", "ol check", "cargo test"


class Student:
    """The student's folder, the judge's cache beside it, and the edits."""

    def __init__(self, scratch: Path) -> None:
        self.home, self.cache = scratch / "student", scratch / "cache"
        self.home.mkdir()
        self.env = {**os.environ, "PYTHONPATH": str(REPO), "XDG_CACHE_HOME": str(self.cache)}
        r = subprocess.run(CLI + ["start", "L10.8"], cwd=self.home, capture_output=True, text=True, env=self.env)
        if r.returncode != 0:
            sys.exit(f"ol start L10.8 failed:\n{r.stdout}{r.stderr}")
        self.ws = self.home / "rust"
        # cargo test's front end runs this checkout's ol with this interpreter
        (self.ws / ".ol-command").write_text(f"env PYTHONPATH={REPO} {sys.executable} -m harness\n")
        self.spec = self.ws / "crates/tl-engine/src/spec.rs"
        # the reference's spec.rs without its own #[cfg(test)] module: a student's file with no #[test] of theirs
        # (cargo test would run those after the judge's, a build of the crate in test mode: their own cost)
        self.original = (REPO / "reference/rust/crates/tl-engine/src/spec.rs").read_text().split("#[cfg(test)]")[0]
        self.edits = 0
        self.edit()

    def edit(self) -> None:
        self.edits += 1
        self.spec.write_text(f"// edit {self.edits}\n" + self.original)

    def clean(self) -> None:
        shutil.rmtree(self.ws / "target", ignore_errors=True)
        shutil.rmtree(self.cache, ignore_errors=True)

    def run(self, row: str) -> tuple[float, float | None, float | None]:
        """Seconds `row` takes; for ol check, the tests' own seconds (from its report) and its build's (from its
        lines: `ol: building ...` to `ol: loading ...`, as they arrive)."""
        report = None
        if row == CHECK:
            fd, report = tempfile.mkstemp(prefix="ol-loop-", suffix=".json")
            os.close(fd)
        argv, cwd = {BUILD: (["cargo", "build", "--offline", "-q", "-p", "tl-engine"], self.ws),
                     BUILD_WORKER: (["cargo", "build", "--offline", "-q", "-p", "tl-worker"], self.ws),
                     CHECK: (CLI + ["check", "L10.8", "--json", str(report)], self.home),
                     TEST: (["cargo", "test", "--offline", "-q"], self.ws)}[row]
        start = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=self.env)
        seen, lines = {}, []
        for line in proc.stdout:
            lines.append(line)
            for mark in ("ol: building your crate", "ol: loading"):
                if line.startswith(mark):
                    seen.setdefault(mark, time.perf_counter())
        proc.wait()
        took = time.perf_counter() - start
        if proc.returncode != 0:
            sys.exit(f"{row} failed ({proc.returncode}):\n{''.join(lines)[-4000:]}")
        if report is None:
            return took, None, None
        tests = json.loads(Path(report).read_text())["tests"]
        os.unlink(report)
        build = seen["ol: loading"] - seen["ol: building your crate"] if len(seen) == 2 else None
        return took, sum(t["duration_s"] for t in tests), build


def measure(student: Student, repeat: int) -> tuple[dict[str, list[float]], list[float]]:
    times: dict[str, list[float]] = {}
    tests: list[float] = []
    builds: dict[str, list[float]] = {"judge's build (cold)": [], "judge's build (warm)": []}
    rows = (BUILD, BUILD_WORKER, CHECK, TEST)
    for _ in range(repeat):
        for row in rows:  # cold: nothing built anywhere
            student.clean()
            student.edit()
            took, own, build = student.run(row)
            times.setdefault(f"{row} (cold)", []).append(took)
            if build is not None:
                builds["judge's build (cold)"].append(build)
        for row in rows:  # warm: everything built, then one edit
            student.run(BUILD_WORKER)
            student.run(TEST if row == TEST else CHECK)  # the student's last check, of the same kind
            student.edit()
            took, own, build = student.run(row)
            times.setdefault(f"{row} (warm)", []).append(took)
            if own is not None and row == CHECK:
                tests.append(own)
            if build is not None and row == CHECK:
                builds["judge's build (warm)"].append(build)
    return {**times, **builds}, tests


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=REPEAT, help=f"rounds (default {REPEAT})")
    add_common(ap, "student_loop", f"{QUICK_REPEAT} round")
    a = ap.parse_args()
    if a.quick:
        a.repeat = QUICK_REPEAT
    if shutil.which("cargo") is None:
        print("no cargo here: nothing to measure")
        return 0
    with tempfile.TemporaryDirectory(prefix="ol-bench-loop-") as scratch:
        student = Student(Path(scratch))
        times, tests = measure(student, a.repeat)
    med = {k: statistics.median(v) for k, v in times.items()}
    own = statistics.median(tests)
    print(f"the tests' own time (median, from ol check's report): {own:.2f} s")
    print(f"{'edit -> verdict':<28} {'median s':>9} {'x cargo build':>14} {'(t - tests) / build':>20}  goal")
    ratios = {}
    for k, v in sorted(med.items(), key=lambda kv: "cold" not in kv[0]):
        base = med[f"{BUILD} ({'cold' if 'cold' in k else 'warm'})"]
        line = f"{k:<28} {v:9.2f} {v / base:14.2f}"
        if k.startswith((CHECK, TEST)):
            ratios[k] = (v - own) / base
            line += f" {ratios[k]:20.2f}  <= {GOAL:g}x " + ("met" if ratios[k] <= GOAL else "NOT met")
        print(line)
    write_figures(out_path(a, "student_loop"), {"repeat": a.repeat, "quick": a.quick, "times_s": times, "median_s": med,
                                                "tests_own_s": tests, "ratio_less_tests_to_cargo_build": ratios, "goal": GOAL})
    return 0


if __name__ == "__main__":
    sys.exit(main())
