"""A class's grades as CSV: one row per submission, fixed columns then one outcome per chapter test."""

import csv
import io

CSV_FIXED = ["submission", "passed", "failed", "score", "max_score", "wall_s"]


def grades_csv(result: dict) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_FIXED + result["tests"])
    for r, wall in zip(result["reports"], result["wall_s"]):
        outcomes = {t.name: t.outcome.value for t in r.tests}
        w.writerow([r.submission, r.passed, len(r.tests) - r.passed, r.score, r.max_score, wall] +
                   [outcomes.get(n, "missing") for n in result["tests"]])
    return buf.getvalue()
