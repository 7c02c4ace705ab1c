"""Pitfall hints from recorded answers: "your answers match pitfall sNN" only when they truly do.

The golden file records each pitfall's answer on every case where it shows (`"pitfalls": {"s07": <answer>}`);
the tests record the submission's answers (`Impl.record`). A pitfall is named when the submission answers as it
does on at least HINT_SHARE, and HINT_MIN_CASES, of those cases. Nothing is re-run.
"""

HINT_SHARE = 0.8  # most of the pitfall's cases, so a submission with that bug and another small one still gets it
HINT_MIN_CASES = 3  # one or two coincidences (a short draft that two bugs share) are no diagnosis


def pitfall_cases(golden: dict) -> dict[str, dict[str, object]]:
    """pitfall id -> {case id: the pitfall's answer}, over every section of the golden file."""
    shows: dict[str, dict[str, object]] = {}
    for section in golden.values():
        if not isinstance(section, list):
            continue
        for case in section:
            if isinstance(case, dict) and isinstance(case.get("pitfalls"), dict):
                for pid, answer in case["pitfalls"].items():
                    shows.setdefault(pid, {})[case["id"]] = answer
    return shows


def pitfall_matches(chapter, golden: dict, answers: dict[str, object]) -> list[dict]:
    """The chapter's pitfalls the recorded answers match, the best match first."""
    shows = pitfall_cases(golden)
    found = []
    for m in chapter.mutants:
        cases = shows.get(m.id, {})
        matched = sum(cid in answers and answers[cid] == answer for cid, answer in cases.items())
        if cases and matched >= HINT_MIN_CASES and matched >= HINT_SHARE * len(cases):
            found.append({"id": m.id, "pitfall": m.pitfall, "matched": matched, "shows": len(cases)})
    return sorted(found, key=lambda f: (-f["matched"] / f["shows"], -f["matched"]))
