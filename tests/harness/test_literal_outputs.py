"""Every output shows what a submission wrote, literally, and nothing it wrote acts: a name or a message
is never a spreadsheet formula (grades.csv), never rich markup, an emoji code or a terminal control (the
console), never a character that stops the XML parsing (JUnit), and never a control in Gradescope's text.

The renderers are given each hostile input directly (fast); two runs of the real commands (one `ol check`
of a submission whose code raises a hostile message, one `ol grade` of a class with hostile names) show
the same of what the student's code really produces, through the worker and the judge."""

import csv
from dataclasses import replace
import io
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from rich.console import Console

from harness.grading.ledger import ClassSummary
from harness.kernel.outcomes import Outcome
from harness.registry import load_chapter
from harness.render import console as show
from harness.render.csv import grades_csv
from harness.render.gradescope import results_json, upload_rejected
from harness.render.junit import junit_xml
from harness.render.literal import csv_cell, csv_text, visible, xml_text
from harness.cli.progress import GradeProgress
from harness.kernel.report import Report, TestResult as Result

REPO = Path(__file__).resolve().parents[2]
CH = load_chapter("L10.8")

# what a student's exception message may hold: controls that clear the screen, move the cursor home, return the
# carriage, back up, a C1 CSI, a bidi override, a lone surrogate, a noncharacter; markup and an emoji code that
# would fake a verdict; a second line
HOSTILE = ("nul\x00 clear\x1b[2J\x1b[H [red]16 of 16 passed[/] :white_check_mark: cr\r bs\x08 bell\x07 c1\x9b "
           "bidi\u202e lone\ud800 ffff\uffff\nsecond line")
SHOWN = visible(HOSTILE)  # how a person is shown it
FORMULAS = ["=cmd|' /C calc'!A0", "=HYPERLINK(\"http://x\")", "+1", "-x", "@SUM(A1)", "\tTab", "\rCR", "\0NUL"]
MARKUP = ["[bold]x[/]", "[/x]", ":white_check_mark:"]  # rich markup (the second one it cannot even parse), an emoji code
RAW = ["\x00", "\x1b", "\r", "\x08", "\x07", "\x9b", "\u202e", "\ud800"]  # none may reach a terminal


def report(name: str, message: str = HOSTILE, *, load_error: str | None = None, ungraded: str | None = None) -> Report:
    tests = [Result(t.name, t.kind, Outcome.ERROR if i % 2 else Outcome.FAIL, 0.01, message, 0.0, t.points)
             for i, t in enumerate(CH.tests)]
    tests[0] = Result(CH.tests[0].name, CH.tests[0].kind, Outcome.PASS, 0.01, "", CH.tests[0].points, CH.tests[0].points)
    return Report("L10.8", name, True, tests, 1.0, load_error=load_error, ungraded=ungraded, sandbox="bwrap", language="python")


def terminal() -> tuple[Console, io.StringIO]:
    """The CLI's console, as it draws on a colour terminal (so rich writes escape sequences of its own)."""
    buf = io.StringIO()
    return Console(file=buf, force_terminal=True, color_system="truecolor", width=200, highlight=False, soft_wrap=True), buf


def seen(raw: str) -> str:
    """What the terminal shows of `raw`: rich's own styles (SGR sequences) removed. Nothing else may be an escape."""
    return re.sub(r"\x1b\[[0-9;]*m", "", raw)


def assert_inert(raw: str) -> None:
    text = seen(raw)
    for ch in RAW:
        assert ch not in text, f"{ch!r} reached the terminal: {text[:300]!r}"


# ---- grades.csv ----

def test_csv_neutralises_every_text_cell_a_spreadsheet_would_run_and_keeps_numbers_numbers():
    names = FORMULAS + MARKUP + ["plain", "it's = fine", "'=quoted"]
    reports = [report(n) for n in names]
    reports.append(report("-ungraded", ungraded="-rf: the judge refused it as input"))
    negative = report("negative")
    negative = negative.but(tests=(replace(negative.tests[0], points=-1.5), *negative.tests[1:]))  # a negative number ol wrote stays a number
    reports.append(negative)
    result = {"tests": [t.name for t in CH.tests], "reports": reports, "wall_s": [1.25] * len(reports)}
    rows = list(csv.DictReader(io.StringIO(grades_csv(result))))
    got = [r["submission"] for r in rows]
    want = ["'=cmd|'' /C calc'!A0", "'=HYPERLINK(\"http://x\")", "'+1", "'-x", "'@SUM(A1)", "\\tTab", "\\rCR", "\\x00NUL"]
    assert got == want + MARKUP + ["plain", "it's = fine", "''=quoted", "'-ungraded", "negative"], got
    assert [csv_text(g) for g in got] == [visible(n) for n in names] + ["-ungraded", "negative"]  # csv_text: the name, spelled
    for r in rows:
        assert not r["submission"].startswith(("=", "+", "-", "@", "\t", "\r", "\0"))
        assert not r["reason"].startswith(("=", "+", "-", "@", "\t", "\r", "\0"))
    assert rows[-2]["reason"] == "'-rf: the judge refused it as input" and rows[-2]["score"] == ""
    assert rows[-1]["score"] == "-1.5" and rows[-1]["wall_s"] == "1.25" and rows[0]["passed"] == "1", rows[-1]
    assert rows[0]["max_score"] == str(float(sum(t.points for t in CH.tests)))
    assert csv_cell(-2) == -2 and csv_cell(0.5) == 0.5 and csv_cell("") == ""


# names and roster fields a spreadsheet in another locale would run or show reordered: a formula after a `;` (Excel's
# separator in most continental European locales), a tab, a bar, a comma or a line's end, behind spaces or quotes;
# the full-width forms; bidirectional overrides and isolates, zero-width and other invisible characters
LOCALE_HOSTILE = ["bob;=HYPERLINK(\"http://evil\",\"x\")", "x;+1;-2;@SUM(A1)", "a|=cmd|' /C calc'!A0", "c,=1+1",
                  "d; =1", "e;\"=1\"", "f\n=1", "g\t=1", "\uff1dSUM(A1)", "h;\uff0b1", "i\uff1b=1", "\u202eevil\u202c",
                  "j\u2066k\u2069", "l\u200bm", "n\u200fo\u061c", "p\ufeffq", "r;'s", "Jos\udce9;=1"]
LOCALE_FORMULA = ("=", "+", "-", "@", "\uff1d", "\uff0b", "\uff0d", "\uff20")


def _locale_result() -> tuple[dict, list[tuple[str, str, str]]]:
    """A class whose names, reasons and roster fields are LOCALE_HOSTILE: (the result, [(name, id, email)])."""
    students = [(n, f"{i};={n}", f"{n}@x;-cmd") for i, n in enumerate(LOCALE_HOSTILE)]
    reports = [report(n) if i % 3 else Report.for_rejected(CH, n, True, f"{n}: rejected; =why") for i, n in enumerate(LOCALE_HOSTILE)]
    roster = {"students": {n: {"id": sid, "email": mail} for n, sid, mail in students}, "unmatched": [], "without_submission": []}
    return {"tests": [t.name for t in CH.tests], "reports": reports, "wall_s": [2.5] * len(reports), "roster": roster}, students


@pytest.mark.parametrize("sep", [",", ";", "\t"])
def test_csv_shows_no_formula_and_no_invisible_character_with_any_separator(sep):
    """grades.csv read as a spreadsheet of another locale reads it (issue 36, item 7): split at `;` or a tab instead
    of the comma, with or without taking double quotes as quoting, no field begins as a formula (past the spaces
    and quotes a reader may drop); no character of the file is invisible or reorders text; every text cell is
    quoted (a reader taking each unquoted field for a number reads the whole file)."""
    result, _ = _locale_result()
    text = grades_csv(result)
    assert all(c == "\n" or c.isprintable() for c in text), [c for c in text if not c.isprintable() and c != "\n"][:5]
    for quoting in (csv.QUOTE_MINIMAL, csv.QUOTE_NONE):
        for row in csv.reader(io.StringIO(text), delimiter=sep, quoting=quoting):
            for field in row:
                for line in field.split("\n"):  # a reader may also end a row at a line's end inside a field
                    assert not line.lstrip(' "').startswith(LOCALE_FORMULA), (sep, quoting, field)
    list(csv.reader(io.StringIO(text), quoting=csv.QUOTE_NONNUMERIC))  # raises on an unquoted field that is no number


def test_csv_gives_each_hostile_name_and_roster_field_back_spelled_out():
    result, students = _locale_result()
    rows = list(csv.DictReader(io.StringIO(grades_csv(result))))
    assert [(csv_text(r["submission"]), csv_text(r["student_id"]), csv_text(r["email"])) for r in rows] == \
        [tuple(visible(x) for x in s) for s in students]
    assert "\\u202eevil\\u202c" in {r["submission"] for r in rows} and rows[0]["wall_s"] == "2.5"


# ---- the console ----

def test_the_console_draws_a_check_report_literally():
    for name in ["[bold]x[/]", "[/x]", "\x1b[2Jclear", "=cmd|calc"]:
        con, buf = terminal()
        show.report(con, report(name))
        show.hints(con, report(name))
        raw = buf.getvalue()
        assert_inert(raw)
        text = seen(raw)
        assert f"L10.8 on {visible(name)} (--ref-deps)" in text, text[:400]
        assert text.count(SHOWN) == len(CH.tests) - 1, text  # every failed test's message, whole, as written
        assert "[red]16 of 16 passed[/] :white_check_mark:" in text and "\\x1b[2J\\x1b[H" in text and "\\ud800" in text
        assert f"1 of {len(CH.tests)} passed" in text  # ol's own line
        con, buf = terminal()
        show.report(con, report(name, load_error=f"could not be imported: {HOSTILE}"))
        assert_inert(buf.getvalue())
        assert f"could not be imported: {SHOWN}" in seen(buf.getvalue())


def test_the_console_draws_a_class_its_progress_and_a_diff_literally():
    names = FORMULAS + MARKUP + ["\x1b[2Jclear"]
    reports = [report(n) for n in names] + [report("[/x]-ungraded", ungraded=f"the judge refused it as input: {HOSTILE}")]
    result = {"seed": 7, "reports": reports, "wall_s": [1.0] * len(reports), "missing": ["[/y]\x1b[H"],
              "summary": ClassSummary(len(reports), len(reports) - 1, 0, 1, 0, {t.name: 1 for t in CH.tests}, {})}
    con, buf = terminal()
    show.grades(con, "L10.8", result)
    progress = GradeProgress(con)
    for r in reports:
        progress.started(r.submission, "tcp://[w]:1\x1b[2J")
        progress.finished(r, 1.0, "tcp://[w]:1\x1b[2J")
    raw = buf.getvalue()
    assert_inert(raw)
    text = seen(raw)
    for n in names:
        assert text.count(visible(n)) >= 2, (n, text)  # its row of the table, its progress line
    assert f"ungraded [/x]-ungraded: the judge refused it as input: {SHOWN}" in text
    assert f"ungraded [/x]-ungraded on tcp://[w]:1\\x1b[2J: the judge refused it as input: {SHOWN}" in text
    assert "not graded (the run stopped first): [/y]\\x1b[H" in text
    con, buf = terminal()
    row = {"id": "pl000", "tags": ["t"], "inputs": "ctx [1, 2]", "expected": "[3]", "got": f"error: {HOSTILE}",
           "first_differing_token": None, "notes": ""}
    failed = {"function": "prompt_lookup", "test": "t", "section": "prompt_lookup", "message": f"smallest input {HOSTILE}"}
    show.diff(con, {"chapter": "L10.8", "sections": {"prompt_lookup": {"total": 1, "divergent": [row]}}, "by_tag": {"t": 1},
                    "divergent": 1, "submission": "[bold]x[/]\x1b[2J", "properties": [failed]}, show_all=True)
    assert_inert(buf.getvalue())
    text = seen(buf.getvalue())
    assert "1 divergent cases for [bold]x[/]\\x1b[2J" in text and "16 of 16 passed[/]" in text, text
    assert "property check failed (prompt_lookup, test t): smallest input" in text, text  # a property's message too
    assert text.count("16 of 16 passed[/]") == 2, text


def test_a_cli_error_quoting_a_submission_is_drawn_literally(tmp_path):
    """An OlError's message names the path it refused: the path is shown as written, its controls spelled out."""
    bad = tmp_path / "\x1b[2J[bold]nope\x07"
    r = subprocess.run([sys.executable, "-m", "harness.cli", "check", "L10.8", "--submission", str(bad)], cwd=tmp_path,
                       capture_output=True, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    err = r.stderr.decode("utf-8", "replace")
    assert r.returncode == 2 and "no submission at" in err, err
    assert "\\x1b[2J[bold]nope\\x07" in err and b"\x1b" not in r.stderr and b"\x07" not in r.stderr, err


# ---- JUnit XML ----

def test_junit_always_parses_and_keeps_every_character_xml_allows():
    for name in ["=cmd|calc", "[bold]x[/]", "<a>&amp;\"'", "\x1b[2Jclear\x00"]:
        xml = junit_xml(report(name))
        root = ET.fromstring(xml)  # a forbidden character would stop the parser here
        suite = root.find("testsuite")
        assert suite.get("name") == f"L10.8 on {xml_text(name)}"
        bad = [e for e in suite.iter() if e.tag in ("failure", "error")]
        assert len(bad) == len(CH.tests) - 1
        for e in bad:
            assert e.text == xml_text(HOSTILE)  # the message, its forbidden characters spelled out, the rest as written
            assert e.get("message") == xml_text(HOSTILE).split("\n", 1)[0]
    kept = xml_text(HOSTILE)
    assert "[red]16 of 16 passed[/] :white_check_mark:" in kept and "\nsecond line" in kept and "bidi\u202e" in kept
    assert "nul\\x00 clear\\x1b[2J\\x1b[H" in kept and "lone\\ud800 ffff\\uffff" in kept and "c1\\x9b" in kept
    assert "cr\\r bs" in kept  # XML allows a carriage return, but a parser would read it back as a newline
    junit_xml(report(name)).encode("utf-8")  # no lone surrogate left to make writing the file fail


# ---- Gradescope's results.json ----

def test_gradescope_text_spells_out_controls_and_stays_strict_json():
    for rep in (report("[bold]x[/]"), report("x", load_error=f"could not be imported: {HOSTILE}")):
        data = results_json(rep)
        text = json.dumps(data, ensure_ascii=False)
        text.encode("utf-8")  # a lone surrogate would fail here (and in parsers stricter than Python's)
        for out in [data["output"]] + [t["output"] for t in data["tests"]]:
            assert all(c == "\n" or c.isprintable() for c in out), repr(out[:200])
        assert any(SHOWN in t["output"] for t in data["tests"]) or SHOWN in data["output"]
    rejected = upload_rejected([{"name": "t", "max_score": 1}], "spec.py", "\x1b[2J.py, [x]/", "no spec.py")
    assert rejected["output"] == "Nothing was graded (your upload held \\x1b[2J.py, [x]/): upload spec.py."


# ---- the real commands ----

REF_SPEC = (REPO / "reference" / "tinyllm" / "infer" / "spec.py").read_text()
RAISES = f'''

def prompt_lookup(ctx, k, max_ngram, min_ngram):
    raise ValueError({HOSTILE!r})
'''


@pytest.mark.slow(s=20)
def test_ol_check_shows_a_hostile_exception_message_literally_in_every_output(tmp_path):
    sub = tmp_path / "[bold red]x"  # a folder's name holds no /
    sub.mkdir()
    (sub / "spec.py").write_text(REF_SPEC + RAISES)
    r = subprocess.run([sys.executable, "-m", "harness.cli", "check", "L10.8", "--submission", str(sub / "spec.py"),
                        "--junit", "j.xml", "--gradescope", "g.json", "--json", "r.json"],
                       cwd=tmp_path, capture_output=True, timeout=600, env={**os.environ, "PYTHONPATH": str(REPO)})
    out = r.stdout.decode("utf-8")  # strict: a lone surrogate written raw would not decode
    assert r.returncode == 1, out[-3000:] + r.stderr.decode("utf-8", "replace")[-3000:]
    for ch in RAW:
        assert ch.encode("utf-8", "surrogatepass") not in r.stdout + r.stderr, f"{ch!r} reached the terminal"
    message = f") raised ValueError: {SHOWN}"
    assert message in out and f"L10.8 on {sub}/spec.py" in out, out[-3000:]
    assert re.search(r"\n\d+ of \d+ passed, score", out), out[-500:]
    report_ = json.loads((tmp_path / "r.json").read_text())  # the JSON report keeps the exact text (JSON escapes it)
    raised = [t for t in report_["tests"] if HOSTILE in t["message"]]
    assert raised, [t["message"][:200] for t in report_["tests"]]
    junit = ET.parse(tmp_path / "j.xml").getroot()
    texts = [e.text for e in junit.iter() if e.tag in ("failure", "error")]
    assert any(f") raised ValueError: {xml_text(HOSTILE)}" in t for t in texts), texts
    grades = json.loads((tmp_path / "g.json").read_text(encoding="utf-8"))
    assert any(message in t["output"] for t in grades["tests"]), [t["output"][:200] for t in grades["tests"]]


@pytest.mark.slow(s=25)
def test_ol_grade_of_hostile_names_writes_inert_csv_cells_and_draws_them_literally(tmp_path):
    """A class whose folder names are formulas, markup and a terminal control; each one's spec.py raises the
    hostile message on import (graded, 0 of 16, quickly)."""
    names = ["=cmd|calc", "+1", "-x", "@SUM(A1)", "[bold red]x", "\x1b[2Jclear", "bob;=HYPERLINK(1)", "\u202eevil"]  # no /
    klass = tmp_path / "class"
    for n in names:
        (klass / n).mkdir(parents=True)
        (klass / n / "spec.py").write_text(f"raise ValueError({HOSTILE!r})\n")
    with open(tmp_path / "roster.csv", "w", newline="", encoding="utf-8") as f:  # roster fields as hostile as the names
        csv.writer(f).writerows([["submission", "id", "email"]] +
                                [[n, f"{i};=HYPERLINK(\"x\")", f"\u202e{i}@x;-1"] for i, n in enumerate(names)])
    r = subprocess.run([sys.executable, "-m", "harness.cli", "grade", "L10.8", str(klass), "--jobs", "2", "--ref-deps",
                        "--shipped-cases", "--out", str(tmp_path / "grades.csv"), "--roster", str(tmp_path / "roster.csv")],
                       cwd=tmp_path, capture_output=True, timeout=900, env={**os.environ, "PYTHONPATH": str(REPO)})
    out, err = r.stdout.decode("utf-8"), r.stderr.decode("utf-8")
    assert r.returncode == 0, out[-3000:] + err[-3000:]
    with open(tmp_path / "grades.csv", newline="") as f:
        rows = {row["submission"]: row for row in csv.DictReader(f)}
    assert set(rows) == {"'=cmd|calc", "'+1", "'-x", "'@SUM(A1)", "[bold red]x", "\\x1b[2Jclear", "bob;'=HYPERLINK(1)",
                         "\\u202eevil"}, sorted(rows)
    for row in rows.values():
        assert row["status"] == "graded" and row["passed"] == "0" and row["score"] == "0.0", row
        assert row["student_id"].endswith(";'=HYPERLINK(\"x\")") and row["email"].startswith("\\u202e"), row
    text = (tmp_path / "grades.csv").read_text(encoding="utf-8")
    assert all(c == "\n" or c.isprintable() for c in text)
    for sep in (";", "\t"):  # as Excel opens it in a continental European locale, and as a tab-separated sheet
        for row in csv.reader(io.StringIO(text), delimiter=sep):
            assert not any(field.lstrip(' "').startswith(LOCALE_FORMULA) for field in row), row
    for ch in RAW:
        assert ch.encode("utf-8", "surrogatepass") not in r.stdout + r.stderr, f"{ch!r} reached the terminal"
    for n in names:
        assert visible(n) in out and visible(n) in err, (n, out[-2000:], err[-2000:])  # the table, the progress lines
