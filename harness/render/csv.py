"""A class's grades as CSV: one row per submission; an ungraded one says so, with the reason, and has
no score (never a 0 that looks like a grade); a rejected one (no submission) has 0, with the reason.

Safe in every locale: every text cell is quoted and spelled by harness.render.literal.csv_cell (no formula, no
bidi override or control; csv_text gives a cell's text back); the numbers ol writes stay numbers, unquoted.
"""

import csv
import io

from .literal import csv_cell

# `language` last of the fixed columns: the earlier ones keep their places for scripts that read them by position
CSV_FIXED = ["submission", "status", "passed", "failed", "score", "max_score", "wall_s", "reason", "sandbox", "language"]


ROSTER_COLUMNS = ["student_id", "email"]  # with `ol grade --roster`: after `language`, before the tests'


def grades_csv(result: dict) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n", quoting=csv.QUOTE_NONNUMERIC)  # every text cell quoted; numbers bare
    roster = result.get("roster")
    rows = [CSV_FIXED + (ROSTER_COLUMNS if roster is not None else []) + result["tests"]]
    for r, wall in zip(result["reports"], result["wall_s"]):
        row = _row(r, wall, result["tests"])
        if roster is not None:
            student = roster["students"].get(r.submission, {})
            row[len(CSV_FIXED):len(CSV_FIXED)] = [student.get("id", ""), student.get("email", "")]
        rows.append(row)
    for row in rows:
        w.writerow([csv_cell(c) for c in row])
    return buf.getvalue()


def _row(r, wall: float, tests: list[str]) -> list:
    """One submission's cells: the fixed columns, then one outcome per test (an ungraded or rejected one: its state)."""
    status = "ungraded" if r.ungraded is not None else "rejected" if r.rejected is not None else "graded"
    outcomes = {t.name: t.outcome.value for t in r.tests}
    counts = (["", "", ""] if status == "ungraded" else [0, len(r.tests), 0.0] if status == "rejected"
              else [r.passed, len(r.tests) - r.passed, r.score])  # passed, failed, score
    return [r.submission, status, *counts, r.max_score, wall, r.ungraded or r.rejected or "", r.sandbox or "",
            r.language or "", *(outcomes.get(n, "missing") if status == "graded" else status for n in tests)]
