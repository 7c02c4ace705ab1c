"""`ol grade` on the example class: expected outcomes, the same on two runs with one seed, valid
outputs; and fresh cases defeat a submission that hard-codes the shipped golden answers."""

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "submissions"
SCHEMA = json.loads((REPO / "harness" / "schemas" / "check_report.schema.json").read_text())
DIFFERENTIAL = {"prompt_lookup_matches_python_l8_6", "verify_matches_python_l8_6"}


def grade(out: Path, submissions: Path, *extra) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", "grade", "L10.8", str(submissions), "--jobs", "2",
                           "--out", str(out / "grades.csv"), "--results-dir", str(out / "results"), *extra],
                          capture_output=True, text=True, timeout=900, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})


def outcomes(out: Path) -> dict[str, dict[str, str]]:
    with open(out / "grades.csv") as f:
        rows = list(csv.DictReader(f))
    fixed = {"submission", "passed", "failed", "score", "max_score", "wall_s"}
    return {r["submission"]: {k: v for k, v in r.items() if k not in fixed} for r in rows}


def test_grading_the_examples_twice_with_one_seed(tmp_path):
    expected = json.loads((EXAMPLES / "expected.json").read_text())["submissions"]
    runs = []
    for i in (1, 2):
        r = grade(tmp_path / f"run{i}", EXAMPLES, "--seed", "4242", "--ref-deps")
        assert r.returncode == 0, r.stderr[-3000:]
        runs.append(outcomes(tmp_path / f"run{i}"))
    assert runs[0] == runs[1], "the same seed must regrade identically"
    assert set(runs[0]) == set(expected)
    for name, want in expected.items():
        got = runs[0][name]
        failing = {t: o for t, o in got.items() if o != "pass"}
        assert failing == want["must_fail"], f"{name}: {failing} != {want['must_fail']}"
    for report in (tmp_path / "run1" / "results").glob("*.json"):
        data = json.loads(report.read_text())
        if report.name != "summary.json":
            jsonschema.validate(data, SCHEMA)
            assert data["seed"] == 4242
    summary = json.loads((tmp_path / "run1" / "results" / "summary.json").read_text())
    assert summary["seed"] == 4242 and summary["summary"]["submissions"] == len(expected)
    assert summary["summary"]["passed_by_test"]["hand_example_greedy_verify"] == sum(
        "hand_example_greedy_verify" not in w["must_fail"] for w in expected.values())


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
    assert all(shipped[t] == "pass" for t in DIFFERENTIAL), f"on the shipped cases the memorised answers pass: {shipped}"
    r = grade(tmp_path / "fresh", tmp_path / "class", "--seed", "99", "--ref-deps")
    assert r.returncode == 0, r.stderr[-2000:]
    fresh = outcomes(tmp_path / "fresh")["cheater"]
    assert all(fresh[t] == "fail" for t in DIFFERENTIAL), f"fresh cases must expose them: {fresh}"
