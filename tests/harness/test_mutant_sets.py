"""Further mutant sets (chapter.toml's `mutant_sets`): L10.8's extra set loads, its ids are unique and
disjoint from the named pitfalls s01-s13, and every patch applies to the reference; on a toy pack,
`ol mutants --set` counts a mutant killed by any failing test, reports one killed only outside its
expected_by as a finding, exits 1 below the threshold, and leaves the default set's run as it was; the
registry refuses a set that is not well formed."""

import json
import py_compile

import pytest

from harness.kernel.errors import UsageError
from harness.staff.mutants import SET_KILL_THRESHOLD
from harness.registry import DEFAULT_SET, RuleMutantSpec, load_chapter
from harness.subjects.open import materialize_mutant

from tests.harness.test_packs import TOY, make_pack, ol, toy_patch

CH = load_chapter("L10.8")
EXTRA = CH.mutant_set("extra")


def test_the_extra_set_loads_with_unique_ids_disjoint_from_the_pitfalls():
    assert len(EXTRA) >= 30, f"issue 17 asks for at least 30 mutants in the extra set, it has {len(EXTRA)}"
    ids = [m.id for m in EXTRA]
    assert len(set(ids)) == len(ids), f"duplicate ids in the extra set: {sorted(i for i in ids if ids.count(i) > 1)}"
    named = {m.id for m in CH.mutants}
    assert named == {f"s{i:02d}" for i in range(1, 14)}, f"the default set must stay s01-s13, it is {sorted(named)}"
    assert not named & set(ids), f"extra ids reuse the named pitfalls' ids: {sorted(named & set(ids))}"
    tests = {t.name for t in CH.tests}
    for m in EXTRA:
        assert isinstance(m, RuleMutantSpec) and m.rule and m.misconception and m.differs_on, f"{m.id}: every field is said"
        assert m.expected_by and set(m.expected_by) <= tests, f"{m.id}: expected_by {m.expected_by} must name tests of L10.8"
        assert CH.mutant(m.id) is m, f"mutant:{m.id} must name this set's mutant"
    rules = [m.rule for m in EXTRA]
    assert len(set(rules)) == len(rules), "each mutant of the set breaks a different rule"
    assert CH.mutant_set(DEFAULT_SET) == CH.mutants
    with pytest.raises(UsageError, match="no mutant set 'nope'"):
        CH.mutant_set("nope")


def test_every_extra_patch_applies_to_the_reference_and_changes_it(tmp_path):
    reference = CH.language("python").reference
    for m in EXTRA:
        into = materialize_mutant(CH, m.id, tmp_path / m.id)  # patch -p1 -d <copy holding tinyllm/>; raises if it does not apply
        changed = [f for f in (into / "tinyllm").rglob("*.py")
                   if f.read_bytes() != (reference / f.relative_to(into)).read_bytes()]
        assert changed, f"{m.id}: its patch leaves the reference unchanged"
        for f in changed:
            py_compile.compile(str(f), doraise=True)  # still Python: a mutant is a bug, not a syntax error


SET_MANIFEST = """
    [[mutant]]
    id = "x1"
    rule = "double(x) is 2 * x"
    misconception = "doubling adds two"
    expected_by = "doubles_match_the_golden_cases"
    differs_on = "double(3): 6, the mutant 5"
    patch = "x1.patch"

    [[mutant]]
    id = "x2"
    rule = "double(0) is 0"
    misconception = "zero doubles to one"
    expected_by = ["doubles_by_hand"]  # which does not double 0: the golden cases catch it, a finding
    differs_on = "double(0): 0, the mutant 1"
"""
X1 = toy_patch("x + 2")
X2 = toy_patch("2 * x if x else 1")
X3 = toy_patch("x * 2")


def _with_set(manifest: str = SET_MANIFEST, patches: dict | None = None, toml_line: str | None = None) -> dict:
    files = dict(TOY)
    files["chapter.toml"] = TOY["chapter.toml"].replace(
        'mutants = "mutants/manifest.toml"\n',
        'mutants = "mutants/manifest.toml"\n' + (toml_line or '        mutant_sets = { extra = "mutants/extra/manifest.toml" }\n'))
    files["mutants/extra/manifest.toml"] = manifest
    files.update({f"mutants/extra/{k}": v for k, v in (patches or {"x1.patch": X1, "x2.patch": X2}).items()})
    return files


@pytest.mark.slow
def test_a_further_set_counts_any_failure_and_reports_findings(tmp_path):
    packs = make_pack(tmp_path / "packs", _with_set())
    r = ol(packs, tmp_path, "mutants", "T0.1")  # the default set: as before
    assert r.returncode == 0 and "1 of 1 mutants caught by their named test" in r.stdout, r.stdout + r.stderr
    r = ol(packs, tmp_path, "mutants", "T0.1", "--set", "extra", "--json", "extra.json")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "2 of 2 mutants killed (100.0 %" in r.stdout and "finding x2" in r.stdout, r.stdout
    result = json.loads((tmp_path / "extra.json").read_text())
    by_id = {m["id"]: m for m in result["mutants"]}
    assert by_id["x1"]["verdict"] == "caught" and by_id["x1"]["failed_tests"] == ["doubles_match_the_golden_cases"]
    assert by_id["x2"]["verdict"] == "caught elsewhere" and by_id["x2"]["failed_tests"] == ["doubles_match_the_golden_cases"]
    assert result["findings"] == ["x2"] and result["survivors"] == [] and result["threshold"] == SET_KILL_THRESHOLD
    r = ol(packs, tmp_path, "check", "T0.1", "--submission", "mutant:x1")  # a set's mutant is a subject like any other
    assert r.returncode == 1 and "1 of 2 passed" in r.stdout, r.stdout + r.stderr


def _with_survivor() -> dict:
    """The set with x3 too: an equivalent rewrite, which no test can kill (a survivor)."""
    manifest = SET_MANIFEST + """
    [[mutant]]
    id = "x3"
    rule = "double(x) is 2 * x, written either way"
    misconception = "none: an equivalent rewrite, which no test can kill"
    expected_by = "doubles_match_the_golden_cases"
    differs_on = "none"
    """
    return _with_set(manifest, {"x1.patch": X1, "x2.patch": X2, "x3.patch": X3})


def test_a_further_set_below_the_threshold_fails_and_names_its_survivor(tmp_path):
    packs = make_pack(tmp_path / "packs", _with_survivor())
    r = ol(packs, tmp_path, "mutants", "T0.1", "--set", "extra")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "2 of 3 mutants killed (66.7 %" in r.stdout and "survivor x3" in r.stdout, r.stdout


@pytest.mark.slow
def test_fast_runs_a_caught_mutant_on_its_expected_tests_alone_and_gives_the_whole_matrixs_figures(tmp_path):
    """--fast (CI's set runs): x1 is caught by its expected_by test and runs it alone; x2 (a finding) and x3 (a
    survivor) pass theirs and run every test; the verdicts, kill figure, findings and survivors are the full run's."""
    packs = make_pack(tmp_path / "packs", _with_survivor())
    got = {}
    for how in ("full", "fast"):
        r = ol(packs, tmp_path, "mutants", "T0.1", "--set", "extra", "--json", f"{how}.json", *(["--fast"] if how == "fast" else []))
        assert r.returncode == 1 and "2 of 3 mutants killed (66.7 %" in r.stdout and "survivor x3" in r.stdout, r.stdout + r.stderr
        got[how] = json.loads((tmp_path / f"{how}.json").read_text())
    figures = lambda m: {k: m[k] for k in ("killed", "total", "kill_rate", "findings", "survivors", "unviable", "ok")}
    assert figures(got["fast"]) == figures(got["full"])
    verdicts = lambda m: {row["id"]: (row["verdict"], row["killed"]) for row in m["mutants"]}
    assert verdicts(got["fast"]) == verdicts(got["full"])
    fast = {row["id"]: row for row in got["fast"]["mutants"]}
    assert fast["x1"]["tests_run"] == ["doubles_match_the_golden_cases"], "caught by its expected_by test, run on it alone"
    assert "tests_run" not in fast["x2"] and "tests_run" not in fast["x3"], "not caught there: every test"
    assert fast["x2"]["failed_tests"] == ["doubles_match_the_golden_cases"], "the finding's killing test, as in the full run"
    assert not any("tests_run" in row for row in got["full"]["mutants"])
    r = ol(packs, tmp_path, "mutants", "T0.1", "--fast")  # the named pitfalls: every test, always; said, not ignored
    assert r.returncode == 2 and "--fast applies to a further set" in r.stderr, r.stdout + r.stderr


def test_a_mistake_a_language_cannot_make_is_left_out_of_its_count_with_the_reason(tmp_path):
    manifest = SET_MANIFEST + """
    [[mutant]]
    id = "x3"
    rule = "double(x) refuses a string"
    misconception = "a string doubles to itself twice"
    expected_by = "doubles_match_the_golden_cases"
    differs_on = "double('a'): an error, the mutant 'aa'"
    python_none = "only another language's types let it in"

    [[mutant]]
    id = "x4"
    rule = "double(x) is x + x"
    misconception = "a patch the contract has since made equivalent"
    expected_by = "doubles_match_the_golden_cases"
    differs_on = "none any more"
    patch = "x1.patch"
    python_none = "equivalent since the contract changed: kept, not run, not counted"
    """
    packs = make_pack(tmp_path / "packs", _with_set(manifest))
    r = ol(packs, tmp_path, "mutants", "T0.1", "--set", "extra", "--json", "extra.json")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "2 of 2 mutants killed (100.0 %" in r.stdout, r.stdout
    assert "not counted in python: x3 (only another language's types let it in)" in r.stdout, r.stdout
    result = json.loads((tmp_path / "extra.json").read_text())
    assert result["not_applicable"] == {"x3": "only another language's types let it in",
                                        "x4": "equivalent since the contract changed: kept, not run, not counted"}
    assert result["not_ported"] == [] and [m["id"] for m in result["mutants"]] == ["x1", "x2"]  # a row with a patch too
    assert result["total"] == 2 and result["ok"]


@pytest.mark.parametrize("change, message", [
    (dict(manifest=SET_MANIFEST.replace('id = "x1"', 'id = "m01"'), patches={"x1.patch": X1, "x2.patch": X2}),
     "'m01' is also in set default"),
    (dict(manifest=SET_MANIFEST.replace('expected_by = "doubles_match_the_golden_cases"', 'expected_by = "no_such_test"')),
     "not tests of T0.1"),
    (dict(manifest=SET_MANIFEST.replace('expected_by = ["doubles_by_hand"]', "expected_by = []")),
     "expected_by must name at least one test"),
    (dict(toml_line='        mutant_sets = "mutants/extra/manifest.toml"\n'), "mutant_sets must be a table"),
    (dict(toml_line='        mutant_sets = { default = "mutants/extra/manifest.toml" }\n'), "mutant_sets must be a table"),
])
def test_the_registry_refuses_a_malformed_set(tmp_path, change, message):
    packs = make_pack(tmp_path / "packs", _with_set(**change))
    r = ol(packs, tmp_path, "tests", "T0.1")
    assert r.returncode == 3 and message in r.stderr, r.stdout + r.stderr


@pytest.mark.slow
def test_an_unknown_or_empty_set_is_a_usage_error(tmp_path):
    packs = make_pack(tmp_path / "packs", _with_set())
    r = ol(packs, tmp_path, "mutants", "T0.1", "--set", "nope")
    assert r.returncode == 2 and "no mutant set 'nope'" in r.stderr and "default, extra" in r.stderr, r.stdout + r.stderr
    packs = make_pack(tmp_path / "packs2", _with_set(toml_line='        mutant_sets = { extra = "mutants/none.toml" }\n'))
    r = ol(packs, tmp_path, "tests", "T0.1")  # a set whose manifest is missing is empty: the pack still loads and grades
    assert r.returncode == 0, r.stdout + r.stderr
    r = ol(packs, tmp_path, "mutants", "T0.1", "--set", "extra")
    assert r.returncode == 2 and "is empty" in r.stderr, r.stdout + r.stderr
