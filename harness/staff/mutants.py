"""`ol mutants`: the kill matrix (the reference and every mutant against all tests), each mutant's
verdict (caught, missed, unviable, timeout), and whether `ol check`'s pitfall hint names the mutant
when it is graded as a submission (harness.check.hints: from the golden file's recorded answers).

`--set NAME` runs a further mutant set instead (chapter.toml's `mutant_sets`): there a mutant is killed
when any test fails, the set passes at SET_KILL_THRESHOLD killed, and a mutant killed only by tests
outside its `expected_by` is a finding (caught elsewhere), reported but not a catch by its rule's test.
"""

from concurrent.futures import ProcessPoolExecutor, as_completed
import os

from ..check.runner import run_check
from ..errors import OlError
from ..outcomes import MutantVerdict, Outcome
from ..registry import DEFAULT_SET, Chapter, load_chapter
from ..report import Report

# A further mutant set passes when at least this share of its mutants is killed (some test fails):
# issue 17's bar for the rule-by-rule set, which is written apart from the tests and so may keep a few
# survivors; the default set's named pitfalls must all be caught, each by its own test.
SET_KILL_THRESHOLD = 0.95


def _check_one(chapter_name: str, subject: str, language: str = "python") -> Report:
    return run_check(load_chapter(chapter_name), subject, language=language)


def verdict(report: Report | None, must_fail: str) -> MutantVerdict:
    if report is None:
        return MutantVerdict.UNVIABLE
    named = next(t for t in report.tests if t.name == must_fail)
    if named.outcome is Outcome.TIMEOUT:
        return MutantVerdict.TIMEOUT
    return MutantVerdict.MISSED if named.outcome.passed else MutantVerdict.CAUGHT


def set_verdict(report: Report | None, expected_by: tuple[str, ...]) -> MutantVerdict:
    """A further set's mutant: caught when a test of expected_by fails, caught elsewhere when only others do."""
    if report is None:
        return MutantVerdict.UNVIABLE
    failed = [t for t in report.tests if not t.outcome.passed]
    if any(t.name in expected_by and t.outcome is not Outcome.TIMEOUT for t in failed):
        return MutantVerdict.CAUGHT
    if any(t.name in expected_by for t in failed):
        return MutantVerdict.TIMEOUT
    return MutantVerdict.CAUGHT_ELSEWHERE if failed else MutantVerdict.MISSED


def ported(chapter: Chapter, language: str, mutant_set: str = DEFAULT_SET) -> list:
    """The set's mutants that have a port in `language` (for Python: every one with a Python patch), but for a row
    whose `<language>_none` leaves it out there (a slip the language cannot make, or one its contract made equivalent)."""
    return [m for m in chapter.mutant_set(mutant_set) if language not in getattr(m, "not_applicable", {})  # (s01..: none)
            and (m.patch is not None if language == "python" else language in m.patches)]


def _run(chapter: Chapter, subjects: list[str], jobs: int | None, on_done, language: str) -> tuple[dict, dict]:
    reports: dict[str, Report | None] = {}
    problems: dict[str, str] = {}
    with ProcessPoolExecutor(max_workers=jobs or os.cpu_count() or 1) as pool:
        futures = {pool.submit(_check_one, chapter.chapter, s, language): s for s in subjects}
        for f in as_completed(futures):
            try:
                reports[futures[f]] = f.result()
            except OlError as e:  # a patch that does not apply: the mutant is unviable, said so
                reports[futures[f]], problems[futures[f]] = None, str(e)
            if on_done:
                on_done(futures[f])
    if reports["reference"] is None:
        raise OlError(f"the reference could not be checked: {problems['reference']}")
    return reports, problems


def kill_matrix(chapter: Chapter, jobs: int | None = None, on_done=None, language: str = "python",
                mutant_set: str = DEFAULT_SET) -> dict:
    """Run the reference and every mutant of the set in `language` (in parallel processes; a compiled
    language's reference and mutants each build first, confined); `on_done(label)` after each."""
    chapter.language(language)
    if mutant_set != DEFAULT_SET:
        return _set_matrix(chapter, jobs, on_done, language, mutant_set)
    mutants = ported(chapter, language)
    subjects = ["reference"] + [f"mutant:{m.id}" for m in mutants]
    reports, problems = _run(chapter, subjects, jobs, on_done, language)
    ref = reports["reference"]
    rows = []
    for m in mutants:
        rep = reports[f"mutant:{m.id}"]
        v = verdict(rep, m.must_fail)
        hints = [] if rep is None else [h["id"] for h in rep.pitfall_matches]
        rows.append({"id": m.id, "pitfall": m.pitfall, "must_fail": m.must_fail, "verdict": v.value,
                        "failed_tests": [] if rep is None else [t.name for t in rep.tests if not t.outcome.passed],
                        "killed_by_named": v is MutantVerdict.CAUGHT, "problem": problems.get(f"mutant:{m.id}", ""),
                        "hints": hints, "hint_names_it": bool(hints) and hints[0] == m.id})
    missing = [m.id for m in chapter.mutants if m not in mutants]  # a pitfall with no port in this language
    return {"chapter": chapter.chapter, "language": language, "reference_passes": ref.ok,
            "reference_hints": [h["id"] for h in ref.pitfall_matches],
            "reference_failed_tests": [t.name for t in ref.tests if not t.outcome.passed],
            "tests": [t.name for t in chapter.tests], "mutants": rows, "not_ported": missing,
            "ok": ref.ok and all(m["killed_by_named"] for m in rows) and not missing}


def _set_matrix(chapter: Chapter, jobs: int | None, on_done, language: str, mutant_set: str) -> dict:
    """A further set's kill matrix: every test each mutant fails, killed or not, caught by an expected test
    or only elsewhere (a finding), and whether the set reaches SET_KILL_THRESHOLD."""
    every = chapter.mutant_set(mutant_set)
    mutants = ported(chapter, language, mutant_set)
    reports, problems = _run(chapter, ["reference"] + [f"mutant:{m.id}" for m in mutants], jobs, on_done, language)
    ref = reports["reference"]
    rows = []
    for m in mutants:
        rep = reports[f"mutant:{m.id}"]
        v = set_verdict(rep, m.expected_by)
        failed = [] if rep is None else [t.name for t in rep.tests if not t.outcome.passed]
        rows.append({"id": m.id, "rule": m.rule, "misconception": m.misconception, "expected_by": list(m.expected_by),
                     "differs_on": m.differs_on, "verdict": v.value, "failed_tests": failed, "killed": bool(failed),
                     "killed_by_expected": [t for t in failed if t in m.expected_by],
                     "problem": problems.get(f"mutant:{m.id}", "")})
    na = {m.id: m.not_applicable[language] for m in every if language in m.not_applicable and m not in mutants}
    missing = [m.id for m in every if m not in mutants and m.id not in na]
    killed = sum(r["killed"] for r in rows)
    total = len(every) - len(na)  # a mutant with no port (and no reason it cannot have one) counts as not killed
    rate = killed / total if total else 0.0
    return {"chapter": chapter.chapter, "language": language, "set": mutant_set, "reference_passes": ref.ok,
            "reference_failed_tests": [t.name for t in ref.tests if not t.outcome.passed],
            "tests": [t.name for t in chapter.tests], "mutants": rows, "not_ported": missing, "not_applicable": na,
            "killed": killed, "total": total, "kill_rate": rate, "threshold": SET_KILL_THRESHOLD,
            "survivors": [r["id"] for r in rows if not r["killed"] and not r["problem"]],
            "unviable": [r["id"] for r in rows if r["problem"]],
            "findings": [r["id"] for r in rows if r["verdict"] == MutantVerdict.CAUGHT_ELSEWHERE.value],
            "ok": ref.ok and not missing and not any(r["problem"] for r in rows) and rate >= SET_KILL_THRESHOLD}
