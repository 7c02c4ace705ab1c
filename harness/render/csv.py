"""A class's grades as CSV: one row per submission; an ungraded one says so, with the reason, and has
no score (never a 0 that looks like a grade)."""

import csv
import io

# `language` last of the fixed columns: the earlier ones keep their places for scripts that read them by position
CSV_FIXED = ["submission", "status", "passed", "failed", "score", "max_score", "wall_s", "reason", "sandbox", "language"]


def grades_csv(result: dict) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_FIXED + result["tests"])
    for r, wall in zip(result["reports"], result["wall_s"]):
        if r.ungraded is not None:
            w.writerow([r.submission, "ungraded", "", "", "", r.max_score, wall, r.ungraded, r.sandbox or "", r.language or ""] +
                       ["ungraded"] * len(result["tests"]))
            continue
        outcomes = {t.name: t.outcome.value for t in r.tests}
        w.writerow([r.submission, "graded", r.passed, len(r.tests) - r.passed, r.score, r.max_score, wall, "",
                    r.sandbox or "", r.language or ""] +
                   [outcomes.get(n, "missing") for n in result["tests"]])
    return buf.getvalue()
