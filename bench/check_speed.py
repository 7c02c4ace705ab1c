"""Wall time of `ol check L10.8 --submission reference`: in-process, via the sandboxed worker, and via an
unconfined worker, over the import floor.

The import floor is `python -c "import numpy, scipy.stats, pytest"`; every command runs side by side
in one run (interleaved) and prints as a ratio to the floor.

    python bench/check_speed.py [--repeat N] [--out F.json] [--quick] [--cold-bytecode]

Rows:
  import floor                      what any check pays before it runs a test
  check in-process                  the reference in the judge's process (trusted code)
  check via worker                  `--transport worker`: the worker path every submission takes, confined in
                                    the best sandbox this machine gives (harness.sandbox.confine; the mode printed is
                                    the report's `sandbox` field, read from its --json)
  check via worker, unconfined      the same with OL_SANDBOX=none: what the sandbox itself costs
  rust: clean build + check         the Rust track: a student's workspace (`ol start --lang rust`, the Rust
                                    reference's spec.rs in it) checked with an empty build cache: the
                                    grading build of the whole workspace in the sandbox, then the 16 tests
  rust: edit + check                the same workspace with its cache warm, after a one-line edit of spec.rs
                                    (what a student waits for between two tries)

Each command runs as a fresh process (what a student waits for), N times; the median is reported.
Bytecode: the floor's modules were compiled when they were installed; ol's (this checkout's harness, chapter pack
and reference) are compiled by the first check and cached in __pycache__, as on a student's machine from the
second check on. So every command runs without PYTHONDONTWRITEBYTECODE (an environment may set it), after one
untimed check of each Python row; --cold-bytecode measures a checkout that never caches it instead: every command
with PYTHONDONTWRITEBYTECODE=1 and this checkout's __pycache__ folders removed before each Python check, which then
compiles ol's modules again (the floor's are compiled either way). The property checks draw their inputs anew in
every check (milliseconds: harness.pack.frames); before that change they were kept, and likewise: the
first check of a seed draws them and keeps them in the user's cache (harness.kernel.memo), later checks read them back;
--cold-bytecode gives every Python check an empty cache folder, so each draws them again.
A check that does not pass all its tests (exit code not 0), or whose report does not say the sandbox
mode its row asks for, stops the bench with exit 1.
--quick: one run of each Python command (seconds; the Rust rows' clean build is minutes, left out).
Goals: in-process <= 3x the floor (issue 6); the sandboxed worker path <= 2.5x the floor (the sandbox
issue), measured in the same run as the floor, as a fresh process; the unconfined worker <= 4x
(issue 6's worker goal).
The Rust rows' goals are against the Python track's check (the sandboxed worker row), in the same run:
an edit + check within 2x of it, a clean build + check within 4x (the Rust track issue). They are
left out when cargo is absent (said so).
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
CLI = [sys.executable, "-m", "harness.cli"]  # `./ol` without its bootstrap: this interpreter, this checkout
CHAPTER = "L10.8"  # the chapter whose check is timed
REPEAT = 3  # runs per command; the median is reported (one slow moment of the machine does not decide)
QUICK_REPEAT = 1  # the smoke run: every command once
FLOOR = "import floor"  # the row every other is divided by
IN_PROCESS, WORKER, UNCONFINED = "check in-process", "check via worker", "check via worker, unconfined"
RUST_CLEAN, RUST_EDIT = "rust: clean build + check", "rust: edit + check"
# at most these multiples of the import floor: issue 6 (in-process, the unconfined worker), the sandbox issue
GOALS = {IN_PROCESS: 3.0, WORKER: 2.5, UNCONFINED: 4.0}
RUST_GOALS = {RUST_EDIT: 2.0, RUST_CLEAN: 4.0}  # multiples of the Python track's check (WORKER), the Rust track issue
BEFORE = {}  # row -> what runs before each of its timed runs (untimed): a cache emptied, an edit made
NO_BYTECODE = "PYTHONDONTWRITEBYTECODE"
ENV = {k: v for k, v in os.environ.items() if k != NO_BYTECODE}  # every command's environment (--cold-bytecode: + NO_BYTECODE)


def rust_workspace(scratch: Path) -> Path | None:
    """A student's Rust workspace holding the Rust reference's spec.rs, its build cache warmed for the edit
    row; None when this machine has no cargo."""
    if shutil.which("cargo") is None:
        return None
    r = subprocess.run(CLI + ["start", CHAPTER, "--lang", "rust", str(scratch / "rust")], cwd=REPO, capture_output=True,
                       env={**ENV, "PYTHONPATH": str(REPO)})
    if r.returncode != 0:
        sys.exit(f"ol start --lang rust failed:\n{r.stdout.decode()}{r.stderr.decode()}")
    spec = scratch / "rust/crates/tl-engine/src/spec.rs"
    shutil.copyfile(REPO / "reference/rust/crates/tl-engine/src/spec.rs", spec)
    edits = iter(range(1, 10**6))
    BEFORE[RUST_CLEAN] = lambda: shutil.rmtree(scratch / "cache-clean", ignore_errors=True)
    BEFORE[RUST_EDIT] = lambda: spec.write_text(spec.read_text() + f"// edit {next(edits)}\n")
    wall(CLI + ["check", CHAPTER, "--submission", str(scratch / "rust")], {"XDG_CACHE_HOME": str(scratch / "cache-warm")})
    return scratch / "rust"


def drop_bytecode() -> None:
    """Remove the compiled modules of this checkout's Python code and the checks' kept inputs (--cold-bytecode: a
    check compiles them and draws them again)."""
    if "XDG_CACHE_HOME" in ENV:
        shutil.rmtree(ENV["XDG_CACHE_HOME"], ignore_errors=True)
    for top in ("harness", "chapters", "reference"):
        for cache in (REPO / top).rglob("__pycache__"):
            shutil.rmtree(cache, ignore_errors=True)


def commands(rust: Path | None = None) -> dict[str, tuple[list[str], dict[str, str]]]:
    """Each row's command and the environment it adds."""
    check = CLI + ["check", CHAPTER, "--submission", "reference"]
    rows = {FLOOR: ([sys.executable, "-c", "import numpy, scipy.stats, pytest"], {}),
            IN_PROCESS: (check, {}),
            WORKER: (check + ["--transport", "worker"], {}),
            UNCONFINED: (check + ["--transport", "worker"], {"OL_SANDBOX": "none"})}
    if rust is not None:
        student = CLI + ["check", CHAPTER, "--submission", str(rust)]
        rows[RUST_CLEAN] = (student, {"XDG_CACHE_HOME": str(rust.parent / "cache-clean")})
        rows[RUST_EDIT] = (student, {"XDG_CACHE_HOME": str(rust.parent / "cache-warm")})
    return rows


def wall(cmd: list[str], extra_env: dict[str, str]) -> tuple[float, str | None]:
    """Seconds one fresh process of `cmd` takes, and the sandbox its report names (for a check); a failing
    command ends the bench with its output."""
    report = None
    if cmd[:len(CLI)] == CLI and "check" in cmd:
        fd, report = tempfile.mkstemp(prefix="ol-check-speed-", suffix=".json")
        os.close(fd)
        cmd = cmd + ["--json", report]
    try:
        start = time.perf_counter()
        r = subprocess.run(cmd, cwd=REPO, capture_output=True, env={**ENV, "PYTHONPATH": str(REPO), **extra_env})
        elapsed = time.perf_counter() - start
        if r.returncode != 0:
            sys.exit(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout.decode()[-2000:]}{r.stderr.decode()[-2000:]}")
        return elapsed, json.loads(Path(report).read_text()).get("sandbox") if report else None
    finally:
        if report:
            os.unlink(report)


def time_commands(cmds: dict[str, tuple[list[str], dict[str, str]]], repeat: int) -> tuple[dict[str, list[float]], dict[str, str | None]]:
    """Every command's wall times, interleaved, so a slow moment of the machine hits every command alike; and
    the sandbox each check's report named (the same in every run, else the bench stops)."""
    times: dict[str, list[float]] = {k: [] for k in cmds}
    modes: dict[str, str | None] = {}
    for _ in range(repeat):
        for k, (cmd, extra_env) in cmds.items():
            if k in BEFORE:
                BEFORE[k]()
            elapsed, mode = wall(cmd, extra_env)
            times[k].append(elapsed)
            if modes.setdefault(k, mode) != mode:
                sys.exit(f"{k}: the report's sandbox changed between runs ({modes[k]} then {mode})")
    return times, modes


def check_modes(modes: dict[str, str | None]) -> None:
    """Each row ran as it says: in-process trusted, the worker in a real sandbox when one exists, unconfined
    when asked."""
    sys.path.insert(0, str(REPO))
    from harness.sandbox.confine import choose

    want = {IN_PROCESS: "in-process", WORKER: choose().name, UNCONFINED: "none", RUST_CLEAN: choose().name, RUST_EDIT: choose().name}
    want = {k: v for k, v in want.items() if k in modes}
    wrong = {k: (modes.get(k), v) for k, v in want.items() if modes.get(k) != v}
    if wrong:
        sys.exit(f"the reports' sandbox is not what each row asks for (got, wanted): {wrong}")


def label(name: str, mode: str | None) -> str:
    if name == WORKER:
        return f"{name} (sandbox {mode})" if mode != "none" else f"{name} (NOT sandboxed: none here)"
    return name


def goal_text(name: str, ratio: float, med: dict[str, float]) -> str:
    if name in RUST_GOALS and WORKER in med:
        goal, x = RUST_GOALS[name], med[name] / med[WORKER]
        return f"{x:.2f}x the Python check; <= {goal:g}x " + ("met" if x <= goal else "NOT met")
    goal = GOALS.get(name)
    return "" if goal is None else f"<= {goal:g}x " + ("met" if ratio <= goal else "NOT met")


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=REPEAT, help=f"runs per command (default {REPEAT})")
    ap.add_argument("--cold-bytecode", action="store_true",
                    help="run every command with PYTHONDONTWRITEBYTECODE=1: each check compiles ol's modules again")
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
    if a.cold_bytecode:
        ENV[NO_BYTECODE] = "1"
        for k in (IN_PROCESS, WORKER, UNCONFINED):
            BEFORE[k] = drop_bytecode
    with tempfile.TemporaryDirectory(prefix="ol-bench-rust-") as scratch:
        if a.cold_bytecode:
            ENV["XDG_CACHE_HOME"] = str(Path(scratch) / "cache-cold")  # the Python rows' cache, emptied before each
        rust = None if a.quick else rust_workspace(Path(scratch))
        if a.quick:
            print("--quick: the Rust rows are left out (the suite's tests/rust build and check the Rust track)")
        elif rust is None:
            print("no cargo here: the Rust rows are left out")
        cmds = commands(rust)
        if not a.cold_bytecode:  # the first check compiles ol's modules into __pycache__: not timed
            for k in (IN_PROCESS, WORKER):
                wall(*cmds[k])
        times, modes = time_commands(cmds, a.repeat)
    check_modes(modes)
    med = {k: statistics.median(v) for k, v in times.items()}
    ratio = {k: v / med[FLOOR] for k, v in med.items()}
    labels = {k: label(k, modes.get(k)) for k in med}
    width = max(map(len, labels.values()))
    print(f"{'command':<{width}} {'median s':>9} {'x floor':>8}  goal")
    for k, v in med.items():
        print(f"{labels[k]:<{width}} {v:9.2f} {ratio[k]:8.2f}  {goal_text(k, ratio[k], med)}")
    if WORKER in med and UNCONFINED in med:
        print(f"the sandbox's own cost: {med[WORKER] - med[UNCONFINED]:+.2f} s a check "
              f"({med[WORKER] / med[UNCONFINED]:.2f}x the unconfined worker)")
    print("bytecode and drawn inputs: " + ("compiled and drawn again by every check (--cold-bytecode)" if a.cold_bytecode else
          "ol's modules cached in __pycache__ by an untimed first check "
          "(as from a student's second check on)"))
    write_figures(a.out, {"repeat": a.repeat, "quick": a.quick, "cold_bytecode": a.cold_bytecode, "sandbox": modes, "times_s": times, "median_s": med,
                          "ratio_to_floor": ratio, "goals_x_floor": GOALS, "rust_goals_x_python_check": RUST_GOALS,
                          "ratio_to_python_check": {k: med[k] / med[WORKER] for k in RUST_GOALS if k in med},
                          "goals_met": {k: ratio[k] <= g for k, g in GOALS.items() if k in ratio}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
