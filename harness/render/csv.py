"""A class's grades as CSV: one row per submission; an ungraded one says so, with the reason, and has
no score (never a 0 that looks like a grade)."""

import csv
import io

CSV_FIXED = ["submission", "language", "status", "passed", "failed", "score", "max_score", "wall_s", "reason", "sandbox"]


def grades_csv(result: dict) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_FIXED + result["tests"])
    for r, wall in zip(result["reports"], result["wall_s"]):
        if r.ungraded is not None:
            w.writerow([r.submission, r.language or "", "ungraded", "", "", "", r.max_score, wall, r.ungraded, r.sandbox or ""] +
                       ["ungraded"] * len(result["tests"]))
            continue
        outcomes = {t.name: t.outcome.value for t in r.tests}
        w.writerow([r.submission, r.language or "", "graded", r.passed, len(r.tests) - r.passed, r.score, r.max_score, wall, "",
                    r.sandbox or ""] +
                   [outcomes.get(n, "missing") for n in result["tests"]])
    return buf.getvalue()
