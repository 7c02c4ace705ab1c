"""`ol grade` on the example class: expected outcomes, the same on two runs with one seed, valid
outputs; and fresh cases defeat a submission that hard-codes the shipped golden answers.

The README's command grades the Python and Rust samples together (one `ol grade` over examples/submissions)
where cargo is; without it, that run grades a copy of the Python samples alone."""

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from harness.languages import rust

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "submissions"
SCHEMA = json.loads((REPO / "harness" / "schemas" / "check_report.schema.json").read_text())
DIFFERENTIAL = {"prompt_lookup_matches_python_l8_6", "verify_matches_python_l8_6"}
EXPECTED = json.loads((EXAMPLES / "expected.json").read_text())["submissions"]
PYTHON_EXPECTED = {name: e for name, e in EXPECTED.items() if e.get("language", "python") == "python"}
HAS_CARGO = rust.missing() is None  # what the harness itself asks before a Rust build
# graded again from another folder: one that passes, one that fails a test (s07's draws), one that never loads
ELSEWHERE = ("correct", "s07-draws-u-resample-only-on-rejection", "no-import")


def python_examples(tmp_path: Path) -> Path:
    """A copy of examples/submissions holding only its Python samples (no cargo needed to grade them)."""
    klass = tmp_path / "examples-python"
    for name in PYTHON_EXPECTED:
        shutil.copytree(EXAMPLES / name, klass / name)
    return klass


def grade(out: Path, submissions: Path, *extra, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", "grade", "L10.8", str(submissions), "--jobs", "2",
                           "--out", str(out / "grades.csv"), "--results-dir", str(out / "results"), *extra],
                          capture_output=True, text=True, timeout=900, cwd=cwd, env={**os.environ, "PYTHONPATH": str(REPO)})


from harness.sandbox.confine import choose  # noqa: E402
from harness.render.csv import CSV_FIXED  # noqa: E402

FIXED = set(CSV_FIXED)  # the columns before the tests' (one per test, named as the test)


def rows(out: Path) -> dict[str, dict[str, str]]:
    with open(out / "grades.csv") as f:
        return {r["submission"]: r for r in csv.DictReader(f)}


def outcomes(out: Path) -> dict[str, dict[str, str]]:
    return {name: {k: v for k, v in r.items() if k not in FIXED} for name, r in rows(out).items()}


def _failing(row: dict) -> dict:
    return {t: o for t, o in row.items() if t not in FIXED and o != "pass"}


@pytest.mark.slow(s=135)
def test_the_readme_grade_command_from_the_root_and_from_elsewhere_grades_the_examples_as_expected_and_identically(tmp_path):
    """`ol grade L10.8 examples/submissions --seed 4242 --ref-deps` as a member of staff types it, with relative
    paths, run twice with one seed: from the project root over the mixed folder (the README's command;
    Python and Rust, when cargo is here; else a copy of the Python samples), and from another folder over a
    copy of three Python samples (ELSEWHERE: a pass, a failure, a load error). Every sample gets the grade
    expected.json states (no silent 0/16): its failing tests, passed count, score and language; the two runs
    agree on every test of the samples both graded; every output says how its code ran and validates. (One
    pair of runs serves all of it: an `ol grade` of the whole class is about half a minute of both cores.)"""
    from harness.registry import load_chapter

    points = {t.name: t.points for t in load_chapter("L10.8").tests}
    klass = python_examples(tmp_path)
    few = tmp_path / "elsewhere-class"  # the run from elsewhere: relative paths, not the whole class again
    for name in ELSEWHERE:
        shutil.copytree(klass / name, few / name)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    root_class = Path("examples/submissions") if HAS_CARGO else Path(os.path.relpath(klass, REPO))
    root_expected = EXPECTED if HAS_CARGO else PYTHON_EXPECTED
    runs = {}
    for cwd, out, rel in ((REPO, tmp_path / "from-root", root_class),
                          (elsewhere, Path("out"), Path(os.path.relpath(few, elsewhere)))):
        r = grade(out, rel, "--seed", "4242", "--ref-deps", cwd=cwd)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
        runs[cwd] = cwd / out
    root, other = runs[REPO], runs[elsewhere]

    got = rows(root)  # the README's command: every sample as expected.json states
    assert set(got) == set(root_expected), sorted(set(got) ^ set(root_expected))
    if HAS_CARGO:
        assert {e.get("language", "python") for e in EXPECTED.values()} == {"python", "rust"}
    for name, want in root_expected.items():
        row = got[name]
        assert row["status"] == "graded", (name, row["reason"])
        assert row["language"] == want.get("language", "python"), f"{name}: language {row['language']!r}"
        assert _failing(row) == want["must_fail"], f"{name}: {_failing(row)} != {want['must_fail']}"
        assert int(row["passed"]) == len(want["must_pass"]), (name, row["passed"])
        assert float(row["score"]) == sum(points[t] for t in want["must_pass"]), (name, row["score"])
    assert {r["sandbox"] for r in got.values()} == {choose().name}, "every row says how its code ran"
    summary = json.loads((root / "results" / "summary.json").read_text())
    assert summary["seed"] == 4242 and summary["summary"]["submissions"] == len(root_expected)
    assert summary["summary"]["graded"] == len(root_expected)
    assert summary["summary"]["all_passed"] == sum(not w["must_fail"] for w in root_expected.values())
    assert summary["summary"]["passed_by_test"]["hand_example_greedy_verify"] == sum(
        "hand_example_greedy_verify" not in w["must_fail"] for w in root_expected.values())
    for report in (root / "results").glob("*.json"):
        if report.name != "summary.json" and not report.name.startswith("."):  # .similarity.json: ol similar's pairs
            data = json.loads(report.read_text())
            jsonschema.validate(data, SCHEMA)
            assert data["seed"] == 4242

    theirs = outcomes(other)  # from elsewhere, the copy: as expected, and the same seed regrades identically
    assert set(theirs) == set(ELSEWHERE)
    assert all(r["status"] == "graded" for r in rows(other).values())
    for name in ELSEWHERE:
        want = PYTHON_EXPECTED[name]
        assert _failing(theirs[name]) == want["must_fail"], f"{name} graded from {elsewhere}: {_failing(theirs[name])}"
    mine = outcomes(root)
    assert {n: mine[n] for n in ELSEWHERE} == theirs, "the same seed must regrade identically"


CHEAT = '''
# A submission that memorised the shipped golden answers (read from the file when it was written).
_PL = {PL!r}
_V = {V!r}
_real_pl, _real_vd = prompt_lookup, verify_draft


def prompt_lookup(ctx, k, max_ngram, min_ngram):
    return list(_PL.get(repr((list(ctx), k, max_ngram, min_ngram)), [0]))


def verify_draft(rows, draft, draft_probs, p, prompt, output, rng):
    got = _V.get(repr((list(map(int, draft)), list(map(int, prompt)), list(map(int, output)), rng.state)))
    if got is None:
        return Verified([0], [0.0], 0)
    rng.state = got[3]
    return Verified(got[0], got[1], got[2])
'''


@pytest.mark.slow(s=25)
def test_fresh_cases_defeat_memorised_golden_answers(tmp_path):
    sys.path.insert(0, str(REPO / "reference"))
    from tinyllm.rng import Pcg32

    golden = json.loads((REPO / "chapters" / "L10_8" / "fixtures" / "spec_golden.json").read_text())
    pl = {repr((c["ctx"], c["k"], c["max_ngram"], c["min_ngram"])): c["expect"] for c in golden["prompt_lookup"]}
    v = {}
    for c in golden["verify"]:
        start, end = Pcg32.from_seed(c["seed"]), Pcg32.from_seed(c["seed"])
        while end.next_u32() != c["expect"]["next_u32"]:
            pass
        back = Pcg32.from_seed(c["seed"])  # the state just before next_u32: one step behind `end`
        while True:
            probe = Pcg32.from_seed(0)
            probe.state, probe.inc = back.state, back.inc
            if probe.next_u32() == c["expect"]["next_u32"]:
                break
            back.next_u32()
        e = c["expect"]
        v[repr((c["draft"], c["prompt"], c["output"], start.state))] = (e["tokens"], e["logprobs"], e["n_accepted"], back.state)
    sub = tmp_path / "class" / "cheater" / "tinyllm" / "infer"
    sub.mkdir(parents=True)
    for d in (sub.parent, sub):
        (d / "__init__.py").write_text("")
    (sub / "spec.py").write_text((REPO / "reference" / "tinyllm" / "infer" / "spec.py").read_text() + CHEAT.replace("{PL!r}", repr(pl)).replace("{V!r}", repr(v)))

    r = grade(tmp_path / "shipped", tmp_path / "class", "--shipped-cases", "--ref-deps")
    assert r.returncode == 0, r.stderr[-2000:]
    shipped = outcomes(tmp_path / "shipped")["cheater"]
    # on the shipped cases the memorised verify answers pass the golden file's replay (the cheat is a working one) and
    # fail only the property check, which draws inputs no file holds (issues 26, 37) ...
    report = json.loads((tmp_path / "shipped" / "results" / "cheater.json").read_text())
    verify = {t["name"]: t for t in report["tests"]}["verify_matches_python_l8_6"]
    assert verify["outcome"] == "fail", f"the property check must expose memorised answers: {shipped}"
    assert verify["message"].startswith("smallest input where yours differs: verify_draft("), verify["message"][:600]
    # ... and memorised drafts fail too
    assert shipped["prompt_lookup_matches_python_l8_6"] == "fail", f"the property check must expose them: {shipped}"
    r = grade(tmp_path / "fresh", tmp_path / "class", "--seed", "99", "--ref-deps")
    assert r.returncode == 0, r.stderr[-2000:]
    fresh = outcomes(tmp_path / "fresh")["cheater"]
    assert all(fresh[t] == "fail" for t in DIFFERENTIAL), f"fresh cases must expose them: {fresh}"


@pytest.mark.slow
def test_an_entry_that_is_no_submission_is_rejected_with_zero_and_the_run_exits_0(tmp_path):
    klass = tmp_path / "class"
    (klass / "empty").mkdir(parents=True)  # not a submission at all: the layout function refuses it
    good = klass / "good"
    (good / "tinyllm" / "infer").mkdir(parents=True)
    (good / "tinyllm" / "infer" / "spec.py").write_text((REPO / "reference" / "tinyllm" / "infer" / "spec.py").read_text())
    r = grade(tmp_path / "out", klass, "--ref-deps", "--seed", "1")
    assert r.returncode == 0 and "1 of 2 entries are no submission" in r.stderr, r.stdout + r.stderr
    got = rows(tmp_path / "out")
    assert got["empty"]["status"] == "rejected" and got["empty"]["score"] == "0.0", got["empty"]
    assert "not a submission of L10.8" in got["empty"]["reason"], got["empty"]["reason"]
    assert got["good"]["status"] == "graded" and got["good"]["passed"] == got["good"]["max_score"].split(".")[0], got["good"]
    report = json.loads((tmp_path / "out" / "results" / "empty.json").read_text())
    jsonschema.validate(report, SCHEMA)
    assert report["rejected"] and report["ungraded"] is None and report["summary"]["score"] == 0 and "rejected" in r.stdout
    summary = json.loads((tmp_path / "out" / "results" / "summary.json").read_text())["summary"]
    assert (summary["graded"], summary["rejected"], summary["ungraded"]) == (1, 1, 0), summary


def test_bad_outputs_are_refused_before_anyone_is_graded(tmp_path):
    (tmp_path / "a-folder").mkdir()
    (tmp_path / "a-file").write_text("")
    for extra, words in ((("--out", tmp_path / "a-folder"), "is a folder"),
                         (("--results-dir", tmp_path / "a-file"), "is a file, not a folder"),
                         (("--jobs", "0"), "--jobs")):
        r = subprocess.run([sys.executable, "-m", "harness.cli", "grade", "L10.8", str(EXAMPLES), *map(str, extra)],
                           capture_output=True, text=True, timeout=60, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)})
        assert r.returncode == 2 and words in r.stderr and "Traceback" not in r.stderr, (extra, r.stderr)
        assert not (tmp_path / "grades.csv").exists(), "nothing may be graded before the outputs are known good"


@pytest.mark.slow(s=20)
def test_every_upload_layout_gradescope_accepts_ol_grade_accepts(tmp_path):
    """A class exported from Gradescope: each folder holds what its student uploaded (a bare spec.py, a
    tinyllm/ folder, or a zip of either); a loose file of the export (a roster) is not a submission."""
    import zipfile

    spec = (REPO / "reference" / "tinyllm" / "infer" / "spec.py").read_text()
    klass = tmp_path / "export"
    (klass / "alice").mkdir(parents=True)
    (klass / "alice" / "spec.py").write_text(spec)
    (klass / "bob" / "tinyllm" / "infer").mkdir(parents=True)
    (klass / "bob" / "tinyllm" / "infer" / "spec.py").write_text(spec)
    (klass / "carol").mkdir()
    with zipfile.ZipFile(klass / "carol" / "upload.zip", "w") as z:
        z.writestr("tinyllm/infer/spec.py", spec)
    (klass / "roster.csv").write_text("name\nalice\nbob\ncarol\n")
    r = grade(tmp_path / "out", Path(os.path.relpath(klass, tmp_path)), "--seed", "3", "--ref-deps", cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    got = rows(tmp_path / "out")
    assert set(got) == {"alice", "bob", "carol"}, got.keys()
    for name, row in got.items():
        assert row["status"] == "graded" and row["failed"] == "0", (name, row)


def test_a_judge_does_not_inherit_a_dask_nanny_s_malloc_setting(monkeypatch):
    """A Dask nanny sets MALLOC_TRIM_THRESHOLD_ for its worker; the judges started there (their zygote's
    environment, and each judge's) must not run under it (it makes a check 25 % slower), and still get the
    grading run's own settings and the rest of the caller's environment."""
    from harness.grading.judge import judge_env

    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "65536")
    monkeypatch.setenv("OL_SOMETHING_ELSE", "kept")
    env = judge_env("bwrap")
    assert "MALLOC_TRIM_THRESHOLD_" not in env and env["OL_SOMETHING_ELSE"] == "kept", sorted(env)
    assert env["OL_SPIN_S"] == "0" and env["OL_SANDBOX"] == "bwrap" and env["PYTHONPATH"] == str(REPO)
    assert env["OL_RUST_CACHE"] == "0"
