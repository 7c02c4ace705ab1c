"""`ol diff`: the submission against every golden case, divergences side by side, counted by tag.

The chapter's `cases` module knows what its golden sections ask (cases.diff_cases); this module
counts, and renders nothing (harness.render.console does).
"""

from collections import Counter
import json

from .reference import pristine
from .registry import Chapter
from .subjects import open_impl


def run_diff(chapter: Chapter, submission: str, ref_deps: bool = False, golden_path=None) -> dict:
    golden = json.loads(open(golden_path or chapter.golden).read())
    impl = open_impl(chapter, submission, ref_deps)
    try:
        sections = chapter.module("cases").diff_cases(impl, golden, pristine())
    finally:
        impl.close()
    by_tag = Counter(t for s in sections.values() for r in s["divergent"] for t in r["tags"])
    return {"chapter": chapter.chapter, "submission": submission, "sections": sections,
            "by_tag": dict(sorted(by_tag.items(), key=lambda kv: -kv[1])),
            "divergent": sum(len(s["divergent"]) for s in sections.values())}
