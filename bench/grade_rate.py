"""Submissions graded per minute by `ol grade --jobs 2`: a Python class and a Rust class, side by side in one run.

    python bench/grade_rate.py [--lang python|rust|all] [--jobs 2,1] [--out F.json] [--quick]

Each language's class is 20 bare uploads (a folder holding only spec.py or spec.rs; the rest comes
from that language's reference, --ref-deps), made by `make_class` into a temporary folder:

    8 correct           python: 4 the reference's spec.py, 4 examples/submissions/correct's (a student's
                        own style); rust: the reference's spec.rs; each with a line of its own (no two alike)
    8 mutants           8 different pitfalls (MUTANTS), the chapter's mutant patch applied to the reference's file
    2 that do not load  python: a syntax error, an import of a module that does not exist;
                        rust: a syntax error, a type error (neither compiles)
    2 that crash        python: prompt_lookup raises IndexError, rollback ends the worker (os._exit);
                        rust: prompt_lookup panics, rollback aborts the process

Each language's class is its own `ol grade` run (so each has its rate), on fresh cases from a fixed
seed, in the same bench run; with --jobs 2,1 (the default) each language is graded with --jobs 2,
then serially, to show what the second core buys. The per-submission wall median comes from the
grades.csv each run writes (its wall_s and language columns). Every grade is checked: a correct one
passes all 16 tests; a mutant does not pass the test its pitfall names (chapters/L10_8/mutants/
manifest.toml); one that does not load or compile has every test an error; one that crashes does not
pass the test that calls the crashing function but passes some other (the crash costs only its own
tests); every row is graded (never `ungraded`) and names the class's language. A grader that errs
fast is not a fast grader: a wrong grade ends the bench with exit 1, after the figures.
--quick: one correct submission and one mutant per language, --jobs 2 only (the CI smoke run: its
grades are checked, its rates printed, the goals not judged: two submissions are mostly fixed cost).
The Rust class is left out (said so) where there is no cargo.
Goals (issue 15), with --jobs 2 on this 2-core machine: Rust at least 20 submissions a minute, Python
at least 30.
"""

import argparse
import csv
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
from _benchkit import add_common, out_path, write_figures  # noqa: E402  (bench/ is sys.path[0])
sys.path.insert(0, str(REPO))
from harness.registry import load_chapter  # noqa: E402
from harness.subjects import materialize_mutant  # noqa: E402

CHAPTER = "L10.8"  # the chapter graded
LANGS = ("python", "rust")
GOALS_PER_MINUTE = {"python": 30, "rust": 20}  # issue 15, with --jobs 2 on 2 cores
GOAL_JOBS = 2  # the goals' --jobs
JOBS = (2, 1)  # each language with both cores, then serially (what the second core buys)
QUICK_JOBS = (2,)
SEED = "12345"  # the fresh cases' seed: the same class regrades identically
CORRECT = 8
MUTANTS = ("s01", "s02", "s03", "s05", "s07", "s08", "s10", "s13")  # 8 different pitfalls, over all four test files
QUICK_MUTANTS = ("s01",)
STUDENT_CORRECT = REPO / "examples/submissions/correct/tinyllm/infer/spec.py"  # a correct spec.py in a student's style
KINDS = ("correct", "mutant", "no-load", "crash")  # the class's kinds, in the order printed


@dataclass(frozen=True)
class Expect:
    """What one submission's grade must be."""
    kind: str  # one of KINDS
    must_not_pass: tuple[str, ...] = ()  # tests that must not pass
    all_pass: bool = False  # every test passes
    all_error: bool = False  # every test is an error (it did not load, or did not compile)
    some_pass: bool = False  # at least one test passes


def _insert_after(text: str, anchor: str, line: str) -> str:
    """`line` as the first statement of the function whose signature line starts with `anchor`."""
    at = text.index(anchor)
    brace = text.index("{\n", at) + 2
    return text[:brace] + line + text[brace:]


def _broken(lang: str, reference: str) -> dict[str, tuple[str, Expect]]:
    """The class's submissions that do not load or compile, and those that crash on calls: name -> (file, Expect)."""
    no_load = Expect("no-load", all_error=True)
    if lang == "python":
        raising = reference + ("\n\ndef prompt_lookup(ctx, k, max_ngram, min_ngram):  # a student's bug: one past the end\n"
                               "    return [ctx[len(ctx)]]\n")
        exiting = reference + ("\n\ndef rollback(pool, table, keep):  # a student's debugging exit, left in\n"
                               "    import os\n    os._exit(70)\n")
        missing = reference.replace("from .sampling import", "from .sampler import", 1)
        assert missing != reference
        return {"no-load-syntax": (reference + "\n\ndef oops(:\n    pass\n", no_load),
                "no-load-import": (missing, no_load),
                "crash-raises": (raising, Expect("crash", ("hand_example_prompt_lookup",), some_pass=True)),
                "crash-exits": (exiting, Expect("crash", ("rollback_hand_example",), some_pass=True))}
    panics = _insert_after(reference, "pub fn prompt_lookup(",
                           '    if k > 0 {\n        panic!("student bug: ran off the end of the draft");\n    }\n')
    aborts = _insert_after(reference, "pub fn rollback(", "    if keep > 0 {\n        std::process::abort();\n    }\n")
    return {"no-load-syntax": (reference + "\nfn oops( {\n", no_load),
            "no-load-type": (reference + '\npub fn oops() -> u32 {\n    "not a number"\n}\n', no_load),
            "crash-panics": (panics, Expect("crash", ("hand_example_prompt_lookup",), some_pass=True)),
            "crash-aborts": (aborts, Expect("crash", ("rollback_hand_example",), some_pass=True))}


def make_class(chapter, lang: str, into: Path, quick: bool) -> dict[str, Expect]:
    """One language's class in `into`, each submission a folder holding only the chapter's file; returns
    each submission's name and what its grade must be."""
    spec = chapter.language(lang)
    student_file = spec.student_files[0]
    upload = Path(student_file).name  # spec.py | spec.rs: a bare upload
    comment = "#" if lang == "python" else "//"
    reference = (spec.reference / student_file).read_text()
    files: dict[str, tuple[str, Expect]] = {}
    correct = Expect("correct", all_pass=True)
    for i in range(1 if quick else CORRECT):
        own = STUDENT_CORRECT.read_text() if lang == "python" and i % 2 else reference
        files[f"correct-{i + 1:02d}"] = (own + f"\n{comment} student {i + 1}\n", correct)
    by_id = {m.id: m for m in chapter.mutants}
    with tempfile.TemporaryDirectory(prefix="ol-grade-rate-mutant-") as tmp:
        for mid in QUICK_MUTANTS if quick else MUTANTS:
            tree = materialize_mutant(chapter, mid, Path(tmp) / mid, lang)
            files[f"mutant-{mid}"] = ((tree / student_file).read_text(), Expect("mutant", (by_id[mid].must_fail,)))
    if not quick:
        files.update(_broken(lang, reference))
    for name, (text, _) in files.items():
        (into / name).mkdir(parents=True)
        (into / name / upload).write_text(text)
    return {name: expect for name, (_, expect) in files.items()}


def grade_once(klass: Path, jobs: int, out_csv: Path) -> float:
    """Seconds `ol grade` takes on the class; a run that fails (other than exit 3, some submission ungraded,
    which the grade check reports) ends the bench with its output."""
    cmd = [sys.executable, "-m", "harness.cli", "grade", CHAPTER, str(klass), "--jobs", str(jobs), "--ref-deps",
           "--seed", SEED, "--out", str(out_csv)]
    start = time.perf_counter()
    r = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    elapsed = time.perf_counter() - start
    if r.returncode not in (0, 3) or not out_csv.is_file():
        sys.exit(f"ol grade failed ({r.returncode}):\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
    return elapsed


def wrong_grades(label: str, rows: dict[str, dict], expect: dict[str, Expect], lang: str, tests: list[str]) -> list[str]:
    """Each graded submission against what its grade must be; returns the differences."""
    problems = [f"{label}: {n} was not graded" for n in expect if n not in rows]
    for name, row in rows.items():
        e, got = expect[name], {t: row.get(t) for t in tests}
        not_passed = {t: o for t, o in got.items() if o != "pass"}
        wrong = []
        if row["status"] != "graded":
            wrong.append(f"it is {row['status']}: {row['reason']}")
        if row["language"] != lang:
            wrong.append(f"its language is {row['language']!r}, not {lang}")
        if e.all_pass and not_passed:
            wrong.append(f"it did not pass {not_passed}")
        if e.all_error and any(o != "error" for o in got.values()):
            wrong.append(f"not every test is an error: {got}")
        if e.some_pass and len(not_passed) == len(tests):
            wrong.append("it passed no test (the crash cost more than its own tests)")
        wrong += [f"it passed {t}" for t in e.must_not_pass if got.get(t) == "pass"]
        problems += [f"{label}: {name} ({e.kind}): {w}" for w in wrong]
    return problems


def median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lang", choices=(*LANGS, "all"), default="all", help="the classes graded (default all)")
    ap.add_argument("--jobs", default=None, help=f"comma-separated --jobs of each language's runs (default "
                                                 f"{','.join(map(str, JOBS))}; {','.join(map(str, QUICK_JOBS))} with --quick)")
    add_common(ap, "grade_rate", f"1 correct + mutant {', '.join(QUICK_MUTANTS)} per language, --jobs 2 only")
    a = ap.parse_args()
    try:
        a.jobs = tuple(int(j) for j in a.jobs.split(",")) if a.jobs else (QUICK_JOBS if a.quick else JOBS)
    except ValueError:
        ap.error(f"--jobs {a.jobs!r}: comma-separated integers, e.g. 2,1")
    if not a.jobs or min(a.jobs) < 1:
        ap.error("--jobs: each at least 1")
    a.langs = LANGS if a.lang == "all" else (a.lang,)
    a.out = out_path(a, "grade_rate")
    return a


def main() -> int:
    a = parse_args()
    chapter = load_chapter(CHAPTER)
    tests = [t.name for t in chapter.tests]
    langs = [lang for lang in a.langs if lang != "rust" or shutil.which("cargo")]
    if len(langs) < len(a.langs):
        print("no cargo here: the Rust class is left out")
    runs: dict[str, dict[int, dict]] = {lang: {} for lang in langs}
    expects, problems = {}, []
    with tempfile.TemporaryDirectory(prefix="ol-grade-rate-") as tmp:
        for lang in langs:
            expects[lang] = make_class(chapter, lang, Path(tmp) / f"class-{lang}", a.quick)
        for jobs in a.jobs:  # both languages with --jobs 2 first, close in time; then the serial runs
            for lang in langs:
                out_csv = Path(tmp) / f"grades-{lang}-{jobs}.csv"
                elapsed = grade_once(Path(tmp) / f"class-{lang}", jobs, out_csv)
                rows = {r["submission"]: r for r in csv.DictReader(out_csv.open())}
                problems += wrong_grades(f"{lang} --jobs {jobs}", rows, expects[lang], lang, tests)
                walls = {n: float(r["wall_s"]) for n, r in rows.items()}
                by_kind = {k: median([w for n, w in walls.items() if expects[lang][n].kind == k]) for k in KINDS}
                runs[lang][jobs] = {"seconds": elapsed, "per_minute": len(expects[lang]) / elapsed * 60,
                                    "wall_median_s": median(list(walls.values())), "wall_median_s_by_kind": by_kind,
                                    "wall_s": walls}
    n = {lang: len(e) for lang, e in expects.items()}
    kinds = {lang: {k: sum(e.kind == k for e in expects[lang].values()) for k in KINDS} for lang in langs}
    for lang in langs:
        print(f"{lang}: {n[lang]} bare uploads (" + ", ".join(f"{c} {k}" for k, c in kinds[lang].items() if c) +
              f"), --ref-deps, fresh cases seed {SEED}")
    serial = 1 in a.jobs and len(a.jobs) > 1
    print(f"{'language':<8} {'jobs':>4} {'seconds':>8} {'per minute':>11} {'median s/sub':>13}"
          + (f" {'x jobs=1':>9}" if serial else "") + "  goal")
    for jobs in a.jobs:
        for lang in langs:
            v = runs[lang][jobs]
            goal = ""
            if jobs == GOAL_JOBS:
                g = GOALS_PER_MINUTE[lang]
                goal = f">= {g} a minute " + ("not judged on a smoke run" if a.quick else
                                              "met" if v["per_minute"] >= g else "NOT met")
            x = f" {v['per_minute'] / runs[lang][1]['per_minute']:9.2f}" if serial else ""
            print(f"{lang:<8} {jobs:>4} {v['seconds']:8.1f} {v['per_minute']:11.1f} {v['wall_median_s']:13.2f}{x}  {goal}")
    print("median s/sub by kind: " + "; ".join(
        f"{lang} --jobs {jobs}: " + " ".join(f"{k} {m:.2f}" for k, m in runs[lang][jobs]["wall_median_s_by_kind"].items()
                                            if m is not None)
        for jobs in a.jobs for lang in langs))
    if "python" in runs and "rust" in runs:
        for jobs in a.jobs:
            py, rs = runs["python"][jobs], runs["rust"][jobs]
            print(f"--jobs {jobs}: rust grades {rs['per_minute'] / py['per_minute']:.2f}x python's rate; "
                  f"its median submission takes {rs['wall_median_s'] / py['wall_median_s']:.2f}x as long")
    write_figures(a.out, {"quick": a.quick, "seed": SEED, "jobs": list(a.jobs), "languages": langs, "submissions": n,
                          "kinds": kinds, "mutants": list(QUICK_MUTANTS if a.quick else MUTANTS), "runs": runs,
                          "goals_per_minute_jobs_2": {k: GOALS_PER_MINUTE[k] for k in langs},
                          "goals_met": {lang: runs[lang][GOAL_JOBS]["per_minute"] >= GOALS_PER_MINUTE[lang]
                                        for lang in langs if GOAL_JOBS in runs[lang] and not a.quick},
                          "problems": problems})
    for p in problems:
        print(f"BROKEN: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
