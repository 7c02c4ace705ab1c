"""One slip, one cost, whatever the seed: the set of failing tests of every sample and mutant on N grading seeds.

    python bench/seed_stability.py [--seeds N] [--rows s01,x03,...] [--sets extra,blind] [--lang python|rust] [--jobs J]
                                   [--resume] [--pause-file P] [--quick] [--out F.json]

Rows: the samples of examples/submissions (of the language), the default mutant set (s01-s13) and every row of
the further sets named by --sets (default extra and blind, as issue 37 asks; batch_a on request) ported to the
language. A sealed set (SEALED: written, not yet run) is refused: its first figure is taken once, by `ol mutants
--set`. Each row is checked with `run_check(..., fresh_seed=S)` (fresh cases and property inputs of the seed S, as
`ol grade --seed S` grades) for the seeds 1..N, and its failing tests are compared across seeds. The table prints
each row's failing tests, or every distinct set with the seeds that gave it when they vary; exit 1 when any row's
set varies (or a check cannot run).
Cost: rows x seeds checks (132 x 40 in Python, 134 x 40 in Rust; 4-5 s each in Python, 3-4 s in Rust, over J
processes): about 6 hours on two cores, more than a working session, so each finished check is appended to a log
beside the figures (F.jsonl: row, seed, each failing test's outcome, the check's start and end, the harness
version) and `--resume` keeps the log's checks of this harness version and runs only the others. A row whose set
varies is printed with its outcomes other than fail (a timeout on one seed may be the machine's: the table's checks
have their calls' deadlines like any check). For a quiet moment, never stop the bench's processes (a check stopped
mid-call sees its deadline pass on resuming: a timeout of the bench's making); create --pause-file's file: no check
starts while it exists, the running ones end. The checks go seed by seed, so a run stopped early has
whole seeds 1..m for every row.
A table longer than a session: run it from a worktree of one commit (`git worktree add --detach DIR COMMIT`), its
log in bench/records/ (`--out bench/records/seed_table-COMMIT.json --resume`, a log per language), and commit the
log on main; a later session resumes it at the same commit (the log's checks carry that commit's harness version,
which --resume keeps). Main's later commits are then checked against the table on a few seeds (--seeds 2). --quick (CI's smoke run) checks seeds 1 and 2 of s07 and of the correct sample; the
suite's test_seed_stability.py checks a few mutants on a few seeds.
"""

import argparse
from concurrent.futures import ProcessPoolExecutor, as_completed
import json
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from _benchkit import add_common, out_path, write_figures  # noqa: E402  (bench/ is sys.path[0])

from harness.check.golden import fresh_golden  # noqa: E402
from harness.check.runner import CheckOptions, run_check  # noqa: E402
from harness.registry import DEFAULT_SET, load_chapter  # noqa: E402
from harness.subjects.version import version_of  # noqa: E402
from harness.staff.mutants import ported  # noqa: E402

CHAPTER = "L10.8"
SAMPLES = REPO / "examples" / "submissions"


CHUNK = 12  # rows a process checks (see main)
SEALED: tuple[str, ...] = ()  # a batch written and not yet run: its first figure is `ol mutants --set`'s, never here


def rows(language: str, quick: bool, further: list[str]) -> list[str]:
    chapter = load_chapter(CHAPTER)
    if quick:
        return [str(SAMPLES / ("rust-correct" if language == "rust" else "correct")), "mutant:s07"]
    expected = json.loads((SAMPLES / "expected.json").read_text())["submissions"]
    found = [str(SAMPLES / name) for name, row in expected.items() if row.get("language", "python") == language
             and "hangs" not in name]  # a sample that hangs on every call costs minutes a seed, times out the same tests
    sets = [DEFAULT_SET, *further]
    return found + [f"mutant:{m.id}" for s in sets for m in ported(chapter, language, s)]


def failing(subject: str, seed: int, language: str) -> dict[str, str]:
    """Each test `subject` does not pass on `seed`: its outcome (fail, error, timeout, crashed)."""
    chapter = load_chapter(CHAPTER)
    with tempfile.TemporaryDirectory(prefix="ol-seed-") as into:
        golden = str(fresh_golden(chapter, seed, Path(into)))
        rep = run_check(chapter, subject, CheckOptions(golden=golden, fresh_seed=seed, language=language,
                        ref_deps=not subject.startswith("mutant:")))  # the samples as expected.json checks them
    return {t.name: t.outcome.value for t in sorted(rep.tests, key=lambda t: t.name) if not t.outcome.passed}


def failing_rows(subjects: list[str], seed: int, language: str, pause: str) -> list[tuple[str, dict | str, float, float]]:
    """Each of `subjects` checked on `seed` in turn, in this process: its failing tests and their outcomes, or why
    it could not run; with the check's start and end (time.time()). No check starts while the file `pause` exists
    (--pause-file: a quiet moment for a measurement; a process stopped mid-check would see its calls' deadlines
    pass, and a timeout that is the bench's, not the row's)."""
    found = []
    for s in subjects:
        while pause and os.path.exists(pause):
            time.sleep(1)
        t0 = time.time()
        try:
            found.append((s, failing(s, seed, language), t0, time.time()))
        except Exception as e:  # noqa: BLE001 -- a check that cannot run is a row of the table, not a crash
            found.append((s, f"{type(e).__name__}: {e}", t0, time.time()))
    return found


def _logged(log: Path) -> list[dict]:
    """The log's finished checks (a line cut short by an interrupted run is left out)."""
    found = []
    for line in log.read_text().splitlines() if log.exists() else []:
        try:
            found.append(json.loads(line))
        except ValueError:
            continue
    return found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=40, help="grading seeds 1..N (default 40)")
    ap.add_argument("--rows", default="", help="only these rows (comma-separated: s01, x03, a sample's folder name)")
    ap.add_argument("--sets", default="extra,blind", help="the further mutant sets (default extra,blind)")
    ap.add_argument("--lang", default="python", help="the language of the samples and mutant ports (default python)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--resume", action="store_true", help="keep the log's checks of this harness version, run the rest")
    ap.add_argument("--pause-file", default="", help="no check starts while this file exists (the checks running end)")
    add_common(ap, "seed_stability", "seeds 1 and 2 of s07 and the correct sample")
    a = ap.parse_args()
    seeds = list(range(1, (2 if a.quick else a.seeds) + 1))
    further = [s for s in a.sets.split(",") if s]
    if sealed := [s for s in further if s in SEALED]:
        ap.error(f"--sets {','.join(sealed)}: a sealed set is run once, by `ol mutants --set`, never here")
    subjects = rows(a.lang, a.quick, further)
    if a.rows:
        wanted = set(a.rows.split(","))
        subjects = [s for s in subjects if s.removeprefix("mutant:") in wanted or Path(s).name in wanted]
    sets: dict[str, dict[tuple, list[int]]] = {s: {} for s in subjects}
    errors = []
    version = version_of(load_chapter(CHAPTER))["digest"]
    log = out_path(a, "seed_stability").with_suffix(f".{a.lang}.jsonl")
    done = {(d["row"], d["seed"]): tuple(d["failing"]) for d in _logged(log) if d.get("version") == version} if a.resume else {}
    kinds: dict[str, set[str]] = {s: set() for s in subjects}  # a row's outcomes other than fail, on any seed
    for d in _logged(log) if a.resume else ():
        if d.get("version") == version and d["row"] in kinds:
            kinds[d["row"]].update(f"{t} {k} (seed {d['seed']})" for t, k in d.get("outcomes", {}).items() if k != "fail")
    for (s, seed), failed in done.items():
        if s in sets and seed in seeds:
            sets[s].setdefault(failed, []).append(seed)
    log.parent.mkdir(parents=True, exist_ok=True)
    # CHUNK rows of one seed a process, each row once in it, then a fresh process: a mutant's module stays imported
    # in the process that checked it, so a row's state (a mutable default argument, a module-level cache) could
    # reach its own next seed's check there, never another row's (each mutant has its own module; a sample runs in
    # its own worker). The rows of a chunk share the process's imports and the reference's answers of the seed:
    # measured 4.4 s a check in a warm process against 6.3 s in a fresh one (s03, Python, quiet). Processes are
    # forked from a server that imported this module and so the harness (a spawned interpreter ran fewer checks).
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["__main__"])
    with ProcessPoolExecutor(max_workers=a.jobs, mp_context=context, max_tasks_per_child=1) as pool, \
            log.open("a" if a.resume else "w") as out:
        # seed by seed: a seed's fresh cases are built once and read back by every row (harness.kernel.memo keeps
        # FRESH_KEPT seeds; row by row, 40 seeds would evict each other and every check would build them again)
        todo = [(seed, [s for s in subjects if (s, seed) not in done]) for seed in seeds]
        futures = {pool.submit(failing_rows, rows_[i:i + CHUNK], seed, a.lang, a.pause_file): seed
                   for seed, rows_ in todo for i in range(0, len(rows_), CHUNK)}
        for f in as_completed(futures):
            seed = futures[f]
            for s, outcomes, t0, t1 in f.result():
                if isinstance(outcomes, str):
                    errors.append(f"{s} seed {seed}: {outcomes}")
                    continue
                sets[s].setdefault(tuple(outcomes), []).append(seed)
                kinds[s].update(f"{t} {k} (seed {seed})" for t, k in outcomes.items() if k != "fail")
                out.write(json.dumps({"row": s, "seed": seed, "failing": list(outcomes), "outcomes": outcomes,
                                      "start": round(t0, 1), "end": round(t1, 1), "version": version}) + "\n")
                out.flush()
    varies = [s for s, got in sets.items() if len(got) > 1]
    print(f"{'row':40} failing tests on seeds {seeds[0]}..{seeds[-1]}")
    for s, got in sets.items():
        name = s.removeprefix("mutant:") if s.startswith("mutant:") else Path(s).name
        for i, (failed, on) in enumerate(sorted(got.items(), key=lambda kv: -len(kv[1]))):
            where = "" if len(got) == 1 else f"  (seeds {sorted(on)})"
            print(f"{name if i == 0 else '':40} {', '.join(failed) or '(none)'}{where}")
        if kinds[s] and len(got) > 1:  # a timeout or crash on some seed: the machine's, or the row's own
            print(f"{'':40}   not a plain fail: {', '.join(sorted(kinds[s]))}")
    print(f"{len(subjects)} rows, {len(seeds)} seeds: {len(varies)} rows whose failing tests vary with the seed"
          + (f": {', '.join(varies)}" if varies else ""))
    for e in errors:
        print("could not check:", e)
    write_figures(out_path(a, "seed_stability"), {"seeds": seeds, "language": a.lang, "varies": varies, "errors": errors,
                                                  "rows": {s: [[list(k), v] for k, v in got.items()] for s, got in sets.items()}})
    return 1 if varies or errors else 0


if __name__ == "__main__":
    sys.exit(main())
