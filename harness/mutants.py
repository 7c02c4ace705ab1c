"""`ol mutants`: the kill matrix (the reference and every mutant against all tests), each mutant's
verdict (caught, missed, unviable, timeout), and whether `ol check`'s pitfall hint names the mutant
when it is graded as a submission (harness.hints: from the golden file's recorded answers).
"""

from concurrent.futures import ProcessPoolExecutor, as_completed
import os

from .check import run_check
from .errors import OlError
from .outcomes import MutantVerdict, Outcome
from .registry import Chapter, load_chapter
from .report import Report


def _check_one(chapter_name: str, subject: str) -> Report:
    return run_check(load_chapter(chapter_name), subject)


def verdict(report: Report | None, must_fail: str) -> MutantVerdict:
    if report is None:
        return MutantVerdict.UNVIABLE
    named = next(t for t in report.tests if t.name == must_fail)
    if named.outcome is Outcome.TIMEOUT:
        return MutantVerdict.TIMEOUT
    return MutantVerdict.MISSED if named.outcome.passed else MutantVerdict.CAUGHT


def kill_matrix(chapter: Chapter, jobs: int | None = None, on_done=None) -> dict:
    """Run the reference and every mutant (in parallel processes); `on_done(label)` after each."""
    subjects = ["reference"] + [f"mutant:{m.id}" for m in chapter.mutants]
    reports: dict[str, Report | None] = {}
    problems: dict[str, str] = {}
    with ProcessPoolExecutor(max_workers=jobs or os.cpu_count() or 1) as pool:
        futures = {pool.submit(_check_one, chapter.chapter, s): s for s in subjects}
        for f in as_completed(futures):
            try:
                reports[futures[f]] = f.result()
            except OlError as e:  # a patch that does not apply: the mutant is unviable, said so
                reports[futures[f]], problems[futures[f]] = None, str(e)
            if on_done:
                on_done(futures[f])
    ref = reports["reference"]
    if ref is None:
        raise OlError(f"the reference could not be checked: {problems['reference']}")
    mutants = []
    for m in chapter.mutants:
        rep = reports[f"mutant:{m.id}"]
        v = verdict(rep, m.must_fail)
        hints = [] if rep is None else [h["id"] for h in rep.pitfall_matches]
        mutants.append({"id": m.id, "pitfall": m.pitfall, "must_fail": m.must_fail, "verdict": v.value,
                        "failed_tests": [] if rep is None else [t.name for t in rep.tests if not t.outcome.passed],
                        "killed_by_named": v is MutantVerdict.CAUGHT, "problem": problems.get(f"mutant:{m.id}", ""),
                        "hints": hints, "hint_names_it": bool(hints) and hints[0] == m.id})
    return {"chapter": chapter.chapter, "reference_passes": ref.ok, "reference_hints": [h["id"] for h in ref.pitfall_matches],
            "reference_failed_tests": [t.name for t in ref.tests if not t.outcome.passed],
            "tests": [t.name for t in chapter.tests], "mutants": mutants,
            "ok": ref.ok and all(m["killed_by_named"] for m in mutants)}
