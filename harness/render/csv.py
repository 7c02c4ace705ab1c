"""A class's grades as CSV: one row per submission; an ungraded one says so, with the reason, and has
no score (never a 0 that looks like a grade); a rejected one (no submission) has 0, with the reason.

The stdlib csv module quotes (a row holding a carriage return has all its text cells quoted). Every
text cell (a submission's name, a reason, a column name) that a spreadsheet would take for a formula
(it begins with = + - @, a tab, a carriage return or NUL), or that begins with `'`, is written with
a leading `'` (harness.render.literal.csv_cell); the numbers ol writes are left numbers. A name that is
not UTF-8 (a surrogate escape of os.fsdecode) is written with its bytes spelled out (`\\udce9`)."""

import csv
import io

from .literal import csv_cell, encodable

# `language` last of the fixed columns: the earlier ones keep their places for scripts that read them by position
CSV_FIXED = ["submission", "status", "passed", "failed", "score", "max_score", "wall_s", "reason", "sandbox", "language"]


ROSTER_COLUMNS = ["student_id", "email"]  # with `ol grade --roster`: after `language`, before the tests'


def grades_csv(result: dict) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    roster = result.get("roster")
    rows = [CSV_FIXED + (ROSTER_COLUMNS if roster is not None else []) + result["tests"]]
    for r, wall in zip(result["reports"], result["wall_s"]):
        row = _row(r, wall, result["tests"])
        if roster is not None:
            student = roster["students"].get(r.submission, {})
            row[len(CSV_FIXED):len(CSV_FIXED)] = [student.get("id", ""), student.get("email", "")]
        rows.append(row)
    bare = csv.writer(buf, lineterminator="\n", quoting=csv.QUOTE_NONNUMERIC)
    for row in rows:
        cells = [csv_cell(encodable(c)) for c in row]
        # the csv module quotes a cell holding the line terminator (\n), not one holding a lone \r, which a reader
        # takes for the row's end: such a row has its text cells quoted (its numbers stay bare)
        (bare if any(isinstance(c, str) and "\r" in c for c in cells) else w).writerow(cells)
    return buf.getvalue()


def _row(r, wall: float, tests: list[str]) -> list:
    """One submission's cells: the fixed columns, then one outcome per test."""
    if r.ungraded is not None:
        return ([r.submission, "ungraded", "", "", "", r.max_score, wall, r.ungraded, r.sandbox or "", r.language or ""] +
                ["ungraded"] * len(tests))
    if r.rejected is not None:
        return ([r.submission, "rejected", 0, len(r.tests), 0.0, r.max_score, wall, r.rejected, r.sandbox or "",
                 r.language or ""] + ["rejected"] * len(tests))
    outcomes = {t.name: t.outcome.value for t in r.tests}
    return ([r.submission, "graded", r.passed, len(r.tests) - r.passed, r.score, r.max_score, wall, "",
             r.sandbox or "", r.language or ""] + [outcomes.get(n, "missing") for n in tests])
