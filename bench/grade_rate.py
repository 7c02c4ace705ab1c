"""Submissions graded per minute by `ol grade`: a Python class and a Rust class, on the local default and on a
loopback Dask cluster, side by side in one run; Dask's overhead; how fast a resumed run skips.

    python bench/grade_rate.py [--lang python|rust|all] [--jobs 2,1] [--cluster 1,2|none] [--pairs N] [--out F.json] [--quick] [--resume-only]

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
then serially, to show what the second core buys. Then, with --cluster 1,2 (the default), each class
is graded through `--scheduler` on a loopback Dask cluster (a real `dask scheduler` and `dask worker
--nthreads 1` processes, bench/_grade_cluster.py) of 1 worker, then of 2: what the second worker
buys, and Dask's per-submission overhead against --jobs 1 (one judge at a time on both; the time
outside the judges, so the judges' own noise cancels; the whole-run difference is printed too), and
how busy the workers were (judge time over workers x run time: 2 workers' rate at equal judge speed,
apart from what two judges at once cost on this machine's shared cores). A language's runs follow
one another, close in time (the machine is shared and its load drifts). The per-submission wall median comes from the grades.csv each run writes (its wall_s and language
columns). Every grade is checked, on every engine: a correct one passes all 16 tests; a mutant does
not pass the test its pitfall names (chapters/L10_8/mutants/manifest.toml); one that does not load or
compile has every test an error; one that crashes does not pass the test that calls the crashing
function but passes some other (the crash costs only its own tests); every row is graded (never
`ungraded`) and names the class's language. A grader that errs fast is not a fast grader: a wrong
grade ends the bench with exit 1, after the figures.
Resume: the --jobs 2 command run again on its graded class (it skips all 20), and the plain `ol grade`
command on a class of 100 whose ledger already holds each graded (bench/_grade_cluster.py says how
that ledger is written), timed after one untimed run of it (which, as the run that graded the class would,
compares the class's code and writes its pages: its seconds are printed beside): a resumed run reuses both.
--pairs N (default 1): the cluster runs N times over, the sizes interleaved (1w, 2w, 1w, 2w, ...), so that
a drift of this shared machine's load between two runs weighs on one ratio, not on all: every pair's
ratio is printed, and the 1.8x goal is judged on their median (the first pair's runs give the other
figures).
--resume-only: the resume of 100 alone (the figure of issue 28's regression, in well under a minute): one correct
Python upload graded with --jobs 1 for a real report to copy into the ledger, then the plain `ol grade` over
the 100, timed and judged; no rates, no cluster.
--quick: one correct submission and one mutant, Python's class unless --lang says otherwise, --jobs 2 and a
2-worker cluster only, and the resume of QUICK_RESUME_N (the CI smoke run: its grades are checked, its rates printed, the
goals not judged: two submissions are mostly fixed cost; the suite grades Rust classes locally and on a
cluster). The Rust class is left out (said so) where there is no cargo.
Goals (issue 15), with --jobs 2 on this 2-core machine: Rust at least 20 submissions a minute, Python
at least 30. Issue 16: 2 workers at least 1.8x one worker's rate; Dask's overhead under 5 % of a
submission's time; a resumed run skips 100 graded submissions in under 5 s.
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
import _grade_cluster as gc  # noqa: E402
sys.path.insert(0, str(REPO))
from tests.harness.loopback_kit import Loopback  # noqa: E402
from harness.registry import load_chapter  # noqa: E402
from harness.subjects.open import materialize_mutant  # noqa: E402

CHAPTER = "L10.8"  # the chapter graded
LANGS = ("python", "rust")
GOALS_PER_MINUTE = {"python": 30, "rust": 20}  # issue 15, with --jobs 2 on 2 cores
GOAL_JOBS = 2  # the goals' --jobs
JOBS = (2, 1)  # each language with both cores, then serially (what the second core buys)
QUICK_JOBS = (2,)
CLUSTER = (1, 2)  # loopback Dask clusters of 1, then 2 single-threaded workers
QUICK_CLUSTER = (2,)
GRADE_DEADLINE_S = 3600  # one `ol grade` of a class (the serial Rust class takes about 500 s here)
SEED = "12345"  # the fresh cases' seed: the same class regrades identically
CORRECT = 8
MUTANTS = ("s01", "s02", "s03", "s05", "s07", "s08", "s10", "s13")  # 8 different pitfalls, over all four test files
QUICK_MUTANTS = ("s01",)
QUICK_RESUME_N = 10  # the smoke run's resume: its first run compares and renders the class (about 200 s for 100 on a loaded machine)
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


def grade_once(klass: Path, where: list[str], out_csv: Path) -> tuple[float, str | None]:
    """Seconds `ol grade` takes on the class, `where`: --jobs N or --scheduler ADDRESS, and the last line of a
    run that exited 3 (some submission ungraded, or the run stopped: why rows may be missing), else None. A
    run that fails otherwise ends the bench with its output."""
    cmd = [sys.executable, "-m", "harness.cli", "grade", CHAPTER, str(klass), *where, "--ref-deps",
           "--seed", SEED, "--out", str(out_csv)]
    start = time.perf_counter()
    try:
        r = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)},
                           timeout=GRADE_DEADLINE_S)
    except subprocess.TimeoutExpired:
        sys.exit(f"ol grade did not finish within {GRADE_DEADLINE_S} s: {' '.join(cmd)}")
    elapsed = time.perf_counter() - start
    if r.returncode not in (0, 3) or not out_csv.is_file():
        sys.exit(f"ol grade failed ({r.returncode}):\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
    stop = (r.stderr.strip().splitlines()[-1][:500] if r.stderr.strip() else "(no message)") if r.returncode == 3 else None
    return elapsed, stop


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
    ap.add_argument("--lang", choices=(*LANGS, "all"), default=None, help="the classes graded (default all; python with --quick)")
    ap.add_argument("--jobs", default=None, help=f"comma-separated --jobs of each language's runs (default "
                                                 f"{','.join(map(str, JOBS))}; {','.join(map(str, QUICK_JOBS))} with --quick)")
    ap.add_argument("--cluster", default=None, help=f"comma-separated sizes of the loopback Dask clusters, or none (default "
                                                    f"{','.join(map(str, CLUSTER))}; {','.join(map(str, QUICK_CLUSTER))} with --quick)")
    ap.add_argument("--pairs", type=int, default=1, help="the cluster runs this many times, interleaved; the scaling "
                                                        "goal is judged on the median pair (default 1)")
    ap.add_argument("--resume-only", action="store_true", help="only the resume of 100 (one upload graded first, "
                                                                "for the report its ledger copies)")
    add_common(ap, "grade_rate", f"1 correct + mutant {', '.join(QUICK_MUTANTS)}, Python's class, --jobs 2 and 2 workers only")
    a = ap.parse_args()
    try:
        a.jobs = tuple(int(j) for j in a.jobs.split(",")) if a.jobs else (QUICK_JOBS if a.quick else JOBS)
        a.cluster = (() if a.cluster == "none" else tuple(int(w) for w in a.cluster.split(",")) if a.cluster
                     else QUICK_CLUSTER if a.quick else CLUSTER)
    except ValueError:
        ap.error("--jobs, --cluster: comma-separated integers, e.g. 2,1")
    if not a.jobs or min(a.jobs) < 1 or (a.cluster and min(a.cluster) < 1):
        ap.error("--jobs, --cluster: each at least 1")
    if a.pairs < 1:
        ap.error("--pairs: at least 1")
    a.lang = a.lang or ("python" if a.quick else "all")
    a.langs = LANGS if a.lang == "all" else (a.lang,)
    a.out = a.out or (out_path(a, "grade_rate").with_suffix(".resume.json") if a.resume_only else out_path(a, "grade_rate"))
    return a


def figures(elapsed: float, rows: dict, expect: dict, slots: int) -> dict:
    """A run's figures; `busy`: the share of its slots' time (slots x seconds) spent inside a judge."""
    walls = {n: float(r["wall_s"]) for n, r in rows.items()}
    by_kind = {k: median([w for n, w in walls.items() if expect[n].kind == k]) for k in KINDS}
    return {"seconds": elapsed, "per_minute": len(expect) / elapsed * 60, "wall_median_s": median(list(walls.values())),
            "wall_mean_s": statistics.fmean(walls.values()), "busy": sum(walls.values()) / (slots * elapsed),
            "slots": slots, "wall_median_s_by_kind": by_kind, "wall_s": walls}


def resume_only(a, chapter) -> int:
    """The resume of RESUME_N alone: one correct Python upload graded for real (its report is what the ledger
    copies), then the plain `ol grade` over the class of RESUME_N, timed."""
    with tempfile.TemporaryDirectory(prefix="ol-grade-rate-") as tmp:
        tmp = Path(tmp)
        _upload(chapter, tmp / "class-one" / "correct-01", 0)
        out_csv = tmp / "grades-one.csv"
        _, stop = grade_once(tmp / "class-one", ["--jobs", "1"], out_csv)
        rows = {r["submission"]: r for r in csv.DictReader(out_csv.open())}
        problems = wrong_grades("python --jobs 1", rows, {"correct-01": Expect("correct", all_pass=True)}, "python",
                                [t.name for t in chapter.tests]) + ([f"ol grade stopped with exit 3: {stop}"] if stop else [])
        resume = gc.resume_skip(chapter, tmp, out_csv, SEED, lambda d, i: _upload(chapter, d, i)) if not problems else \
            {"seconds": None, "problems": []}
        problems += resume["problems"]
    goal = "met" if resume["seconds"] is not None and resume["seconds"] < gc.RESUME_GOAL_S else "NOT met"
    print(f"resume: `ol grade` over {gc.RESUME_N} already graded: " +
          (f"{resume['seconds']:.1f} s" if resume["seconds"] is not None else "did not finish") +
          f" (goal < {gc.RESUME_GOAL_S:g} s): {goal}" + _first(resume))
    write_figures(a.out, {"resume_only": True, "seed": SEED, "resume": {"skip_100_s": resume["seconds"],
                                                                         "first_s": resume.get("first_s")}, "problems": problems})
    for p in problems:
        print(f"BROKEN: {p}", file=sys.stderr)
    return 1 if problems else 0


def main() -> int:
    a = parse_args()
    chapter = load_chapter(CHAPTER)
    if a.resume_only:
        return resume_only(a, chapter)
    tests = [t.name for t in chapter.tests]
    langs = [lang for lang in a.langs if lang != "rust" or shutil.which("cargo")]
    if len(langs) < len(a.langs):
        print("no cargo here: the Rust class is left out")
    runs: dict[str, dict] = {lang: {} for lang in langs}  # lang -> label ("--jobs 2", "dask 1w") -> figures
    expects, problems = {}, []
    with tempfile.TemporaryDirectory(prefix="ol-grade-rate-") as tmp:
        tmp = Path(tmp)

        def run(lang: str, label: str, where: list[str], slots: int) -> dict:
            out_csv = tmp / f"grades-{lang}-{label.replace(' ', '').replace('-', '')}.csv"
            elapsed, stop = grade_once(tmp / f"class-{lang}", where, out_csv)
            rows = {r["submission"]: r for r in csv.DictReader(out_csv.open())}
            problems.extend(wrong_grades(f"{lang} {label}", rows, expects[lang], lang, tests))
            if len(rows) < len(expects[lang]) and stop is not None:
                problems.append(f"{lang} {label}: ol grade stopped with exit 3: {stop}")
            runs[lang][label] = figures(elapsed, rows, expects[lang], slots) | {
                "csv": str(out_csv), "where": where}
            return runs[lang][label]

        for lang in langs:
            expects[lang] = make_class(chapter, lang, tmp / f"class-{lang}", a.quick)
        for lang in langs:  # each language's runs close in time (this machine is shared: its load drifts)
            for jobs in a.jobs:
                run(lang, f"--jobs {jobs}", ["--jobs", str(jobs)], jobs)
            for pair in range(a.pairs):
                for workers in a.cluster:  # a loopback cluster of each size, up before and down after its run
                    with Loopback(workers=workers, nthreads=1) as cluster:
                        run(lang, f"dask {workers}w" + (f" #{pair + 1}" if pair else ""), ["--scheduler", cluster.address], workers)
        first = runs[langs[0]][f"--jobs {a.jobs[0]}"]
        again_s, _ = grade_once(tmp / f"class-{langs[0]}", first["where"], Path(first["csv"]))  # the same command again
        resume = gc.resume_skip(chapter, tmp, Path(first["csv"]), SEED, lambda d, i: _upload(chapter, d, i),
                                QUICK_RESUME_N if a.quick else gc.RESUME_N)
        problems += resume["problems"]
    report(a, langs, runs, expects, again_s, resume, problems)
    for p in problems:
        print(f"BROKEN: {p}", file=sys.stderr)
    return 1 if problems else 0


def _upload(chapter, into: Path, i: int) -> None:
    """One bare upload of the Python reference's spec.py with a line of its own (the resume class)."""
    spec = chapter.language("python")
    into.mkdir(parents=True)
    (into / Path(spec.student_files[0]).name).write_text((spec.reference / spec.student_files[0]).read_text() + f"\n# {i}\n")


def _first(resume: dict) -> str:
    """The untimed run before the resume: it compared the class's code and wrote its pages (what a finished run leaves)."""
    return (f"; the run before it, which compared the class's code and wrote its pages: {resume['first_s']:.1f} s"
            if resume.get("first_s") is not None else "")


def report(a, langs, runs, expects, again_s, resume, problems) -> None:
    n = {lang: len(e) for lang, e in expects.items()}
    kinds = {lang: {k: sum(e.kind == k for e in expects[lang].values()) for k in KINDS} for lang in langs}
    for lang in langs:
        print(f"{lang}: {n[lang]} bare uploads (" + ", ".join(f"{c} {k}" for k, c in kinds[lang].items() if c) +
              f"), --ref-deps, fresh cases seed {SEED}")
    pairs = [""] + [f" #{p + 1}" for p in range(1, a.pairs)]
    labels = [f"--jobs {j}" for j in a.jobs] + [f"dask {w}w{x}" for x in pairs for w in a.cluster]
    print(f"{'language':<8} {'engine':>12} {'seconds':>8} {'per minute':>11} {'median s/sub':>13} {'x serial':>9}  goal")
    for label in labels:
        for lang in langs:
            serial = "--jobs 1" if label.startswith("--jobs") else "dask 1w" + label.partition("w")[2]  # its pair's 1w
            v, base = runs[lang][label], runs[lang].get(serial)
            goal = ""
            if label == f"--jobs {GOAL_JOBS}":
                g = GOALS_PER_MINUTE[lang]
                goal = f">= {g} a minute " + ("not judged on a smoke run" if a.quick else
                                              "met" if v["per_minute"] >= g else "NOT met")
            x = f"{v['per_minute'] / base['per_minute']:9.2f}" if base and base is not v else f"{'':9}"
            print(f"{lang:<8} {label:>12} {v['seconds']:8.1f} {v['per_minute']:11.1f} {v['wall_median_s']:13.2f} {x}  {goal}")
    print("median s/sub by kind: " + "; ".join(
        f"{lang} {label}: " + " ".join(f"{k} {m:.2f}" for k, m in runs[lang][label]["wall_median_s_by_kind"].items()
                                       if m is not None) for label in labels for lang in langs))
    if "python" in runs and "rust" in runs:
        for label in labels:
            py, rs = runs["python"][label], runs["rust"][label]
            print(f"{label}: rust grades {rs['per_minute'] / py['per_minute']:.2f}x python's rate; "
                  f"its median submission takes {rs['wall_median_s'] / py['wall_median_s']:.2f}x as long")
    suffixes = [""] + [f" #{p + 1}" for p in range(1, a.pairs)]
    pair_ratios = {lang: [runs[lang][f"dask 2w{x}"]["per_minute"] / runs[lang][f"dask 1w{x}"]["per_minute"] for x in suffixes]
                   for lang in langs if {"dask 1w", "dask 2w"} <= set(runs[lang])}
    scaling = {lang: median(r) for lang, r in pair_ratios.items()}
    overheads = {lang: gc.overhead(runs[lang]["--jobs 1"], runs[lang]["dask 1w"])
                 for lang in langs if {"--jobs 1", "dask 1w"} <= set(runs[lang])}
    if scaling:
        print("dask: 2 workers grade " + ", ".join(f"{lang} {x:.2f}x" for lang, x in scaling.items()) +
              f" one worker's rate (goal >= {gc.SCALING_GOAL}x): " +
              ("met" if all(x >= gc.SCALING_GOAL for x in scaling.values()) else "NOT met") +
              (f"; the median of {a.pairs} interleaved pairs: " + "; ".join(
                  f"{lang} " + ", ".join(f"{x:.2f}" for x in r) for lang, r in pair_ratios.items()) if a.pairs > 1 else ""))
        for lang in scaling:
            one, two = runs[lang]["dask 1w"], runs[lang]["dask 2w"]
            j = (f"; --jobs 2 against --jobs 1: {runs[lang]['--jobs 2']['wall_mean_s'] / runs[lang]['--jobs 1']['wall_mean_s']:.2f}x"
                 if {"--jobs 1", "--jobs 2"} <= set(runs[lang]) else "")
            print(f"  {lang}: the workers were inside a judge {100 * one['busy']:.0f} % (1w) and {100 * two['busy']:.0f} % (2w) "
                  f"of the run; each judge took {two['wall_mean_s'] / one['wall_mean_s']:.2f}x as long with 2 at once "
                  f"(the machine's cores, shared{j}); at equal judge speed 2 workers give "
                  f"{2 * two['busy'] / one['busy']:.2f}x")
    if overheads:
        print("dask overhead per submission against --jobs 1, outside the judges: " + "; ".join(
            f"{lang} {o['per_submission_s']:+.2f} s = {100 * o['share_of_median']:+.1f} % of the median submission's "
            f"{o['median_submission_s']:.1f} s" for lang, o in overheads.items()) +
            f" (goal < {100 * gc.OVERHEAD_GOAL:g} %): " +
            ("met" if all(o["share_of_median"] < gc.OVERHEAD_GOAL for o in overheads.values()) else "NOT met"))
        print("  whole-run difference, judges' noise included: " + "; ".join(
            f"{lang} {o['raw_per_submission_s']:+.2f} s a submission = {100 * o['raw_share']:+.1f} %" for lang, o in overheads.items()))
    elif a.cluster:
        print("dask overhead: not measured (needs --jobs 1 and a 1-worker cluster)")
    skip_goal = ("not judged on a smoke run" if a.quick else "met" if resume["seconds"] and
                 resume["seconds"] < gc.RESUME_GOAL_S else "NOT met")
    print(f"resume: the {langs[0]} --jobs {a.jobs[0]} command again (skips its {n[langs[0]]}): {again_s:.1f} s; "
          f"`ol grade` over {QUICK_RESUME_N if a.quick else gc.RESUME_N} already graded: " +
          (f"{resume['seconds']:.1f} s" if resume["seconds"] is not None else "did not finish") +
          f" (goal < {gc.RESUME_GOAL_S:g} s): {skip_goal}" + _first(resume))
    write_figures(a.out, {"quick": a.quick, "seed": SEED, "jobs": list(a.jobs), "cluster": list(a.cluster),
                          "languages": langs, "submissions": n, "kinds": kinds,
                          "mutants": list(QUICK_MUTANTS if a.quick else MUTANTS), "runs": runs,
                          "dask_scaling_2_over_1": scaling, "dask_scaling_pairs": pair_ratios, "pairs": a.pairs,
                          "dask_overhead": overheads,
                          "resume": {"again_s": again_s, "skip_100_s": resume["seconds"],
                                     "first_s": resume.get("first_s")},
                          "goals_per_minute_jobs_2": {k: GOALS_PER_MINUTE[k] for k in langs},
                          "goals_met": {lang: runs[lang][f"--jobs {GOAL_JOBS}"]["per_minute"] >= GOALS_PER_MINUTE[lang]
                                        for lang in langs if f"--jobs {GOAL_JOBS}" in runs[lang] and not a.quick},
                          "problems": problems})


if __name__ == "__main__":
    sys.exit(main())
