"""`ol diff`: the submission against every golden case, divergences side by side, counted by tag.

The chapter's `cases` module knows what its golden sections ask (cases.diff_cases); this module
counts, and renders nothing (harness.render.console does).
"""

from collections import Counter
import json

from ..kernel.errors import BuildFailed, UsageError
from ..registry import Chapter
from ..subjects.open import open_impl
from ..subjects.reference import pristine


def run_diff(chapter: Chapter, submission: str, ref_deps: bool = False, language: str | None = None,
             only: str | None = None) -> dict:
    """Every golden case the submission gets wrong, by section in the chapter's order (`only`: one section, or its
    function), and the failing property checks (`properties`; `elsewhere`: the other sections', when those shown
    agree). A submission that does not load (or compile) is one `load_error`, and no case is run."""
    from .runner import load_failure  # here: harness.check.runner imports pytest (0.36 s), which the CLI loads only to run

    golden = json.loads(chapter.golden.read_text())
    impl = open_impl(chapter, submission, ref_deps, language_name=language)
    try:
        cases = chapter.module("cases")
        shown = sections_for(cases, only)
        if (e := load_failure(impl)) is not None:
            why = f"{e.summary}\n{e}" if isinstance(e, BuildFailed) else str(e)  # a compiled language's build failed
            return {"chapter": chapter.chapter, "submission": submission, "sections": {}, "by_tag": {}, "divergent": 0,
                    "load_error": why.removeprefix("load: ")}
        sections = cases.diff_cases(impl, golden, pristine(chapter), shown)
        properties, elsewhere = _properties(cases, impl, golden, shown, sections)
    finally:
        impl.close()
    by_tag = Counter(t for s in sections.values() for r in s["divergent"] for t in r["tags"])
    return {"chapter": chapter.chapter, "submission": submission, "sections": sections,
            "by_tag": dict(sorted(by_tag.items(), key=lambda kv: -kv[1])),
            "divergent": sum(len(s["divergent"]) for s in sections.values()),
            "properties": properties, "elsewhere": elsewhere}


def _properties(cases, impl, golden: dict, shown: tuple[str, ...], sections: dict) -> tuple[list[dict], list[dict]]:
    """The failing property checks (the chapter's `diff_properties`: section, function, test, and the smallest input
    where the answers differ) of the sections shown; when those and the cases agree, those of the other sections."""
    if not hasattr(cases, "diff_properties"):
        return [], []
    failed = cases.diff_properties(impl, golden, shown)
    others = tuple(s for s in cases.CHAPTER_ORDER if s not in shown)
    if failed or any(s["divergent"] for s in sections.values()) or not others:
        return failed, []
    return failed, cases.diff_properties(impl, golden, others)


def sections_for(cases, only: str | None) -> tuple[str, ...]:
    """The sections --only names (a section or a contract function), or a UsageError listing both."""
    shown = cases.sections_for(only)
    if shown is None:
        raise UsageError(f"--only {only!r} is neither a section of the golden file ({', '.join(cases.CHAPTER_ORDER)}) nor a "
                         f"function whose cases it holds ({', '.join(cases.FUNCTIONS)})")
    return shown


def case_literal(chapter: Chapter, case_id: str, language: str) -> str:
    """One golden case as a test the student can paste, in `language` (the chapter's `literals` module)."""
    golden = json.loads(open(chapter.golden).read())
    literals = chapter.module("literals")
    found = literals.find(golden, case_id)
    if found is None:
        firsts = [cases[0]["id"] for cases in golden.values() if isinstance(cases, list) and cases and "id" in cases[0]]
        raise UsageError(f"the golden file of {chapter.chapter} has no case {case_id!r} (ids look like {', '.join(firsts)})")
    section, case = found
    if not hasattr(literals, language):
        raise UsageError(f"chapter {chapter.chapter} cannot print a case in {language!r}")
    return getattr(literals, language)(section, case)
