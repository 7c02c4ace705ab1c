"""Pitfall hints diagnose: graded as a submission, each mutant s01..s13 is named by the hint (and only
it: one hint each); the reference and a fresh stub get none. The hint reads the golden file's recorded
pitfall answers (harness.check.hints): nothing is re-run after the tests."""

import ast
import shutil

import pytest

from harness.check.runner import CheckOptions, run_check
from harness.check.hints import HINT_MIN_CASES, HINT_SHARE, pitfall_matches
from harness.registry import load_chapter
from harness.languages.stub import write_stub

CH = load_chapter("L10.8")


def asking_golden(chapter) -> list[str]:
    """The chapter's tests that take the golden file (the `golden` fixture): only they ask golden cases, so
    only they record the answers a hint reads; the others (properties, the statistical test) cannot change it."""
    names = set()
    for f in chapter.tests_files:
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                if "golden" in (a.arg for a in node.args.args):
                    names.add(node.name.removeprefix("test_"))
    return [t.name for t in chapter.tests if t.name in names]


ONLY = asking_golden(CH)


def test_the_golden_asking_tests_are_found():
    assert len(ONLY) >= 5 and "verify_matches_python_l8_6" in ONLY, ONLY  # the derivation found the golden tests


@pytest.mark.slow(s=6)
def test_the_reference_gets_no_hint():
    ref = run_check(CH, "reference", CheckOptions(only=ONLY))
    assert ref.pitfall_matches == (), f"the reference must get no hint: {ref.pitfall_matches}"


@pytest.mark.slow(s=6)
@pytest.mark.parametrize("mutant", [m.id for m in CH.mutants])
def test_the_hint_names_each_mutant_and_nothing_else(mutant):
    hints = tuple(h["id"] for h in run_check(CH, f"mutant:{mutant}", CheckOptions(only=ONLY)).pitfall_matches)
    assert hints == (mutant,), f"{mutant}: the hint must name it alone, got {hints}"


def test_a_fresh_stub_gets_no_hint(tmp_path):
    write_stub(CH, tmp_path / "ws")
    rep = run_check(CH, str(tmp_path / "ws"), CheckOptions(ref_deps=True))
    assert rep.passed == 0 and rep.pitfall_matches == (), rep.pitfall_matches


def test_a_submission_through_the_worker_is_named_by_its_pitfall(tmp_path):
    sample = tmp_path / "s13"
    shutil.copytree(CH.demo.parent / "s13-releases-partial-block", sample)
    rep = run_check(CH, str(sample), CheckOptions(ref_deps=True, only=["rollback_hand_example"]))
    assert [h["id"] for h in rep.pitfall_matches] == ["s13"], rep.pitfall_matches


def test_the_threshold_is_a_share_and_a_floor():
    golden = {"verify": [{"id": f"v{i}", "pitfalls": {"s07": [i]}} for i in range(10)]}
    exact = {f"v{i}": [i] for i in range(10)}
    assert [h["id"] for h in pitfall_matches(CH, golden, exact)] == ["s07"]
    most = {f"v{i}": [i] for i in range(int(10 * HINT_SHARE))}  # exactly the share: still named
    assert [h["id"] for h in pitfall_matches(CH, golden, most)] == ["s07"]
    fewer = {f"v{i}": [i] for i in range(int(10 * HINT_SHARE) - 1)}  # below the share: no hint
    assert pitfall_matches(CH, golden, fewer) == []
    tiny = {"verify": [{"id": f"v{i}", "pitfalls": {"s07": [i]}} for i in range(HINT_MIN_CASES - 1)]}
    assert pitfall_matches(CH, tiny, {f"v{i}": [i] for i in range(HINT_MIN_CASES - 1)}) == [], "too few cases to say"
