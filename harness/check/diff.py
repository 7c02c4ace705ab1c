"""`ol diff`: the submission against every golden case, divergences side by side, counted by tag.

The chapter's `cases` module knows what its golden sections ask (cases.diff_cases); this module
counts, and renders nothing (harness.render.console does).
"""

from collections import Counter
import json

from ..errors import UsageError
from ..registry import Chapter
from ..subjects.open import open_impl
from ..subjects.reference import pristine


def run_diff(chapter: Chapter, submission: str, ref_deps: bool = False, golden_path=None, language: str | None = None) -> dict:
    golden = json.loads(open(golden_path or chapter.golden).read())
    impl = open_impl(chapter, submission, ref_deps, language_name=language)
    try:
        sections = chapter.module("cases").diff_cases(impl, golden, pristine())
    finally:
        impl.close()
    by_tag = Counter(t for s in sections.values() for r in s["divergent"] for t in r["tags"])
    return {"chapter": chapter.chapter, "submission": submission, "sections": sections,
            "by_tag": dict(sorted(by_tag.items(), key=lambda kv: -kv[1])),
            "divergent": sum(len(s["divergent"]) for s in sections.values())}


def case_literal(chapter: Chapter, case_id: str, language: str) -> str:
    """One golden case as a test the student can paste, in `language` (the chapter's `literals` module)."""
    golden = json.loads(open(chapter.golden).read())
    literals = chapter.module("literals")
    found = literals.find(golden, case_id)
    if found is None:
        raise UsageError(f"the golden file of {chapter.chapter} has no case {case_id!r} (ids look like v050, pl003, ng010, r002, g004)")
    section, case = found
    if not hasattr(literals, language):
        raise UsageError(f"chapter {chapter.chapter} cannot print a case in {language!r}")
    return getattr(literals, language)(section, case)
