"""A class roster: which student each submission folder is, read from a CSV (`ol grade --roster roster.csv`).

A header row names at least `submission` (the entry's name: `alice`, or `alice.zip`, which `alice` matches too)
and `id`, optionally `email`; other columns are ignored. Every problem is refused before anyone is graded, naming
the line (no file, not UTF-8, no header, a missing column, an empty cell, a submission or id twice). `match` pairs
it with the class's entries: the students found, the entries no student claims, the students with no entry.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path

from ..kernel.errors import UsageError

REQUIRED = ("submission", "id")
HELP = "a CSV whose header names the columns submission,id[,email], one student a row"


@dataclass(frozen=True)
class Student:
    id: str
    email: str


class RosterError(UsageError):
    """The roster cannot be read as a roster (exit 2)."""


def read_roster(path: Path) -> dict[str, Student]:
    """submission name -> Student, from the CSV at `path`; a RosterError names what is wrong and where."""
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise RosterError(f"--roster {path}: no such file; name {HELP}") from None
    except IsADirectoryError:
        raise RosterError(f"--roster {path} is a folder; name {HELP}") from None
    except UnicodeDecodeError as e:
        raise RosterError(f"--roster {path} is not UTF-8 text (byte {e.start}); save it as UTF-8 CSV") from None
    except OSError as e:
        raise RosterError(f"--roster {path}: cannot read it ({e.strerror or e})") from None
    return parse_roster(text, str(path))


def parse_roster(text: str, where: str = "roster") -> dict[str, Student]:
    try:
        rows = list(csv.reader(io.StringIO(text.removeprefix("\ufeff"), newline="")))  # a BOM: Excel's "CSV UTF-8"
    except csv.Error as e:
        raise RosterError(f"--roster {where}: not a CSV file ({e}); it must be {HELP}") from None
    rows = [r for r in rows if any(cell.strip() for cell in r)]
    if not rows:
        raise RosterError(f"--roster {where} is empty; it must be {HELP}")
    header = [h.strip().lower() for h in rows[0]]
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise RosterError(f"--roster {where}: its header row ({', '.join(rows[0]) or 'empty'}) has no column "
                          f"{' or '.join(missing)}; it must be {HELP}")
    col = {name: header.index(name) for name in (*REQUIRED, "email") if name in header}
    students: dict[str, Student] = {}
    seen_ids: dict[str, int] = {}
    for line, row in enumerate(rows[1:], start=2):
        cell = {name: (row[i].strip() if i < len(row) else "") for name, i in col.items()}
        if not cell["submission"] or not cell["id"]:
            empty = "submission" if not cell["submission"] else "id"
            raise RosterError(f"--roster {where}, row {line}: the {empty} is empty; every row needs a submission and an id")
        if cell["submission"] in students:
            raise RosterError(f"--roster {where}, row {line}: the submission {cell['submission']!r} is listed twice")
        if cell["id"] in seen_ids:
            raise RosterError(f"--roster {where}, row {line}: the id {cell['id']!r} is listed twice "
                              f"(also row {seen_ids[cell['id']]})")
        seen_ids[cell["id"]] = line
        students[cell["submission"]] = Student(cell["id"], cell.get("email", ""))
    return students


def match(roster: dict[str, Student], names: list[str]) -> dict:
    """The roster against the class's entries: {"students": {entry: {"id", "email"}}, "unmatched": entries no
    student claims, "without_submission": roster rows (submission, id, email) matching no entry}."""
    found: dict[str, dict] = {}
    claimed = set()
    for name in sorted(names):
        s = roster.get(name) or (roster.get(name[:-4]) if name.endswith(".zip") else None)  # `alice.zip` is `alice` too
        if s is not None:
            found[name] = {"id": s.id, "email": s.email}
            claimed.add(name if name in roster else name[:-4])
    without = [{"submission": sub, "id": s.id, "email": s.email} for sub, s in sorted(roster.items()) if sub not in claimed]
    return {"students": found, "unmatched": sorted(n for n in names if n not in found), "without_submission": without}
