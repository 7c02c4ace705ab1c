"""The roster (harness.grading.roster): read, matched both ways, written into grades.csv; a malformed one is refused
with a message naming the problem and its row, exit 2, before anyone is graded."""

import csv
import io
import subprocess
import sys

import pytest

from harness.kernel.errors import UsageError
from harness.grading.roster import RosterError, Student, match, parse_roster, read_roster
from harness.grading.ledger import Ledger
from harness.kernel.paths import REPO
from harness.registry import load_chapter
from harness.render.csv import CSV_FIXED, ROSTER_COLUMNS
from harness.kernel.report import Report

CH = load_chapter("L10.8")


def test_a_roster_maps_entries_to_students_and_both_mismatches_are_found():
    roster = parse_roster("\ufeffSubmission, ID ,email,section\nalice,s001,alice@uni.edu,A\nbob,s002,,B\ncarol,s003,c@uni.edu,A\n")
    assert roster["bob"] == Student("s002", "") and roster["alice"].email == "alice@uni.edu"
    got = match(roster, ["alice", "bob.zip", "mallory", "spec.py"])
    assert got["students"] == {"alice": {"id": "s001", "email": "alice@uni.edu"}, "bob.zip": {"id": "s002", "email": ""}}
    assert got["unmatched"] == ["mallory", "spec.py"]
    assert got["without_submission"] == [{"submission": "carol", "id": "s003", "email": "c@uni.edu"}]
    assert parse_roster("submission,id\nx,1\n")["x"] == Student("1", "")  # email is optional


@pytest.mark.parametrize("text, said", [
    ("", "is empty"),
    ("name,email\nalice,a@x\n", "has no column submission or id"),
    ("submission,email\nalice,a@x\n", "has no column id"),
    ("submission,id\nalice,1\n,2\n", "row 3: the submission is empty"),
    ("submission,id\nalice,\n", "row 2: the id is empty"),
    ("submission,id\nalice,1\nalice,2\n", "row 3: the submission 'alice' is listed twice"),
    ("submission,id\nalice,1\nbob,1\n", "row 3: the id '1' is listed twice (also row 2)"),
])
def test_a_malformed_roster_is_refused_naming_the_problem(text, said):
    with pytest.raises(RosterError) as e:
        parse_roster(text, "r.csv")
    assert said in str(e.value) and isinstance(e.value, UsageError) and e.value.exit_code == 2


def test_a_roster_file_that_cannot_be_read_is_refused(tmp_path):
    (tmp_path / "latin1.csv").write_bytes("submission,id\nJos\xe9,1\n".encode("latin-1"))
    for path, said in ((tmp_path / "none.csv", "no such file"), (tmp_path, "is a folder"), (tmp_path / "latin1.csv", "not UTF-8")):
        with pytest.raises(RosterError, match=said):
            read_roster(path)


def test_grades_csv_gains_id_and_email_after_the_fixed_columns(tmp_path):
    matched = match(parse_roster("submission,id,email\nalice,s001,=cmd@x\n"), ["alice", "zed"])
    results = tmp_path / "results"
    results.mkdir()
    ledger = Ledger(CH, ["alice", "zed"], tmp_path / "grades.csv", results, None, True, {"digest": "x"}, "bwrap", matched)
    for name in ("alice", "zed"):
        ledger.record(Report.for_rejected(CH, name, True, "empty"), 0.0, "", "local")
    rows = list(csv.reader(io.StringIO((tmp_path / "grades.csv").read_text())))
    assert rows[0][:len(CSV_FIXED) + 2] == CSV_FIXED + ROSTER_COLUMNS and rows[0][len(CSV_FIXED) + 2] == CH.tests[0].name
    by_name = {r[0]: r for r in rows[1:]}
    assert by_name["alice"][len(CSV_FIXED):len(CSV_FIXED) + 2] == ["s001", "'=cmd@x"]  # a formula-like email is quoted
    assert by_name["zed"][len(CSV_FIXED):len(CSV_FIXED) + 2] == ["", ""]


def test_ol_grade_refuses_a_malformed_roster_before_grading_anyone(tmp_path):
    (tmp_path / "class" / "alice").mkdir(parents=True)
    (tmp_path / "roster.csv").write_text("student,email\nalice,a@x\n")
    r = subprocess.run([sys.executable, "-m", "harness.cli", "grade", "L10.8", str(tmp_path / "class"), "--roster",
                        str(tmp_path / "roster.csv"), "--out", str(tmp_path / "grades.csv"), "--no-sandbox"],
                       capture_output=True, text=True, cwd=REPO, timeout=120)
    assert r.returncode == 2 and "has no column submission or id" in r.stderr, r.stderr
    assert not (tmp_path / "grades.csv").exists() and not (tmp_path / "grades-results").exists()
