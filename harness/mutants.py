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


def _check_one(chapter_name: str, subject: str, language: str = "python") -> Report:
    return run_check(load_chapter(chapter_name), subject, language=language)


def verdict(report: Report | None, must_fail: str) -> MutantVerdict:
    if report is None:
        return MutantVerdict.UNVIABLE
    named = next(t for t in report.tests if t.name == must_fail)
    if named.outcome is Outcome.TIMEOUT:
        return MutantVerdict.TIMEOUT
    return MutantVerdict.MISSED if named.outcome.passed else MutantVerdict.CAUGHT


def ported(chapter: Chapter, language: str) -> list:
    """The chapter's mutants that have a port in `language` (every one, for Python)."""
    return [m for m in chapter.mutants if language == "python" or language in m.patches]


def kill_matrix(chapter: Chapter, jobs: int | None = None, on_done=None, language: str = "python") -> dict:
    """Run the reference and every mutant of `language` (in parallel processes; a compiled language's
    reference and mutants each build first, confined); `on_done(label)` after each."""
    chapter.language(language)
    mutants = ported(chapter, language)
    subjects = ["reference"] + [f"mutant:{m.id}" for m in mutants]
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
    ref = reports["reference"]
    if ref is None:
        raise OlError(f"the reference could not be checked: {problems['reference']}")
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
